"""Compile and diff of a 10,000-pool fleet (1,000 AKS clusters x 10 pools): CPU seconds and peak
memory, beside the 1-second goal; and loading the fleet file itself, for scale.

Each run is a fresh process, so its peak memory is this work's alone. Peak memory is VmHWM from
/proc (ru_maxrss would carry the parent's peak across exec on Linux).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.figures import Figure

CLUSTERS, POOLS = 1000, 10
GOAL_SECONDS = 1.0
_KINDS = [
    ("Standard_NC24ads_A100_v4", "{mig: 1g.10gb}"),
    ("Standard_NC4as_T4_v3", "{sharing: time-slicing, replicas: 4}"),
    ("Standard_ND96amsr_A100_v4", "{mig: 3g.40gb, sharing: time-slicing, replicas: 2}"),
]

_MEASURE = """
import dataclasses, json, re, sys, time
from provisioner.fleet import load
from provisioner.observe import Observation
from provisioner.plan import diff
from provisioner.compile import compile_fleet, desired_state

started = time.process_time()
fleet = load(sys.argv[1])
loaded = time.process_time()
compiled = compile_fleet(fleet)
compiled_at = time.process_time()
# The clouds hold every pool; a third of them with other autoscaling bounds: those are updates.
observations = []
for cluster in compiled.clusters:
    pools = []
    for i, pool in enumerate(cluster.pools):
        state = desired_state(pool)
        if i % 3 == 0:
            state = dataclasses.replace(state, scaling=dataclasses.replace(state.scaling, max=9))
        pools.append(state)
    observations.append(Observation(cluster.target, tuple(pools)))
observed = time.process_time()
plan = diff(compiled.clusters, observations)
done = time.process_time()
print(json.dumps({
    "load": loaded - started,
    "compile_diff": (compiled_at - loaded) + (done - observed),
    "updates": plan.summary["update"],
    "peak_mb": int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1]) / 1024,
}))
"""

_IDLE = (
    "import re, provisioner.compile, provisioner.plan, provisioner.observe; "
    r"print(int(re.search(r'VmHWM:\s+(\d+)', open('/proc/self/status').read())[1]) / 1024)"
)


def fleet_text(clusters: int = CLUSTERS, pools: int = POOLS) -> str:
    lines = ["clusters:"]
    for c in range(clusters):
        lines.append(
            f"  - name: c{c}\n    cloud: aks\n    subscription: 00000000-0000-0000-0000-{c:012d}\n"
            f"    resourceGroup: rg\n    cluster: k{c}\n    pools:"
        )
        for p in range(pools):
            kind, gpu = _KINDS[p % len(_KINDS)]
            lines.append(
                f"      - {{name: p{p}, instanceType: {kind}, gpu: {gpu}, nodes: {{min: 0, max: 4}}}}"
            )
    return "\n".join(lines) + "\n"


def _python(code: str, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    ).stdout


def run() -> list[Figure]:
    path = Path(tempfile.mkdtemp()) / "fleet.yaml"
    path.write_text(fleet_text(), encoding="utf-8")
    runs = sorted(
        (json.loads(_python(_MEASURE, str(path))) for _ in range(3)), key=lambda r: r["compile_diff"]
    )
    median = runs[1]
    assert median["updates"] == CLUSTERS * len(range(0, POOLS, 3))
    idle_mb = float(_python(_IDLE))
    pools = f"{CLUSTERS * POOLS:,}"
    return [
        Figure(
            f"compile + diff of {pools} pools",
            round(median["compile_diff"], 2),
            "CPU s",
            GOAL_SECONDS,
            "goal",
        ),
        Figure(
            f"peak memory, loading, compiling and diffing {pools} pools",
            round(median["peak_mb"]),
            "MB",
            round(idle_mb),
            "the same process before it reads the fleet",
        ),
        Figure(
            f"loading the {pools}-pool fleet file (YAML + validation)",
            round(median["load"], 2),
            "CPU s",
            GOAL_SECONDS,
            "goal",
        ),
    ]
