"""sync of 300 clusters (4 pools each) at 100 ms API latency into SQLite and PostgreSQL.

The floor is the listings alone: the same clusters observed with nothing written, measured in
the same run, in turn with each catalog's sync (a round trip per cluster divided by the
concurrency would leave out the listings' own CPU, which no store can remove). Rows per second
counts the pool rows sync writes.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench import world
from bench.figures import Figure, median_seconds
from provisioner.catalog.store import Store
from provisioner.catalog.sync import SyncReport, sync
from provisioner.observe import Drivers, observe

LATENCY_MS = 100.0
CLUSTERS, POOLS = 300, 4
POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
# The floor and each catalog's sync are measured in turn, round after round, so that a slower
# minute of a shared machine weighs on all of them alike; each figure is the median round.
ROUNDS = 7


def _postgres_database() -> tuple[str, str]:
    import psycopg

    name = f"provisioner_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name, f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"


def _drop(name: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run() -> list[Figure]:
    bench = world.start(CLUSTERS, POOLS, created=True, latency_ms=LATENCY_MS)
    figures = []
    database, postgres_url = _postgres_database()
    stores: dict[str, Store] = {}
    try:
        drivers = Drivers(bench.sandbox_dir)
        observe(bench.clusters, drivers)  # connections and imports warm, as in a nightly run
        urls = {"SQLite": f"sqlite:///{Path(tempfile.mkdtemp()) / 'catalog.db'}", "PostgreSQL": postgres_url}
        for label, url in urls.items():
            stores[label] = Store(url)
            stores[label].migrate()
            sync(bench.compiled.clusters, drivers, stores[label])  # inserts; measure the nightly runs
        floors: list[float] = []
        reports: dict[str, list[SyncReport]] = {label: [] for label in stores}
        for _ in range(ROUNDS):
            floors.append(median_seconds(lambda: observe(bench.clusters, drivers), runs=1))
            for label, store in stores.items():
                report = sync(bench.compiled.clusters, drivers, store)
                assert report.ok and report.pools == CLUSTERS * (POOLS + 1), report.failed
                reports[label].append(report)
        floor = statistics.median(floors)
        for label, store in stores.items():
            report = sorted(reports[label], key=lambda r: r.wall_seconds)[ROUNDS // 2]  # the median run
            wall = report.wall_seconds
            name = f"sync, {CLUSTERS} clusters x {POOLS} pools, {LATENCY_MS:g} ms latency, into {label}"
            figures.append(
                Figure(
                    name,
                    round(wall, 3),
                    "s",
                    round(floor, 3),
                    "floor: the same listings alone, nothing written",
                )
            )
            alone = _write_alone(store, bench, drivers)
            figures.append(
                Figure(
                    f"sync rows written per second, {label}",
                    round(report.pools / wall),
                    "rows/s",
                    round(alone),
                    "the store writing alone, one transaction per cluster",
                    note="sync's rate includes observing; rows per cluster = its pools",
                )
            )
    finally:
        for store in stores.values():
            store.engine.dispose()
        bench.stop()
        _drop(database)
    return figures


def _write_alone(store: Store, bench: world.BenchWorld, drivers: Drivers) -> float:
    """Rows per second the store takes when nothing else runs: the same listings, written again."""
    from provisioner.capacity import capacity
    from provisioner.catalog.listing import ObservedPool
    from provisioner.catalog.store import now
    from provisioner.catalog.sync import identity
    from provisioner.observe import observe

    observations = observe(bench.clusters, drivers)
    rows = [
        (identity(o.target), [ObservedPool(p, capacity(o.target.cloud, p)) for p in o.pools])
        for o in observations
    ]
    started = time.perf_counter()
    for who, pools in rows:
        store.record_cluster(who, pools, [], now())
    return sum(len(p) for _, p in rows) / (time.perf_counter() - started)
