"""Apply of k pools in each of N clusters with 2-second operations.

provisioner runs clusters in parallel and one operation at a time in each, so the floor is k
operations of wall time; serial (one pool after another, as a script would) is N x k.
Figures are in operations (wall time / operation time).
"""

from __future__ import annotations

import time
from pathlib import Path

from bench import world
from bench.figures import Figure
from provisioner.apply import Applier
from provisioner.compile import desired_state
from provisioner.drivers.registry import connect
from provisioner.locks import FileLocks
from provisioner.observe import Drivers
from provisioner.workflow import make_plan

OP_SECONDS = 2.0


def run(clusters: int = 10, pools: int = 3) -> list[Figure]:
    bench = world.start(clusters, pools, created=False, op_seconds=OP_SECONDS)
    try:
        drivers = Drivers(bench.sandbox_dir)
        plan = make_plan(bench.compiled, drivers)
        assert plan.summary["create"] == clusters * pools
        started = time.perf_counter()
        result = Applier(drivers, FileLocks(Path(bench.directory) / "locks")).run(plan)
        ours = (time.perf_counter() - started) / OP_SECONDS
        assert result.ok, result.not_done
    finally:
        bench.stop()

    serial_world = world.start(clusters, pools, created=False, op_seconds=OP_SECONDS)
    try:
        driver = connect("gke", serial_world.sandbox_dir)
        started = time.perf_counter()
        for cluster in serial_world.compiled.clusters:
            for pool in cluster.pools:
                driver.create_pool(cluster.target.ref, desired_state(pool))
        serial = (time.perf_counter() - started) / OP_SECONDS
    finally:
        serial_world.stop()

    name = f"apply, {pools} pools in each of {clusters} clusters, {OP_SECONDS:g} s operations"
    return [
        Figure(name, round(ours, 2), "operations", round(serial, 1), "serial, one pool at a time"),
        Figure(name, round(ours, 2), "operations", float(pools), f"floor: {pools} operations per cluster"),
    ]
