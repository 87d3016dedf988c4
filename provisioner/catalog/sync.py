"""`provisioner sync`: observe clusters, all at once, and write each into the catalog.

A cluster that cannot be listed or written is recorded as failed (its rows kept) and the others
go on; the run is always closed, as failed with its error if the sync itself crashed. The catalog
holds fleet pools: the generations of a pool replaced create-first, which run side by side until
the old one is deleted, are one row under the fleet's name (`fleet_pools`)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from provisioner.capacity import capacity
from provisioner.catalog.database import reason_of
from provisioner.catalog.listing import Allocation, ClusterIdentity, DriftFinding, ObservedPool
from provisioner.catalog.store import Store, now
from provisioner.clusters import ClusterRef, Target
from provisioner.compile import CompiledCluster
from provisioner.errors import CloudError, KubeUnreachable
from provisioner.generations import group
from provisioner.observe import Drivers, Observation, observe
from provisioner.plan import cluster_changes
from provisioner.pools import PoolState, Scaling
from provisioner.retry import RetryPolicy
from provisioner.shards import Sharding

if TYPE_CHECKING:
    from provisioner.kube.contexts import KubeAccess


@dataclass
class SyncReport:
    run_id: int
    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # cluster -> error
    drift: dict[str, list[DriftFinding]] = field(default_factory=dict)
    pools: int = 0
    wall_seconds: float = 0.0
    write_seconds: float = 0.0  # summed over the clusters' transactions (writers overlap)
    # Clusters whose Kubernetes API did not answer: their allocation figures are kept, marked stale.
    allocation_stale: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def conflicts(self) -> list[tuple[str, str]]:
        """(cluster, message) per fleet pool that an unowned pool holds: written, but never applied."""
        return [
            (cluster, finding.fields[0]["message"])
            for cluster, findings in sorted(self.drift.items())
            for finding in findings
            if finding.kind == "conflict"
        ]


def in_shard(
    compiled: Sequence[CompiledCluster], discovered: Sequence[Target], shard: tuple[int, int] | None
) -> tuple[list[CompiledCluster], list[Target]]:
    """The fleet's clusters, and the discovered ones, that shard (i, n) syncs (all, if None)."""
    sharding = Sharding.of_fleet([c.target.ref for c in compiled], shard)
    return (
        [c for c in compiled if sharding.owns(c.target.ref)],
        [t for t in discovered if sharding.keeps_found(t.ref)],
    )


def identity(target: Target, in_fleet: bool = True) -> ClusterIdentity:
    ref = target.ref
    return ClusterIdentity(target.name, ref.cloud, ref.account, ref.location, ref.name, in_fleet)


def drift_of(compiled: CompiledCluster, observation: Observation) -> list[DriftFinding]:
    """The fleet cluster's pools that differ from the fleet: what plan would change, named as drift."""
    changes, conflicts = cluster_changes(compiled, observation)
    findings = [
        DriftFinding(
            change.pool,
            change.action.drift,
            [{"field": f.field, "fleet": f.after, "cloud": f.before} for f in change.fields]
            if change.action.drift in ("changed", "unowned")  # an adoption's own changes, if any
            else [],
        )
        for change in changes
    ]
    findings += [
        DriftFinding(conflict.pool, "conflict", [{"message": conflict.message}]) for conflict in conflicts
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
    kube: KubeAccess | None = None,
    adopted: Mapping[str, Collection[str]] | None = None,
    each_done: Callable[[], None] | None = None,
) -> SyncReport:
    """Observe the fleet's clusters (those of `shard`'s quota scopes, shards.Sharding) and
    `discovered` ones (discover's, of the same shard); write each as soon as it is listed, whole
    or not at all (Store.record_cluster). A sync writes only the clusters it lists: it never
    deletes or marks another cluster's rows, so shards at once each touch only their own. With
    `kube`, each fleet cluster's Kubernetes API is asked too, for what its pools' nodes advertise
    and what pods hold (allocation). `adopted`: per cluster, the pools an apply adopted;
    `each_done` is called as each cluster is written or has failed (progress)."""
    mine, extra = in_shard(compiled, discovered, shard)
    report = SyncReport(store.start_run(f"{shard[0]}/{shard[1]}" if shard else None))
    by_name = {c.name: c for c in mine}
    lock = threading.Lock()

    def failed(who: ClusterIdentity, error: str, started: float) -> None:
        # Best effort: a catalog that refused the cluster's rows may refuse this too; the run says it.
        with contextlib.suppress(SQLAlchemyError):
            store.record_failure(who, error)
        with lock:
            report.failed[who.name] = error
            report.write_seconds += time.perf_counter() - started

    def write(observation: Observation) -> None:
        cluster = observation.target
        fleet_entry = by_name.get(cluster.name)
        who = identity(cluster, in_fleet=fleet_entry is not None)
        started = time.perf_counter()
        if observation.error is not None:
            failed(who, str(observation.error), started)
            return
        pools = [ObservedPool(p, capacity(cluster.cloud, p)) for p in fleet_pools(observation.pools)]
        if fleet_entry is None:  # discovered: its GPU pools only
            pools = [p for p in pools if p.capacity.gpu_model is not None]
        drift = drift_of(fleet_entry, observation) if fleet_entry is not None else []
        allocation, unasked = _ask(kube, fleet_entry, pools, observation.pools)
        if unasked is not None:
            with lock:
                report.allocation_stale[cluster.name] = unasked
        try:
            store.record_cluster(
                who, pools, drift, now(), allocation=allocation, adopted=(adopted or {}).get(cluster.name, ())
            )
        except SQLAlchemyError as error:  # its transaction rolled back: its rows are as they were
            failed(who, f"cannot write to the catalog: {reason_of(error)}", started)
            return
        with lock:
            report.written.append(cluster.name)
            report.pools += len(pools)
            if drift:
                report.drift[cluster.name] = drift
            report.write_seconds += time.perf_counter() - started

    started = time.perf_counter()
    crash: str | None = None
    try:
        observe([c.target for c in mine] + list(extra), drivers, policy, then=_counted(write, each_done))
    except BaseException as error:
        crash = f"{type(error).__name__}: {error}"
        raise
    finally:
        report.wall_seconds = time.perf_counter() - started
        report.written.sort()
        # After a crash, a catalog that cannot close the run must not hide the crash's own error.
        with contextlib.suppress(SQLAlchemyError) if crash else contextlib.nullcontext():
            store.finish_run(
                report.run_id,
                ok=len(report.written),
                failed=len(report.failed),
                pools=report.pools,
                drift=sum(len(d) for d in report.drift.values()),
                error=crash,
            )
    return report


