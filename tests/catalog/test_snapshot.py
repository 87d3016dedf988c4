"""The live pools a long-running reader keeps between requests (Store.snapshot) and the placement
index built on them, on SQLite and PostgreSQL: kept while the catalog is unchanged, replaced by any
write from any Store, and the index answers every request as the plain evaluation does."""

from __future__ import annotations

import dataclasses
import itertools
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from provisioner.capacity import capacity
from provisioner.catalog.listing import ClusterIdentity, ObservedPool
from provisioner.catalog.store import Store
from provisioner.compile import compile_file, desired_state
from provisioner.errors import BadRequest, NoPlacement
from provisioner.placement import Index, Request, place, weigh
from provisioner.pools import Scaling
from tests.placements import FLEET, fill

AT = datetime.now(UTC)  # every listing here is timed from it, so a slow run orders them the same
# Pools alike but for their GPUs per node, or (a2-highgpu-8g, as EKS's p4d) but for their cloud,
# to add to the placement tests' fleet.
MORE_CLUSTERS = """\
  - name: azure-more
    cloud: aks
    subscription: 00000000-0000-0000-0000-000000000001
    resourceGroup: ml
    cluster: more-aks
    pools:
      - {name: a100x1, instanceType: Standard_NC24ads_A100_v4, nodes: {min: 0, max: 3}}
  - name: gcp-more
    cloud: gke
    project: my-project
    location: us-central1
    cluster: more-gke
    pools:
      - {name: a100-mig-x8, instanceType: a2-highgpu-8g, gpu: {mig: 1g.5gb}, nodes: {min: 0, max: 1}}
      - {name: a100-mig-x2, instanceType: a2-highgpu-2g, gpu: {mig: 1g.5gb}, nodes: {min: 0, max: 4}}
  - name: aws-more
    cloud: eks
    region: us-east-1
    cluster: more-eks
    nodeRole: arn:aws:iam::123456789012:role/eks-gpu-nodes
    subnets: [subnet-0abc1234]
    pools:
      - {name: a10g-x1, instanceType: g5.2xlarge, nodes: {min: 0, max: 2}}
  - name: ali-more
    cloud: ack
    region: cn-hangzhou
    clusterId: c0123456789abcdef0123456789abcdee
    vswitches: [vsw-bp1a2b3c4d5e6f7g8h9i0]
    pools:
      - {name: a10x4-cgpu, instanceType: ecs.gn7i-c32g1.32xlarge, gpu: {sharing: memory, isolation: memory},
         nodes: {min: 0, max: 2}}
"""


def _store(url: str) -> Store:
    store = Store(url)
    store.migrate()
    return store


