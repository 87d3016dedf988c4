"""Plan's observation over 30 and 300 clusters (4 pools each) at 100 ms API latency.

provisioner lists every cluster at once, one call per cluster. The baselines read one pool per
call, as Terraform's refresh reads one resource per call: one at a time, and 10 at a time
(Terraform's default parallelism). Figures are in round trips (wall time / latency).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from bench import world
from bench.figures import Figure, median_seconds
from provisioner.observe import Drivers, observe

LATENCY_MS = 100.0
POOLS = 4
RUNS = 9  # of the plan's observation: a 2-core machine shared with the emulators is noisy


def _pool_reader(sandbox_dir):
    """Reads one node pool per call through the GKE SDK, as a per-resource refresh does."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import container_v1

    from provisioner.drivers.registry import read_endpoints

    client = container_v1.ClusterManagerClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": read_endpoints(sandbox_dir)["gke"]},
    )

    def read(name: str) -> object:
        return client.get_node_pool(name=name, retry=None)

    return read


def _pool_names(bench: world.BenchWorld) -> list[str]:
    return [
        f"projects/{c.target.ref.account}/locations/{c.target.ref.location}/clusters/{c.target.ref.name}"
        f"/nodePools/{p.pool.name}"
        for c in bench.compiled.clusters
        for p in c.pools
    ]


def run(cluster_counts: tuple[int, ...] = (30, 300)) -> list[Figure]:
    # The largest fleet first, as in a plan's own process: observe forks its helper processes at
    # the first large fleet, and only while this process runs a single thread (provisioner.spread).
    measured = {count: _measure(count) for count in sorted(cluster_counts, reverse=True)}
    return [figure for count in cluster_counts for figure in measured[count]]


def _measure(count: int) -> list[Figure]:
    round_trip = LATENCY_MS / 1000
    bench = world.start(count, POOLS, created=True, latency_ms=LATENCY_MS)
    try:
        drivers = Drivers(bench.sandbox_dir)
        observe(bench.clusters, drivers)  # connections and imports warm, as in a second plan
        ours = median_seconds(lambda: observe(bench.clusters, drivers), runs=RUNS) / round_trip
        read, names = _pool_reader(bench.sandbox_dir), _pool_names(bench)
        read(names[0])
        sequential = median_seconds(lambda: [read(n) for n in names], runs=1) / round_trip

        def parallel_10() -> None:
            with ThreadPoolExecutor(max_workers=10) as pool:
                list(pool.map(read, names))

        parallel = median_seconds(parallel_10, runs=1) / round_trip
    finally:
        bench.stop()
    name = f"plan, {count} clusters x {POOLS} pools, {LATENCY_MS:g} ms latency"
    return [
        Figure(name, round(ours, 2), "round trips", round(sequential, 1), "per-pool reads, one at a time"),
        Figure(name, round(ours, 2), "round trips", round(parallel, 1), "per-pool reads, 10 at a time"),
        Figure(name, round(ours, 2), "round trips", 1.0, "floor: one round trip"),
    ]
