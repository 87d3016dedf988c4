"""Four `sync --shard i/4` at once into one catalog, over the wire against the sandbox, on both
databases: each writes only its own quota scopes' clusters, together every cluster once."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from sqlalchemy import select

from provisioner.catalog.models import ClusterRow
from provisioner.catalog.store import Store
from provisioner.catalog.sync import SyncReport, discover, in_shard, sync
from provisioner.clusters import ClusterRef
from provisioner.compile import CompiledFleet, compile_file
from provisioner.drivers.registry import connect
from provisioner.observe import Drivers
from provisioner.quotas import quota_scope
from provisioner.retry import RetryPolicy
from provisioner.sandbox.quotas import QUOTAS_PATH
from provisioner.sandbox.server import Sandbox, SandboxSettings

SHARDS = 4
FAST = RetryPolicy(attempts=2, base=0.01)
# (cloud, the entry's place fields, clusters there): uneven scopes on all four clouds; two AKS
# resource groups of one subscription and two GKE locations of one project are one scope each.
SCOPES = [
    ("gke", "project: big-{s}\n    location: europe-west4", 5),
    ("gke", "project: big-{s}\n    location: us-central1", 2),
    ("gke", "project: mid-{s}\n    location: europe-west4", 4),
    ("gke", "project: one-{s}\n    location: us-central1", 1),
    ("aks", "subscription: 33333333-3333-3333-3333-33333333{h}\n    resourceGroup: rg-a-{s}", 3),
    ("aks", "subscription: 33333333-3333-3333-3333-33333333{h}\n    resourceGroup: rg-b-{s}", 2),
    ("aks", "subscription: 44444444-4444-4444-4444-44444444{h}\n    resourceGroup: rg-{s}", 2),
    (
        "eks",
        "region: us-west-2\n    nodeRole: arn:aws:iam::123456789012:role/n\n    subnets: [subnet-0abc1234]",
        3,
    ),
    (
        "eks",
        "region: eu-west-1\n    nodeRole: arn:aws:iam::123456789012:role/n\n    subnets: [subnet-0abc1234]",
        1,
    ),
    ("ack", "region: cn-hangzhou\n    vswitches: [vsw-0abc1234]", 2),
]
POOL = {
    "gke": "{name: l4, instanceType: g2-standard-8, nodes: {count: 1}}",
    "aks": "{name: t4, instanceType: Standard_NC4as_T4_v3, nodes: {count: 1}}",
    "eks": "{name: a10g, instanceType: g5.xlarge, nodes: {count: 1}}",
    "ack": "{name: a10, instanceType: ecs.gn7i-c8g1.2xlarge, nodes: {count: 1}}",
}


def fleet_text(suffix: str) -> str:
    lines = ["clusters:\n"]
    for n, (cloud, place, count) in enumerate(SCOPES):
        for i in range(count):
            name = f"{cloud}-{n}-{i}"
            where = place.format(s=suffix, h=suffix[:4])
            own = (
                f"clusterId: c{suffix}{n:02d}{i:02d}{'0' * 20}"
                if cloud == "ack"
                else f"cluster: {name}-{suffix}"
            )
            lines.append(f"  - name: {name}\n    cloud: {cloud}\n    {where}\n    {own}\n    pools:\n")
            lines.append(f"      - {POOL[cloud]}\n")
    return "".join(lines)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[CompiledFleet, Sandbox]]:
    path = tmp_path / "fleet.yaml"
    path.write_text(fleet_text(uuid.uuid4().hex[:8]), encoding="utf-8")
    compiled = compile_file(path)
    # Quotas enforced as the clouds publish them: four shards of this fleet stay within them.
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings(quotas=True)).start(
        [c.target for c in compiled.clusters]
    )
    yield compiled, sandbox
    sandbox.stop()


def shards_at_once(
    compiled: CompiledFleet, sandbox: Sandbox, url: str, discovering: bool = False
) -> list[SyncReport]:
    """SHARDS syncs, each with its own store and drivers (as its own pod would), started together;
    `discovering`: each discovers first, as `sync --discover --shard` does."""
    reports: list[SyncReport | BaseException] = [RuntimeError("never ran")] * SHARDS
    ready = threading.Barrier(SHARDS)

    def run(index: int) -> None:
        try:
            store, drivers = Store(url), Drivers(sandbox.directory)
            found, errors = (
                discover(compiled.clusters, drivers, FAST, shard=(index, SHARDS)) if discovering else ([], {})
            )
            assert errors == {}
            ready.wait()
            reports[index] = sync(
                compiled.clusters, drivers, store, shard=(index, SHARDS), discovered=found, policy=FAST
            )
        except BaseException as error:  # the test thread re-raises it
            reports[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(SHARDS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for report in reports:
        if isinstance(report, BaseException):
            raise report
    return reports  # type: ignore[return-value]


def contents(store: Store) -> tuple[list[tuple], list[tuple]]:
    """The catalog's clusters and live pools, without the times a new sync would change."""
    clusters = [
        (c["cluster"], c["cloud"], c["account"], c["location"], c["status"]) for c in store.clusters()
    ]
    pools = [
        tuple((k, v) for k, v in p.items() if k not in ("first_seen", "last_seen", "allocation_at"))
        for p in store.live_pools()
    ]
    return clusters, pools


