"""`place` chooses with what is there (tiers.py), over a real catalog on SQLite and PostgreSQL:
slices free now by the last sync's allocation, then pools whose free slices nobody knows, then
pools that can grow, and a refusal naming the nearest where none can take the pod; what it says
of the tier in --json and in words; and the catalog's views of free and reachable slices."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from provisioner.capacity import capacity
from provisioner.catalog.listing import Allocation, ClusterIdentity, ObservedPool
from provisioner.catalog.store import Store
from provisioner.catalog.views import capacity_rows
from provisioner.cli import main
from provisioner.compile import compile_file, desired_state
from provisioner.errors import NoPlacement
from provisioner.placement import Index, Request, place, weigh
from tests.catalog.conftest import fresh_catalog
from tests.placements import FLEET

AT = datetime.now(UTC) - timedelta(hours=1)
# aws: ts-a and ts-b (max 6 nodes), ts-0-small (max 2), all g5.xlarge time-sliced by 8: a 3GB
# request fits each alike; by today's rule alone ts-a wins (more pods at its maximum, then name).
SMALL_FIRST = Request(gpu_memory="3GB", cloud="eks")


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with fresh_catalog(request.param, tmp_path) as url:
        made = Store(url)
        made.migrate()
        yield made
        made.engine.dispose()


def _states(tmp_path: Path, cluster: str) -> dict[str, Any]:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    entry = compile_file(fleet).cluster(cluster)
    states = [desired_state(p) for p in entry.pools]
    return {s.name: s for s in states}


def record(
    store: Store,
    tmp_path: Path,
    cluster: str,
    cloud: str,
    *,
    nodes: Mapping[str, int] | None = None,
    allocation: Mapping[str, tuple[int, int, int]] | None = None,
    unhinted: tuple[str, ...] = (),
    at: datetime = AT,
) -> None:
    """List `cluster` as the fleet asks, its pools at `nodes` (the cloud's count), the allocation
    per pool as (nodes, advertised, allocated) (None: its Kubernetes API did not answer), and the
    `unhinted` pools without their autoscaler hints."""
    pools = []
    for name, desired in _states(tmp_path, cluster).items():
        state = dataclasses.replace(desired, nodes=(nodes or {}).get(name))
        if name in unhinted:
            state = dataclasses.replace(state, autoscaler_hints=None)
        pools.append(ObservedPool(state, capacity(cloud, state)))
    given = None if allocation is None else {n: Allocation(*a) for n, a in allocation.items()}
    store.record_cluster(
        ClusterIdentity(cluster, cloud, "account", "location", cluster), pools, [], at, allocation=given
    )


def test_a_pool_with_free_slices_beats_larger_pools_that_must_grow(store: Store, tmp_path: Path):
    record(
        store,
        tmp_path,
        "aws",
        "eks",
        nodes={"ts-a": 1, "ts-b": 1, "ts-0-small": 1},
        allocation={"ts-a": (1, 8, 8), "ts-b": (1, 8, 8), "ts-0-small": (1, 8, 5), "p4d-mig": (1, 7, 0)},
    )
    chosen = place(store, SMALL_FIRST)
    assert chosen.pool == "ts-0-small"
    assert chosen.json()["capacity"] == {
        "tier": "free",
        "free": 3,
        "growable": 8,
        "nodes_left": 1,
        "at_max": 16,
        "allocation": "known",
        "allocation_at": AT.isoformat(timespec="seconds"),
    }
    # ts-a and ts-b can still grow, p4d-mig has 5 GB slices free, a10g-x4's are unknown
    assert chosen.others == 4
    assert chosen.tier_why.startswith("free now: 3 such pods fit in the slices free by the sync at ")


def test_a_free_slice_beats_a_smaller_one_that_must_grow(store: Store, tmp_path: Path):
    """The deliberate change: the tier before the slice's size. t4ts (4 GB) is at zero nodes,
    a100migts (5 GB) has a slice free."""
    record(
        store,
        tmp_path,
        "azure",
        "aks",
        nodes={"t4ts": 0, "a100migts": 1},
        allocation={"t4ts": (0, 0, 0), "a100migts": (1, 14, 13), "t4mps": (0, 0, 0), "a100x2": (0, 0, 0)},
    )
    chosen = place(store, Request(gpu_memory="4GB", cluster="azure"))
    assert (chosen.pool, chosen.capacity["tier"]) == ("a100migts", "free")
    assert (
        place(store, Request(gpu_memory="4GB", cluster="azure", pool="t4ts")).capacity["tier"] == "growable"
    )


def test_a_pool_that_can_grow_beats_full_ones(store: Store, tmp_path: Path):
    record(
        store,
        tmp_path,
        "aws",
        "eks",
        nodes={"ts-a": 6, "ts-b": 2, "ts-0-small": 2, "a10g-x4": 0},
        allocation={
            "ts-a": (6, 48, 48),
            "ts-b": (2, 16, 16),
            "ts-0-small": (2, 16, 16),
            "p4d-mig": (1, 7, 7),
            "a10g-x4": (0, 0, 0),
        },
    )
    chosen = place(store, SMALL_FIRST)
    assert chosen.pool == "ts-b"  # ts-a is at its maximum, ts-0-small too
    assert chosen.capacity | {"allocation_at": None} == {
        "tier": "growable",
        "free": 0,
        "growable": 32,
        "nodes_left": 4,
        "at_max": 48,
        "allocation": "known",
        "allocation_at": None,
    }
    assert chosen.others == 1  # a10g-x4 can grow too, with whole 24 GB GPUs
    assert chosen.tier_why.startswith("can grow: no slice free for it by the sync at ")
    assert chosen.tier_why.endswith("; its autoscaler can add 4 nodes (32 such pods)")


def test_pools_whose_free_slices_are_unknown_come_after_free_ones_and_before_growable_ones(
    store: Store, tmp_path: Path
):
    # ts-a: not in the allocation (no node advertised its resource); ts-b full but growing.
    record(
        store,
        tmp_path,
        "aws",
        "eks",
        nodes={"ts-b": 1},
        allocation={"ts-b": (1, 8, 8), "ts-0-small": (1, 8, 8)},
    )
    assert place(store, SMALL_FIRST).pool == "ts-a"
    assert place(store, SMALL_FIRST).capacity["tier"] == "unknown"
    # Later the cluster's Kubernetes API does not answer: every figure is stale, so unknown.
    record(store, tmp_path, "aws", "eks", nodes={"ts-b": 1}, allocation=None, at=AT + timedelta(minutes=1))
    chosen = place(store, SMALL_FIRST)
    assert (chosen.pool, chosen.capacity["allocation"], chosen.capacity["free"]) == ("ts-a", "none", None)
    stale = place(store, Request(gpu_memory="3GB", pool="ts-b"))
    assert stale.tier_why == (
        "free slices unknown: the allocation figures are stale (its Kubernetes API did not answer at "
        "the last sync); if none is free, its autoscaler can add 5 nodes (40 such pods)"
    )


def test_nothing_can_take_the_pod_names_the_nearest_and_why(store: Store, tmp_path: Path):
    record(
        store,
        tmp_path,
        "aws",
        "eks",
        nodes={"ts-a": 6, "ts-b": 6, "ts-0-small": 2, "a10g-x4": 2},
        allocation={
            "ts-a": (6, 48, 48),
            "ts-b": (6, 48, 48),
            "ts-0-small": (2, 16, 16),
            "a10g-x4": (2, 8, 8),
        },
    )
    with pytest.raises(NoPlacement) as caught:
        place(store, Request(gpu_memory="3GB", cloud="eks", gpu="A10G"))
    assert str(caught.value) == (
        "no live pool in --gpu A10G --cloud eks can take 3GB of GPU memory now or after a scale-up"
    )
    at = AT.isoformat(timespec="seconds")
    assert caught.value.closest == [
        "aws/ts-a (eks): time-slicing x8 of A10G 24GB (3.0 GB each, isolation none); "
        f"no slices free (by the sync at {at}) and it is at its maximum of 6 nodes",
        "aws/ts-b (eks): time-slicing x8 of A10G 24GB (3.0 GB each, isolation none); "
        f"no slices free (by the sync at {at}) and it is at its maximum of 6 nodes",
        "aws/ts-0-small (eks): time-slicing x8 of A10G 24GB (3.0 GB each, isolation none); "
        f"no slices free (by the sync at {at}) and it is at its maximum of 2 nodes",
    ]

    # Free units fewer than the pod asks for are no room for it: 2 GPUs free, 4 asked.
    later = AT + timedelta(seconds=1)
    record(store, tmp_path, "aws", "eks", nodes={"a10g-x4": 2}, allocation={"a10g-x4": (2, 8, 6)}, at=later)
    with pytest.raises(NoPlacement) as caught:
        place(store, Request(gpus=4, cloud="eks"))
    assert caught.value.closest[0] == (
        "aws/a10g-x4 (eks): whole A10G 24GB GPUs (24.0 GB each, 4 per node); "
        f"2 slices free (by the sync at {later.isoformat(timespec='seconds')}) "
        "and it is at its maximum of 2 nodes"
    )
    assert place(store, Request(gpus=2, cloud="eks")).capacity["free"] == 1


def test_a_pool_at_zero_grows_only_where_its_autoscaler_can_start_it(store: Store, tmp_path: Path):
    """AKS's autoscaler reads a pool's hints for nodes it has not started (nvidia.com/gpu.shared):
    without them a pool at zero can take no time-sliced pod; with them it can."""
    at_zero = dict.fromkeys(("a100mig7", "a100migts", "t4ts", "t4mps", "a100x2"), (0, 0, 0))
    record(
        store,
        tmp_path,
        "azure",
        "aks",
        nodes=dict.fromkeys(at_zero, 0),
        allocation=at_zero,
        unhinted=("t4ts",),
    )
    asked = Request(gpu_memory="4GB", cluster="azure", pool="t4ts")
    with pytest.raises(NoPlacement) as caught:
        place(store, asked)
    assert caught.value.closest[0].endswith(
        "no slices free (by the sync at "
        f"{AT.isoformat(timespec='seconds')}) and at zero nodes its autoscaler cannot start a node "
        "for its slices (no autoscaler hints)"
    )
    [row] = [p for p in store.live_pools() if p["pool"] == "t4ts"]
    assert (row["autoscaler_hints"], row["grows_from_zero"]) == (None, False)

    record(
        store,
        tmp_path,
        "azure",
        "aks",
        nodes=dict.fromkeys(at_zero, 0),
        allocation=at_zero,
        at=AT + timedelta(seconds=1),
    )
    [row] = [p for p in store.live_pools() if p["pool"] == "t4ts"]
    assert row["grows_from_zero"] is True
    assert row["autoscaler_hints"]["resources"] == {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 4}
    chosen = place(store, asked)
    assert (chosen.capacity["tier"], chosen.capacity["nodes_left"], chosen.capacity["growable"]) == (
        "growable",
        4,
        16,
    )


def test_a_pool_at_zero_whose_cloud_knows_its_slices_grows_without_hints(store: Store, tmp_path: Path):
    """GKE's autoscaler knows a node pool's MIG and sharing itself: no hints, still growable."""
    pools = ("a100-mig", "a100-mig-mps", "l4-ts", "l4-mps")
    record(
        store,
        tmp_path,
        "gcp",
        "gke",
        nodes=dict.fromkeys(pools, 0),
        allocation=dict.fromkeys(pools, (0, 0, 0)),
    )
    chosen = place(store, Request(mig="1g.5gb", cloud="gke"))
    assert (chosen.pool, chosen.capacity["tier"], chosen.capacity["growable"]) == ("a100-mig", "growable", 56)


def test_catalog_inspect_shows_free_and_reachable_slices(store: Store, tmp_path: Path):
    record(
        store,
        tmp_path,
        "aws",
        "eks",
        nodes={"ts-a": 1, "ts-b": 0},
        allocation={"ts-a": (1, 8, 3), "ts-b": (0, 0, 0)},
        unhinted=("ts-b",),
    )
    rows = {r["pool"]: r for r in capacity_rows(store.live_pools())}
    shown = {p: (rows[p]["slices_free"], rows[p]["slices_growable"], rows[p]["nodes_left"]) for p in rows}
    assert shown == {
        "ts-a": (5, 40, 5),
        "ts-b": (0, 0, 6),  # at zero, no hints: nothing reachable
        "ts-0-small": (None, None, None),  # not in the allocation, nodes unknown
        "p4d-mig": (None, 0, 0),  # a fixed size
        "a10g-x4": (None, None, None),
    }


def test_the_cli_says_the_tier_in_words_and_in_json(store: Store, tmp_path: Path):
    record(
        store,
        tmp_path,
        "aws",
        "eks",
        nodes={"ts-a": 1},
        allocation={
            "ts-a": (1, 8, 8),
            "ts-b": (0, 0, 0),
            "ts-0-small": (0, 0, 0),
            "p4d-mig": (1, 7, 7),
            "a10g-x4": (0, 0, 0),
        },
    )
    env = {"PROVISIONER_SANDBOX": "", "PROVISIONER_CATALOG": store.url}
    runner = CliRunner()
    words = runner.invoke(main, ["place", "--gpu-memory", "3GB", "--cloud", "eks"], env=env)
    assert words.exit_code == 0, words.output
    assert words.stdout.splitlines()[2] == (
        f"Tier: can grow: no slice free for it by the sync at {AT.isoformat(timespec='seconds')}; "
        "its autoscaler can add 5 nodes (40 such pods)."
    )
    shown = runner.invoke(main, ["place", "--gpu-memory", "3GB", "--cloud", "eks", "--json"], env=env)
    document = json.loads(shown.stdout)
    assert (document["pool"], document["capacity"]["tier"], document["capacity"]["free"]) == (
        "ts-a",
        "growable",
        0,
    )
    # ts-b and ts-0-small at zero with their hints grow too, but hold fewer pods at their
    # maximum (ts-0-small) or come after ts-a by name (ts-b).
    assert document["resources"] == {"limits": {"nvidia.com/gpu.shared": 1}}
    every = runner.invoke(main, ["place", "--gpus", "8", "--cloud", "eks"], env=env)
    assert every.exit_code == 1
    assert "Traceback" not in every.output


def test_the_index_answers_as_weighing_every_pool_does_whatever_the_allocation(tmp_path: Path):
    """Index against weigh over rows whose allocation, nodes and growth vary (seeded)."""
    import random

    from tests.catalog.test_snapshot import _requests, _varied

    chance = random.Random(5)
    varied = Store(f"sqlite:///{tmp_path / 'varied.db'}")
    varied.migrate()
    _varied(varied, tmp_path)
    rows = []
    for row in varied.live_pools():
        advertised = chance.choice([0, 1, 4, 8, 22, 44])
        allocation = chance.choice(["none", "known", "known", "known", "known", "stale"])
        rows.append(
            {
                **row,
                "k8s_nodes": chance.choice([0, 1, 2]),
                "slices_advertised": advertised,
                "slices_allocated": chance.choice([advertised, advertised, chance.randint(0, advertised)]),
                "allocation_at": None if allocation == "none" else AT.isoformat(),
                "allocation_stale": allocation == "stale",
                "grows_from_zero": chance.choice([None, False, True]),
            }
        )
    index = Index(rows)
    tiers = set()
    for request in _requests(rows):
        try:
            expected: Any = weigh(rows, request)
            tiers.add(expected.capacity["tier"])
        except NoPlacement as error:
            expected = ("no placement", str(error), error.closest)
        try:
            got: Any = index.place(request)
        except NoPlacement as error:
            got = ("no placement", str(error), error.closest)
        assert got == expected, request
    assert tiers == {"free", "unknown", "growable"}
