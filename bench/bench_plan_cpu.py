"""CPU of the whole `provisioner plan` of 300 AKS clusters (kube_world's, no latency, quotas off),
with each cluster's device-plugin ConfigMap read through its kubeconfig context and with
--no-kube, in CPU seconds of the command and every process it started (spread's helpers too).

The world's clusters share one API server and CA, as clusters behind one gateway do, so the
tool's clients share their connections there (provisioner/kube/kubeconfig.py).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from bench import kube_world
from bench.figures import Figure

CLUSTERS = 300
RUNS = 5  # each way, alternating: a 2-core machine shared with the emulators is noisy
GOAL_CPU_SECONDS = 4.0  # issue 30's goal for the plan with the ConfigMap reads

# Runs the command as a child subreaper (Linux): the helpers it forks are reparented here when it
# exits and are waited for, so their CPU is counted too. Prints the CPU seconds as JSON.
_CPU_OF = """
import ctypes, json, os, resource, subprocess, sys
PR_SET_CHILD_SUBREAPER = 36
try:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
except (OSError, AttributeError):
    pass  # not Linux: only the command's own children are counted
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
used = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = used.ru_utime + used.ru_stime
print(json.dumps({"code": done.returncode, "cpu": cpu, "error": done.stderr[-2000:]}))
"""


def _cpu_seconds(command: list[str]) -> float:
    result = subprocess.run(
        [sys.executable, "-c", _CPU_OF, *command], capture_output=True, text=True, check=True
    )
    measured = json.loads(result.stdout)
    if measured["code"] not in (0, 2):  # plan's exit codes: no changes, changes
        raise RuntimeError(f"{' '.join(command)} exited {measured['code']}: {measured['error']}")
    return float(measured["cpu"])


def run() -> list[Figure]:
    world = kube_world.start(CLUSTERS, latency_ms=0.0)
    try:
        plan = [sys.executable, "-m", "provisioner", "--sandbox", str(world.directory / "sandbox-0")]
        plan += ["plan", str(world.fleet), "--json"]
        reads, no_reads = [], []
        for _ in range(RUNS):
            reads.append(_cpu_seconds([*plan, "--kubeconfig", str(world.kubeconfig)]))
            no_reads.append(_cpu_seconds([*plan, "--no-kube"]))
    finally:
        world.stop()
    name = f"whole `provisioner plan`, {CLUSTERS} clusters, ConfigMap reads on"
    on, off = round(statistics.median(reads), 2), round(statistics.median(no_reads), 2)
    spread = f"runs {min(reads):.2f}-{max(reads):.2f}, --no-kube {min(no_reads):.2f}-{max(no_reads):.2f}"
    return [
        Figure(name, on, "CPU s", GOAL_CPU_SECONDS, "goal", spread),
        Figure(name, on, "CPU s", off, "the same with --no-kube", spread),
    ]