def fleet_pools(listed: Sequence[PoolState]) -> list[PoolState]:
    """A cluster's pools as the catalog holds them, one per fleet pool: a pool's generations (both
    run during a create-first replacement) as one, with the newest's settings under the fleet's
    name and the nodes of all (their bounds and their nodes now summed: pods of the pool land on
    any of them, by its provisioner.io/pool label)."""
    found = []
    for name, generations in group(listed).items():
        of, newest = generations.pools, generations.current
        if len(of) == 1 and newest.name == name:
            found.append(newest)
            continue
        scaling = Scaling(
            sum(p.scaling.min for p in of),
            sum(p.scaling.max for p in of),
            autoscaling=any(p.scaling.autoscaling for p in of),
        )
        counted = [p.nodes for p in of if p.nodes is not None]
        nodes = sum(counted) if counted else None
        found.append(dataclasses.replace(newest, name=name, scaling=scaling, nodes=nodes))
    return found


def _counted(
    write: Callable[[Observation], None], each_done: Callable[[], None] | None
) -> Callable[[Observation], None]:
    """`write`, then `each_done` (however the write ended)."""
    if each_done is None:
        return write

    def counted(observation: Observation) -> None:
        try:
            write(observation)
        finally:
            each_done()

    return counted


def _ask(
    kube: KubeAccess | None,
    entry: CompiledCluster | None,
    pools: Sequence[ObservedPool],
    listed: Sequence[PoolState],
) -> tuple[dict[str, Allocation] | None, str | None]:
    """The cluster's allocation, or None and why its Kubernetes API could not say (discovered
    clusters have no kubeconfig context the fleet names: they are not asked)."""
    if kube is None or entry is None:
        return None, None
    try:
        return allocation_of(kube, entry, pools, listed), None
    except KubeUnreachable as error:
        return None, str(error)


def allocation_of(
    kube: KubeAccess, entry: CompiledCluster, pools: Sequence[ObservedPool], listed: Sequence[PoolState]
) -> dict[str, Allocation]:
    """Per fleet pool (`pools`, of the cloud pools `listed`): its nodes that advertise GPUs, and the
    slices they advertise and pods hold, in the pool's own unit (the resource its capacity names:
    nvidia.com/gpu.shared, aliyun.com/gpu-mem, a DRA pool's DeviceClass, its devices times the pods
    sharing each where it is shared). A node is its fleet pool's by its provisioner.io/pool label;
    one without it, by its cloud's pool label, which names one generation (ACK: by its ID)."""
    from provisioner.kube.inspect import all_pool_label_keys, inspect_cluster, pool_allocation

    names = {p.name: p.pool_name for p in listed} | {p.cloud_id: p.pool_name for p in listed if p.cloud_id}
    dra = [p for p in pools if p.capacity.allocation_mode == "dra"]
    with kube.for_cluster(entry.cluster) as client:
        uses = inspect_cluster(client, all_pool_label_keys(), names, dra=bool(dra))
    shared = {p.state.name: p.capacity.replicas for p in dra if p.capacity.replicas}
    return pool_allocation(uses, {p.state.name: p.capacity.resource for p in pools}, shared)


def discover(
    compiled: Sequence[CompiledCluster],
    drivers: Drivers,
    policy: RetryPolicy | None = None,
    *,
    shard: tuple[int, int] | None = None,
) -> tuple[list[Target], dict[str, str]]:
    """Clusters the credentials see in each subscription, project or region the fleet uses, that
    the fleet does not name, each named by its path; and, per scope whose listing failed, its error.
    With `shard`, only the scopes whose quota scope that shard owns are listed (no two shards
    list, or draw on, one quota), and only the clusters it keeps (Sharding.keeps_found) returned."""
    policy = policy or RetryPolicy()
    sharding = Sharding.of_fleet([c.target.ref for c in compiled], shard)
    scopes: dict[tuple[str, str, str], ClusterRef] = {}
    for entry in compiled:
        ref = entry.target.ref
        if sharding.owns(ref):
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
            if ref.key not in known and sharding.keeps_found(ref):
                found.setdefault(ref.path, Target(ref.path, ref))
    return list(found.values()), errors
