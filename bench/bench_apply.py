"""Apply of k pools in each of N clusters with 2-second operations.

provisioner runs clusters in parallel and one operation at a time in each, so the floor is k
operations of wall time; serial (one pool after another, as a script would) is N x k.
Figures are in operations (wall time / operation time): the apply in this process, and the
whole `provisioner apply` command as a user runs it, from its start to its exit (start-up,
reading the fleet, planning, locks and the device-plugin ConfigMap checks included).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
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
RUNS = 3  # each run in a fresh world: the median is reported


def run(clusters: int = 10, pools: int = 3) -> list[Figure]:
    ours = statistics.median(_in_process(clusters, pools) for _ in range(RUNS))
    command = statistics.median(_as_a_command(clusters, pools) for _ in range(RUNS))
    serial = _serial(clusters, pools)
    what = f"{pools} pools in each of {clusters} clusters, {OP_SECONDS:g} s operations"
    name, whole = f"apply, {what}", f"`provisioner apply` process, {what}"
    floor = f"floor: {pools} operations per cluster"
    return [
        Figure(name, round(ours, 2), "operations", round(serial, 1), "serial, one pool at a time"),
        Figure(name, round(ours, 2), "operations", float(pools), floor),
        Figure(whole, round(command, 2), "operations", float(pools), floor),
    ]


def _in_process(clusters: int, pools: int) -> float:
    """Operations of wall time of Applier.run on a plan made beforehand."""
    bench = world.start(clusters, pools, created=False, op_seconds=OP_SECONDS)
    try:
        drivers = Drivers(bench.sandbox_dir)
        plan = make_plan(bench.compiled, drivers)
        assert plan.summary["create"] == clusters * pools
        started = time.perf_counter()
        result = Applier(drivers, FileLocks(Path(bench.directory) / "locks")).run(plan)
        elapsed = time.perf_counter() - started
        assert result.ok, result.not_done
    finally:
        bench.stop()
    return elapsed / OP_SECONDS


def _as_a_command(clusters: int, pools: int) -> float:
    """Operations of wall time of `provisioner --sandbox DIR apply FLEET --auto-approve`, a new process."""
    bench = world.start(clusters, pools, created=False, op_seconds=OP_SECONDS)
    # Only this bench's sandbox: no catalog, lock server or lock directory from the caller's environment.
    env = {key: value for key, value in os.environ.items() if not key.startswith("PROVISIONER_")}
    command = [sys.executable, "-m", "provisioner", "--sandbox", str(bench.sandbox_dir)]
    command += ["apply", str(bench.fleet), "--auto-approve"]
    try:
        started = time.perf_counter()
        done = subprocess.run(command, check=False, capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - started
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"{clusters * pools} created" in done.stdout, done.stdout[-2000:]
    finally:
        bench.stop()
    return elapsed / OP_SECONDS


def _serial(clusters: int, pools: int) -> float:
    serial_world = world.start(clusters, pools, created=False, op_seconds=OP_SECONDS)
    try:
        driver = connect("gke", serial_world.sandbox_dir)
        started = time.perf_counter()
        for cluster in serial_world.compiled.clusters:
            for pool in cluster.pools:
                driver.create_pool(cluster.target.ref, desired_state(pool))
        return (time.perf_counter() - started) / OP_SECONDS
    finally:
        serial_world.stop()