def stamps(store: Store) -> dict[str, tuple]:
    """Each cluster's listing and sync times as stored, to the microsecond (reads show seconds)."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(ClusterRow.name, ClusterRow.observed_at, ClusterRow.last_sync_at))
        return {row.name: (row.observed_at, row.last_sync_at) for row in rows}


def test_four_shards_at_once_write_every_cluster_once_and_an_unsharded_sync_finds_nothing_new(
    fleet: tuple[CompiledFleet, Sandbox], catalog_url: str
):
    compiled, sandbox = fleet
    store = Store(catalog_url)
    store.migrate()
    reports = shards_at_once(compiled, sandbox, catalog_url)

    names = sorted(c.name for c in compiled.clusters)
    assert all(r.ok for r in reports), [r.failed for r in reports]
    written = sorted(name for r in reports for name in r.written)
    assert written == names  # every cluster, by exactly one shard
    by_name = {c.name: c for c in compiled.clusters}
    scopes = [{quota_scope(by_name[n].target.ref) for n in r.written} for r in reports]
    assert sum(len(s) for s in scopes) == len(set().union(*scopes)) == 8  # no scope in two shards
    assert sorted(len(r.written) for r in reports) == [6, 6, 6, 7]  # whole scopes, dealt evenly
    assert [c["cluster"] for c in store.clusters()] == names
    runs = store.runs()
    assert sorted(r["shard"] for r in runs) == [f"{i}/{SHARDS}" for i in range(SHARDS)]
    assert {r["status"] for r in runs} == {"ok"} and sum(r["clusters_ok"] for r in runs) == len(names)

    before = contents(store)
    assert len(before[1]) == len(names)  # each cluster's system pool (the fleet's are not applied)
    whole = sync(compiled.clusters, Drivers(sandbox.directory), store, policy=FAST)
    assert whole.ok and sorted(whole.written) == names
    assert contents(store) == before


def test_a_shard_never_touches_another_shards_clusters(
    fleet: tuple[CompiledFleet, Sandbox], catalog_url: str
):
    compiled, sandbox = fleet
    store = Store(catalog_url)
    store.migrate()
    assert sync(compiled.clusters, Drivers(sandbox.directory), store, policy=FAST).ok
    mine, _ = in_shard(compiled.clusters, [], (0, SHARDS))
    theirs = next(c for c in compiled.clusters if c not in mine and c.target.cloud == "gke")
    ref = theirs.target.ref
    backend = sandbox.emulators["gke"].backend(ref.account, ref.location)  # type: ignore[attr-defined]
    backend.delete_pool(ref.name, "default-pool")  # gone from the cloud, out of band
    assert connect("gke", sandbox.directory).list_pools(ref) == []
    stored = stamps(store)

    report = sync(compiled.clusters, Drivers(sandbox.directory), store, shard=(0, SHARDS), policy=FAST)
    assert sorted(report.written) == sorted(c.name for c in mine)
    after = stamps(store)
    # Another shard's cluster keeps its rows and times: its pool is live until its own shard lists it.
    assert {n: t for n, t in after.items() if n not in report.written} == {
        n: t for n, t in stored.items() if n not in report.written
    }
    assert [p["pool"] for p in store.live_pools(cluster=theirs.name)] == ["default-pool"]
    assert all(after[c.name] > stored[c.name] for c in mine)  # its own were written again

    owner = next(i for i in range(SHARDS) if theirs in in_shard(compiled.clusters, [], (i, SHARDS))[0])
    sync(compiled.clusters, Drivers(sandbox.directory), store, shard=(owner, SHARDS), policy=FAST)
    assert store.live_pools(cluster=theirs.name) == []  # its own shard sees it gone


def quota_counts(sandbox: Sandbox) -> dict[tuple[str, str], int]:
    """Requests each emulator counted per quota scope, by its own reckoning (GET /sandbox/quotas),
    as (cloud, where): a GKE project, an AKS subscription, an EKS or ACK region."""
    counted = {}
    for cloud in ("aks", "gke", "eks", "ack"):
        report = requests.get(sandbox.endpoints[cloud] + QUOTAS_PATH, timeout=10).json()
        for scope, totals in report["scopes"].items():
            where = scope.rsplit("/", 1)[-1]  # EKS and ACK: access key/region; the key is the test's own
            counted[cloud, where] = counted.get((cloud, where), 0) + totals["requests"]
    return counted


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)
def test_each_shard_discovers_and_syncs_in_its_own_quota_scopes_only(
    fleet: tuple[CompiledFleet, Sandbox], catalog_url: str
):
    compiled, sandbox = fleet
    mid = compiled.cluster("gke-2-0").target.ref
    backend = sandbox.emulators["gke"].backend(mid.account, "us-east1")  # type: ignore[attr-defined]
    backend.add_cluster("shadow")  # another location of the project: the fleet does not name it
    backend.seed_system_pool("shadow")
    store = Store(catalog_url)
    store.migrate()
    written: list[str] = []
    for index in range(SHARDS):
        before = quota_counts(sandbox)
        drivers = Drivers(sandbox.directory)
        found, errors = discover(compiled.clusters, drivers, FAST, shard=(index, SHARDS))
        report = sync(compiled.clusters, drivers, store, shard=(index, SHARDS), discovered=found, policy=FAST)
        assert report.ok and errors == {}
        written += report.written
        grown = {scope for scope, n in quota_counts(sandbox).items() if n > before.get(scope, 0)}
        mine = {
            (c.target.cloud, where_counted(c.target.ref))
            for c in in_shard(compiled.clusters, [], (index, SHARDS))[0]
        }
        assert grown == mine, index  # no request in another shard's scope, discovery's included
    shadow = f"gke/{mid.account}/us-east1/shadow"
    # Each once. moto keeps EKS clusters for the whole test process: other tests' are found too.
    assert set(Counter(written).values()) == {1}
    assert {c.name for c in compiled.clusters} | {shadow} <= set(written)
    assert shadow in [c["cluster"] for c in store.clusters() if not c["in_fleet"]]


def where_counted(ref: ClusterRef) -> str:
    """The part of the sandbox's scope that names where a cluster is (see quota_counts)."""
    return {"gke": ref.account, "aks": ref.account.lower()}.get(ref.cloud, ref.location)