def _listing(tmp_path: Path, more: bool = False) -> dict[str, tuple[str, list[Any]]]:
    """Every cluster of the placement tests' fleet (and MORE_CLUSTERS): its cloud, its pools' states."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET + (MORE_CLUSTERS if more else ""), encoding="utf-8")
    return {c.name: (c.cloud.key, [desired_state(p) for p in c.pools]) for c in compile_file(fleet).clusters}


def _record(store: Store, name: str, cloud: str, states: list[Any], at: datetime = AT) -> None:
    pools = [ObservedPool(s, capacity(cloud, s)) for s in states]
    store.record_cluster(ClusterIdentity(name, cloud, "account", "location", name), pools, [], at)


def test_the_snapshot_is_kept_until_any_store_writes(catalog_url: str, tmp_path: Path):
    reader, writer = _store(catalog_url), Store(catalog_url)  # two stores: two processes' worth
    listing = _listing(tmp_path)
    cloud, states = listing["aws"]
    _record(writer, "aws", cloud, states)
    first = reader.snapshot()
    assert reader.snapshot() is first  # nothing written: the same pools, not read again
    assert list(first.pools) == reader.live_pools()

    _record(writer, "aws", cloud, states[:-1], AT + timedelta(minutes=1))  # a10g-x4 is gone
    second = reader.snapshot()
    assert second is not first and second.serial > first.serial
    assert list(second.pools) == reader.live_pools()
    assert "a10g-x4" not in [p["pool"] for p in second.pools]

    writer.record_failure(ClusterIdentity("aws", cloud, "account", "location", "aws"), "timed out")
    third = reader.snapshot()
    assert third is not second
    assert {p["cluster_status"] for p in third.pools} == {"error"}

    writer.finish_run(writer.start_run(None), ok=1, failed=0, pools=0, drift=0)  # no pool changed
    assert reader.snapshot() is third


def test_a_view_of_a_snapshot_is_built_once(catalog_url: str, tmp_path: Path):
    store = _store(catalog_url)
    cloud, states = _listing(tmp_path)["gcp"]
    _record(store, "gcp", cloud, states)
    built: list[int] = []

    def count(pools: Any) -> int:
        built.append(len(pools))
        return len(pools)

    assert store.snapshot().derived(count) == store.snapshot().derived(count) == len(states)
    assert built == [len(states)]
    _record(store, "gcp", cloud, states[:1], AT + timedelta(minutes=1))
    assert store.snapshot().derived(count) == 1
    assert built == [len(states), 1]


def test_place_sees_a_write_made_after_it_first_answered(catalog_url: str, tmp_path: Path):
    reader, writer = _store(catalog_url), Store(catalog_url)
    fill(writer, _write_fleet(tmp_path), observed_at=AT)  # the listing the newer one at AT+1 min follows
    assert place(reader, Request(gpus=2)).pool == "a10g-x4"  # 24 GB GPUs before 80 GB ones
    cloud, states = _listing(tmp_path)["aws"]
    _record(writer, "aws", cloud, [s for s in states if s.name != "a10g-x4"], AT + timedelta(minutes=1))
    assert place(reader, Request(gpus=2)).pool == "a100x2"
    writer.record_failure(ClusterIdentity("azure", "aks", "account", "location", "azure"), "timed out")
    assert place(reader, Request(gpus=2)).warnings[0].startswith("the last sync of cluster azure failed")
    assert place(reader, Request(gpus=2)) == weigh(writer.live_pools(), Request(gpus=2))


def _write_fleet(tmp_path: Path) -> Path:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    return fleet


# The index against the plain evaluation, over a catalog of every cloud and mode, varied: copies of
# each cluster with pools picked at random, sizes from 0 nodes up (ties among them), ACK pools with
# and without the ID placing needs, edge pools, a failed sync and deleted pools.


def _varied(store: Store, tmp_path: Path) -> None:
    chance = random.Random(17)
    for (name, (cloud, states)), copy in itertools.product(_listing(tmp_path, more=True).items(), range(5)):
        picked = []
        for number, state in enumerate(chance.choices(states, k=chance.randint(1, 2 * len(states)))):
            largest = chance.choice([0, 1, 2, 2, 3])
            picked.append(
                dataclasses.replace(
                    state,
                    name=f"p{number % 3}-{state.name}",
                    scaling=state.scaling if state.edge else Scaling(min(largest, 1), largest, True),
                    nodes=chance.choice([None, 0, 1, 4]),
                    spot=chance.random() < 0.3,
                    cloud_id=f"np{copy}x{number}" if chance.random() < 0.8 else None,  # ACK needs it
                )
            )
        unique = list({p.name: p for p in picked}.values())
        _record(store, f"{name}-{copy}", cloud, unique)
        if copy == 1:  # a later listing without its first pool: that pool is deleted
            _record(store, f"{name}-{copy}", cloud, unique[1:], AT + timedelta(minutes=1))
    store.record_failure(ClusterIdentity("gcp-2", "gke", "account", "location", "gcp-2"), "timed out")


def _requests(pools: list[dict[str, Any]]) -> list[Request]:
    kinds: list[dict[str, Any]] = [
        *({"mig": m} for m in ("1g.5gb", "1g.10gb", "2g.10gb", "3g.40gb", "7g.80gb")),
        *({"gpu_memory": s} for s in ("1GB", "3GB", "4GB", "5GB", "6GiB", "10GB", "20GB", "23GiB", "90GB")),
        *({"gpus": n} for n in (1, 2, 4, 8)),
    ]
    some = pools[len(pools) // 2]
    narrowings: list[dict[str, Any]] = [
        {},
        *({"cloud": c} for c in ("aks", "gke", "eks", "ack")),
        *({"gpu": g} for g in ("A100", "T4", "L4", "A10G-24GB")),
        {"cluster": some["cluster"]},
        {"cluster": "nowhere"},
        {"pool": some["pool"]},
        {"cluster": some["cluster"], "pool": some["pool"]},
        {"cloud": "gke", "pool": "p0-l4-ts"},
    ]
    made = []
    for kind, isolation, narrowing in itertools.product(
        kinds, (None, "none", "memory", "compute", "hardware"), narrowings
    ):
        try:
            made.append(Request(**kind, isolation=isolation, **narrowing))
        except BadRequest:  # a MIG profile the GPU asked for does not offer
            continue
    return made


def _outcome(choose: Any, request: Request) -> Any:
    try:
        return choose(request)
    except NoPlacement as error:
        return ("no placement", str(error), error.closest)


def test_the_index_answers_every_request_as_weighing_every_pool_does(catalog_url: str, tmp_path: Path):
    store = _store(catalog_url)
    _varied(store, tmp_path)
    pools = store.live_pools()
    index = store.snapshot().derived(Index)
    requests = _requests(pools)
    assert len(requests) > 1000
    placed = 0
    for request in requests:
        expected = _outcome(lambda r: weigh(pools, r), request)
        assert _outcome(index.place, request) == expected, request
        assert _outcome(lambda r: place(store, r), request) == expected, request
        placed += not isinstance(expected, tuple)
    assert 0.2 < placed / len(requests) < 0.8  # both answers are well represented


def test_names_decide_among_alike_pools_whose_nodes_hold_no_pod():
    """A pool of a memory scheduler whose nodes report no GPU holds 0 pods of any request: size
    cannot order such pools, names do (rows as `catalog ls --json` prints them)."""
    row = {
        "cloud": "ack",
        "gpu": "A10 24GB",
        "mig": None,
        "sharing": "memory",
        "isolation": "memory",
        "slice_unit": "GiB",
        "gpus_per_node": 0,
        "slices_per_node": 22,
        "memory_per_slice_gb": 1.07,
        "cloud_id": "np0",
        "instance_type": "ecs.gn7i-c8g1.2xlarge",
        "min_nodes": 0,
        "current_nodes": None,
        "spot": False,
        "taints": [],
        "replicas": None,
        "deleted_at": None,
        "cluster_status": "ok",
        "last_seen": None,
    }
    rows = [{**row, "cluster": c, "pool": p, "max_nodes": n} for c, p, n in [("b", "x", 9), ("a", "y", 1)]]
    request = Request(gpu_memory="2GiB")
    assert Index(rows).place(request) == weigh(rows, request)
    assert Index(rows).place(request).pool == "y"
