"""ACK in the plan, apply and sync figures: the same measures as the GKE worlds, on ACK clusters,
through the ACK driver and its emulator.

Plan and sync read every cluster at once, so their floor is one round trip of the emulator's
latency; a script reading one cluster after another takes one per cluster. Apply runs clusters in
parallel, one operation at a time in each: its floor is the pools per cluster, in operations.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.figures import Figure, median_seconds
from provisioner.apply import Applier
from provisioner.catalog.store import Store
from provisioner.catalog.sync import sync
from provisioner.compile import CompiledFleet, compile_file, desired_state
from provisioner.drivers.registry import connect
from provisioner.locks import FileLocks
from provisioner.observe import Drivers
from provisioner.sandbox.server import Sandbox, SandboxSettings
from provisioner.workflow import make_plan

LATENCY_MS = 100.0
OP_SECONDS = 2.0
POOL = (
    "      - {{name: pool-{i}, instanceType: ecs.gn7i-c8g1.2xlarge, "
    "gpu: {{sharing: memory, isolation: memory}}, nodes: {{min: 0, max: 4}}}}\n"
)


def fleet_text(clusters: int, pools: int) -> str:
    lines = ["clusters:\n"]
    for c in range(clusters):
        lines.append(
            f"  - name: ack-{c:04d}\n    cloud: ack\n    region: cn-hangzhou\n"
            f"    clusterId: c{c:032x}\n    vswitches: [vsw-bench{c:04d}]\n    pools:\n"
        )
        lines.extend(POOL.format(i=i) for i in range(pools))
    return "".join(lines)


def _world(clusters: int, pools: int) -> tuple[Path, CompiledFleet, Sandbox]:
    directory = Path(tempfile.mkdtemp(prefix="provisioner-bench-ack-"))
    fleet = directory / "fleet.yaml"
    fleet.write_text(fleet_text(clusters, pools), encoding="utf-8")
    compiled = compile_file(fleet)
    sandbox = Sandbox(directory / "sandbox", SandboxSettings()).start([c.target for c in compiled.clusters])
    return directory, compiled, sandbox


def _latency(sandbox: Sandbox, seconds: float) -> None:
    sandbox.emulators["ack"].app.latency = seconds  # type: ignore[attr-defined]


def run(clusters: int = 30, pools: int = 4) -> list[Figure]:
    return [*_plan_and_sync(clusters, pools), *_apply(10, 3)]


def _plan_and_sync(clusters: int, pools: int) -> list[Figure]:
    directory, compiled, sandbox = _world(clusters, pools)
    try:
        driver = connect("ack", sandbox.directory)
        for cluster in compiled.clusters:  # the pools exist already, before latency is on
            for pool in cluster.pools:
                driver.create_pool(cluster.target.ref, desired_state(pool))
        _latency(sandbox, LATENCY_MS / 1000)
        drivers = Drivers(sandbox.directory)
        planned = median_seconds(lambda: make_plan(compiled, drivers))
        one_by_one = median_seconds(
            lambda: [driver.list_pools(c.target.ref) for c in compiled.clusters], runs=1
        )
        store = Store(f"sqlite:///{directory / 'catalog.db'}")
        store.migrate()
        synced = median_seconds(lambda: sync(compiled.clusters, drivers, store))
    finally:
        sandbox.stop()
    round_trip = LATENCY_MS / 1000
    name = f"{clusters} ACK clusters x {pools} pools, {LATENCY_MS:g} ms latency"
    return [
        Figure(
            f"plan, {name}",
            round(planned / round_trip, 2),
            "round trips",
            round(one_by_one / round_trip, 1),
            "one cluster's listing after another",
        ),
        Figure(f"plan, {name}", round(planned / round_trip, 2), "round trips", 1.0, "floor: one round trip"),
        Figure(
            f"sync, {name}, into SQLite",
            round(synced / round_trip, 2),
            "round trips",
            1.0,
            "floor: one round trip",
        ),
    ]


def _apply(clusters: int, pools: int) -> list[Figure]:
    directory, compiled, sandbox = _world(clusters, pools)
    try:
        for engine in sandbox.engines.values():
            engine.op_seconds = OP_SECONDS
        drivers = Drivers(sandbox.directory)
        plan = make_plan(compiled, drivers)
        assert plan.summary["create"] == clusters * pools
        started = time.perf_counter()
        result = Applier(drivers, FileLocks(directory / "locks")).run(plan)
        ours = (time.perf_counter() - started) / OP_SECONDS
        assert result.ok, result.not_done
    finally:
        sandbox.stop()
    name = f"apply, {pools} pools in each of {clusters} ACK clusters, {OP_SECONDS:g} s operations"
    return [
        Figure(
            name, round(ours, 2), "operations", float(clusters * pools), "serial, one pool at a time (N x k)"
        ),
        Figure(name, round(ours, 2), "operations", float(pools), f"floor: {pools} operations per cluster"),
    ]
