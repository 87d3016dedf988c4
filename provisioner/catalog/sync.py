"""`provisioner sync`: observe clusters, all at once, and write each into the catalog."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from provisioner.capacity import capacity
from provisioner.catalog.store import ClusterIdentity, DriftFinding, ObservedPool, Store, now
from provisioner.drivers import ClusterRef, Target
from provisioner.errors import CloudError
from provisioner.observe import Drivers, Observation, observe
from provisioner.plan import diff_cluster
from provisioner.retry import RetryPolicy
from provisioner.sharing import CompiledCluster


@dataclass
class SyncReport:
    run_id: int
    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # cluster -> error
    drift: dict[str, list[DriftFinding]] = field(default_factory=dict)
    pools: int = 0
    wall_seconds: float = 0.0
    write_seconds: float = 0.0  # summed over the clusters' transactions (writers overlap)

    @property
    def ok(self) -> bool:
        return not self.failed


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Whether cluster `name` falls in shard (i, n): a stable hash, so every run agrees."""
    if shard is None:
        return True
    index, count = shard
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % count == index


def identity(target: Target, in_fleet: bool = True) -> ClusterIdentity:
    ref = target.ref
    return ClusterIdentity(target.name, ref.cloud, ref.account, ref.location, ref.name, in_fleet)


def drift_of(compiled: CompiledCluster, observation: Observation) -> list[DriftFinding]:
    """The fleet cluster's pools that differ from the fleet: what plan would change, named as drift."""
    planned = diff_cluster(compiled, observation)
    findings = [
        DriftFinding(
            change.pool,
            change.action.drift,
            [{"field": f.field, "fleet": f.after, "cloud": f.before} for f in change.fields]
            if change.action.drift == "changed"
            else [],
        )
        for change in planned.changes
    ]
    findings += [
        DriftFinding(conflict.split()[1], "conflict", [{"message": conflict}])
        for conflict in planned.conflicts
    ]
    return findings


def sync(
    compiled: Sequence[CompiledCluster],
    drivers: Drivers,
    store: Store,
    *,
    shard: tuple[int, int] | None = None,
    discovered: Sequence[Target] = (),
    policy: RetryPolicy | None = None,
) -> SyncReport:
    """Observe the fleet's clusters (those in `shard`) and `discovered` ones; write each in its
    own transaction as soon as it is listed."""
    mine = [c for c in compiled if in_shard(c.name, shard)]
    extra = [c for c in discovered if in_shard(c.name, shard)]
    report = SyncReport(store.start_run(f"{shard[0]}/{shard[1]}" if shard else None))
    by_name = {c.name: c for c in mine}
    lock = threading.Lock()

    def write(observation: Observation) -> None:
        cluster = observation.target
        fleet_entry = by_name.get(cluster.name)
        who = identity(cluster, in_fleet=fleet_entry is not None)
        started = time.perf_counter()
        if observation.error is not None:
            store.record_failure(who, str(observation.error))
            with lock:
                report.failed[cluster.name] = str(observation.error)
                report.write_seconds += time.perf_counter() - started
            return
        pools = [ObservedPool(p, capacity(cluster.cloud, p)) for p in observation.pools]
        if fleet_entry is None:  # discovered: its GPU pools only
            pools = [p for p in pools if p.capacity.gpu_model is not None]
        drift = drift_of(fleet_entry, observation) if fleet_entry is not None else []
        store.record_cluster(who, pools, drift, now())
        with lock:
            report.written.append(cluster.name)
            report.pools += len(pools)
            if drift:
                report.drift[cluster.name] = drift
            report.write_seconds += time.perf_counter() - started

    started = time.perf_counter()
    observe([c.target for c in mine] + list(extra), drivers, policy, then=write)
    report.wall_seconds = time.perf_counter() - started
    report.written.sort()
    store.finish_run(
        report.run_id,
        ok=len(report.written),
        failed=len(report.failed),
        pools=report.pools,
        drift=sum(len(d) for d in report.drift.values()),
    )
    return report


def discover(
    compiled: Sequence[CompiledCluster], drivers: Drivers, policy: RetryPolicy | None = None
) -> tuple[list[Target], dict[str, str]]:
    """Clusters the credentials see in each subscription, project or region the fleet uses, that
    the fleet does not name, each named by its path; and, per scope whose listing failed, its error."""
    policy = policy or RetryPolicy()
    scopes: dict[tuple[str, str, str], ClusterRef] = {}
    for entry in compiled:
        ref = entry.target.ref
        scopes.setdefault((ref.cloud, ref.account, ref.location), ref)
    known = {c.target.ref.key for c in compiled}
    found: dict[str, Target] = {}
    errors: dict[str, str] = {}
    for (cloud, account, location), scope in scopes.items():
        try:
            listed = policy.call(lambda scope=scope: drivers(scope.cloud).discover(scope))
        except CloudError as error:
            errors[f"{cloud}/{account}/{location}"] = str(error)
            continue
        for ref in listed:
            if ref.key not in known:
                found.setdefault(ref.path, Target(ref.path, ref))
    return list(found.values()), errors
