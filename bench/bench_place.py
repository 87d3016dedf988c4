"""`place` over a catalog of 10,000 pools (1,000 AKS clusters x 10 pools of three kinds): the
median wall time of one request after start-up, beside the 50 ms goal; and of the first request
after a write to the catalog, beside reading the live pools alone.

The catalog is written through the store's own write path (one transaction per cluster, as sync
writes), into SQLite. Each request chooses as `place` and /api/place do: it asks the catalog
whether it changed (one query), and reads and indexes the live pools again only if it did.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.bench_compile import CLUSTERS, POOLS, fleet_text
from bench.figures import Figure, median_seconds
from provisioner.capacity import capacity
from provisioner.catalog.listing import Allocation, ClusterIdentity, ObservedPool
from provisioner.catalog.store import Store, now
from provisioner.compile import compile_file, desired_state
from provisioner.placement import Request, place

GOAL_MS = 50.0
# What pods ask for: MIG slices, shares of GPU memory, narrowed to a GPU model or a cloud.
REQUESTS = (
    Request(mig="1g.10gb"),
    Request(gpu_memory="4GB"),
    Request(mig="3g.40gb", isolation="none"),
    Request(gpu="T4", gpu_memory="4GB"),
    Request(gpu_memory="8GiB", cloud="aks", isolation="memory"),
)
RUNS = 5  # of each request


def catalog(
    directory: Path, clusters: int = CLUSTERS, pools_each: int = POOLS, allocated: bool = False
) -> Store:
    """A SQLite catalog of `clusters` AKS clusters x `pools_each` pools, written as sync writes;
    `allocated`: with each pool's allocation as a sync with Kubernetes access writes it (two nodes,
    half their slices held), so place weighs free slices too."""
    fleet = directory / "fleet.yaml"
    fleet.write_text(fleet_text(clusters, pools_each), encoding="utf-8")
    store = Store(f"sqlite:///{directory / 'catalog.db'}")
    store.migrate()
    for cluster in compile_file(fleet).clusters:
        target, ref = cluster.target, cluster.target.ref
        who = ClusterIdentity(target.name, target.cloud, ref.account, ref.location, ref.name)
        states = [desired_state(pool) for pool in cluster.pools]
        pools = [ObservedPool(state, capacity(target.cloud, state)) for state in states]
        allocation = {
            p.state.name: Allocation(2, 2 * p.capacity.slices_per_node, p.capacity.slices_per_node)
            for p in pools
        }
        store.record_cluster(who, pools, [], now(), allocation=allocation if allocated else None)
    return store


def run() -> list[Figure]:
    store = catalog(Path(tempfile.mkdtemp(prefix="provisioner-bench-place-")))
    assert len(store.live_pools()) == CLUSTERS * POOLS
    place(store, REQUESTS[0])  # start-up: imports, the hardware data, the database connection
    median_ms = _median_request_ms(store)
    after_write = []
    for request in REQUESTS:
        _write(store)
        started = time.perf_counter()
        place(store, request)
        after_write.append(time.perf_counter() - started)
    reading_ms = median_seconds(store.live_pools) * 1000
    with_allocation = catalog(Path(tempfile.mkdtemp(prefix="provisioner-bench-place-")), allocated=True)
    place(with_allocation, REQUESTS[0])
    allocated_ms = _median_request_ms(with_allocation)
    return [
        Figure(
            f"place over a catalog of {CLUSTERS * POOLS:,} pools, one request after start-up",
            round(median_ms, 2),
            "ms",
            GOAL_MS,
            "goal",
        ),
        Figure(
            f"place over a catalog of {CLUSTERS * POOLS:,} pools, the first request after a catalog write",
            round(statistics.median(after_write) * 1000, 1),
            "ms",
            round(reading_ms, 1),
            "reading the live pools alone",
        ),
        Figure(
            f"place over a catalog of {CLUSTERS * POOLS:,} pools with allocation, one request",
            round(allocated_ms, 2),
            "ms",
            round(median_ms, 2),
            "the same requests over the catalog without allocation",
        ),
    ]


def _median_request_ms(store: Store) -> float:
    times = []
    for request in REQUESTS * RUNS:
        started = time.perf_counter()
        place(store, request)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _write(store: Store) -> None:
    """A write, as a sync's: one more cluster listed (without pools, so every request is alike)."""
    name = f"written-{store.changes()}"
    store.record_cluster(ClusterIdentity(name, "aks", "account", "rg", name), [], [], now())
