"""A replacement of k pools in each of N clusters (GKE, AKS and EKS in turn), with 2-second
operations: every pool's instance type changes, and the whole `provisioner apply FLEET
--auto-approve` command replaces them, as a user runs it, create-first (the default) and, beside
it in a world of its own, delete-first (`replace: delete-first`).

The floor of a create-first replacement, per cluster (one operation at a time in each, clusters
in parallel): k x (create + delete) operations, plus each pool's drain, counted as one scan
interval of the sandbox's cluster components per pod (an evicted pod is gone, and its replacement
Ready on the new pool, at the next scan; the budget of one allows the next eviction only then).
The new nodes are Ready as soon as their pool is: their wait counts nothing. Delete-first's floor
is k x (delete + create) operations.

While the command runs, a thread here samples each pool's slices through the Kubernetes API
(replace_world.Sampler); the figure is the pool that fell the furthest, as a share of its slices
before the apply.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from dataclasses import dataclass

from bench import replace_world
from bench.figures import Figure
from provisioner.sandbox.kube import SCAN_INTERVAL

OP_SECONDS = 2.0
RUNS = 3  # create-first runs, each in a fresh world (the median reported); delete-first runs once
SAME = "delete-first, the same fleet and workloads"


def run(clusters: int = 10, pools: int = 3) -> list[Figure]:
    first = [_replace(clusters, pools, delete_first=False) for _ in range(RUNS)]
    then = _replace(clusters, pools, delete_first=True)
    ours = statistics.median(r.seconds for r in first) / OP_SECONDS
    share = min(r.share for r in first)  # the worst run's: a share that fell once fell
    listed = min(r.listed for r in first)
    period = max(r.period for r in (*first, then))
    drain = pools * replace_world.NODES * replace_world.GPUS_PER_NODE * SCAN_INTERVAL / OP_SECONDS
    floor = pools * 2 + drain
    what = f"{pools} pools in each of {clusters} clusters (GKE, AKS, EKS), {OP_SECONDS:g} s operations"
    name = f"`provisioner apply` replacing {what}"
    shown = f"lowest share of a pool's slices on Ready, uncordoned nodes, replacing {what}"
    return [
        Figure(
            name,
            round(ours, 2),
            "operations",
            round(floor, 2),
            f"floor: {pools} x (create + delete) operations per cluster + the drains "
            f"({SCAN_INTERVAL:g} s scan per pod)",
        ),
        Figure(name, round(ours, 2), "operations", round(then.seconds / OP_SECONDS, 2), SAME),
        Figure(
            f"`provisioner apply` delete-first replacing {what}",
            round(then.seconds / OP_SECONDS, 2),
            "operations",
            float(pools * 2),
            f"floor: {pools} x (delete + create) operations per cluster",
        ),
        Figure(
            shown,
            round(100 * share, 1),
            "%",
            round(100 * then.share, 1),
            SAME,
            note=f"each pool sampled about every {period:.2g} s; counting cordoned nodes too: "
            f"create-first {100 * listed:g}%, delete-first {100 * then.listed:g}%",
        ),
    ]


@dataclass(frozen=True)
class Replaced:
    seconds: float  # the apply's wall time
    share: float  # the lowest share of a pool's slices on Ready, uncordoned nodes while it ran
    listed: float  # the same, of every node listed (cordoned ones too)
    period: float  # seconds between two samples of a pool, on average


def _replace(clusters: int, pools: int, *, delete_first: bool) -> Replaced:
    """The apply that replaces every pool in a fresh world, timed and sampled."""
    world = replace_world.start(clusters, pools, OP_SECONDS)
    try:
        world.fleet.write_text(
            replace_world.fleet_text(clusters, pools, edited=True, delete_first=delete_first),
            encoding="utf-8",
        )
        command = world.command("apply", str(world.fleet), "--auto-approve")
        with replace_world.Sampler(world) as sampled:
            started = time.perf_counter()
            done = subprocess.run(
                command, check=False, capture_output=True, text=True, env=replace_world.env()
            )
            elapsed = time.perf_counter() - started
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        assert f"{clusters * pools} replaced" in done.stdout, done.stdout[-2000:]
    finally:
        world.stop()
    return Replaced(
        elapsed,
        sampled.lowest_share(sampled.schedulable),
        sampled.lowest_share(sampled.listed),
        elapsed / max(sampled.rounds - 2, 1),  # less the rounds before and after the command
    )
