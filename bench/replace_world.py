"""N clusters (GKE, AKS and EKS in turn) with k GPU pools each, every pool running a Deployment of
GPU pods under a PodDisruptionBudget, served from a child process (as world.py serves GKE's); and
a sampler of each pool's slices through the clusters' Kubernetes APIs.

The pools are what `provisioner apply` makes: the world is seeded by that command with operations
that end at once, then operations are given their length. Each pool is 2 nodes of one GPU, and
its Deployment 2 one-GPU pods, so each pool is full and a pod can move only to a new pool's node.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench import world
from provisioner.compile import CompiledCluster, compile_file
from provisioner.pools import POOL_NODE_LABEL
from provisioner.sandbox.server import Sandbox, SandboxSettings
from provisioner.sandbox.serving import serve_alone

NODES, GPUS_PER_NODE = 2, 1  # per pool: the Deployment's 2 one-GPU pods fill it
NS = "ml"
CLOUDS = ("gke", "aks", "eks")
WHERE = {  # zonal GKE, so a count of 2 is 2 nodes (a regional pool has it in each of 3 zones)
    "gke": "    project: bench-project\n    location: europe-west4-a\n    cluster: gke-{c:04d}\n",
    "aks": "    subscription: 44444444-4444-4444-4444-444444444444\n    resourceGroup: rg-bench\n"
    "    cluster: aks-{c:04d}\n",
    "eks": "    region: us-west-2\n    cluster: eks-{c:04d}\n"
    "    nodeRole: arn:aws:iam::123456789012:role/nodes\n    subnets: [subnet-0abc1234]\n",
}
# Two instance types of one GPU each per cloud (tests/test_replace.py's): a change between them
# cannot be made in place, so it replaces the pool.
INSTANCE_TYPES = {
    "gke": ("g2-standard-8", "g2-standard-16"),
    "aks": ("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"),
    "eks": ("g5.xlarge", "g5.2xlarge"),
}
POOL = "      - {{name: gpu{i}, instanceType: {instance_type}, nodes: {{count: {nodes}}}{replace}}}\n"


def fleet_text(clusters: int, pools: int, edited: bool = False, delete_first: bool = False) -> str:
    """The fleet, or (`edited`) the same with every pool's instance type changed."""
    lines = ["clusters:\n"]
    for c in range(clusters):
        cloud = CLOUDS[c % len(CLOUDS)]
        lines.append(f"  - name: c{c:04d}\n    cloud: {cloud}\n{WHERE[cloud].format(c=c)}    pools:\n")
        instance_type = INSTANCE_TYPES[cloud][int(edited)]
        replace = ", replace: delete-first" if delete_first else ""
        lines.extend(
            POOL.format(i=i, instance_type=instance_type, nodes=NODES, replace=replace) for i in range(pools)
        )
    return "".join(lines)


@dataclass
class ReplaceWorld:
    directory: Path
    fleet: Path
    clusters: tuple[CompiledCluster, ...]
    process: multiprocessing.process.BaseProcess
    control: Connection

    @property
    def sandbox_dir(self) -> Path:
        return self.directory / "sandbox"

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "provisioner", "--sandbox", str(self.sandbox_dir), *args]

    def stop(self) -> None:
        self.control.send(("stop", 0.0))
        self.process.join(timeout=30)


def start(clusters: int, pools: int, op_seconds: float) -> ReplaceWorld:
    """The fleet applied in a sandbox, each pool's Deployment running under its budget; then
    operations take `op_seconds`."""
    directory = Path(tempfile.mkdtemp(prefix="provisioner-bench-replace-"))
    fleet = directory / "fleet.yaml"
    fleet.write_text(fleet_text(clusters, pools), encoding="utf-8")
    compiled = compile_file(fleet).clusters
    process, parent = world.fork_sandbox(_serve, directory=directory / "sandbox", clusters=compiled)
    made = ReplaceWorld(directory, fleet, compiled, process, parent)
    try:
        done = subprocess.run(
            made.command("apply", str(fleet), "--auto-approve"),
            check=False,
            capture_output=True,
            text=True,
            env=env(),
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        apis = [_apis(made.sandbox_dir, c.name) for c in compiled]
        for (apps, policy), _ in apis:
            for i in range(pools):
                _workload(apps, policy, f"gpu{i}")
        _until_running(apis, pools)
        parent.send(("op_seconds", op_seconds))
        assert parent.recv() == "ok"
    except BaseException:
        made.stop()
        raise
    return made


def env() -> dict[str, str]:
    """Only the bench's sandbox: no catalog, lock server or lock directory from the caller's."""
    return {key: value for key, value in os.environ.items() if not key.startswith("PROVISIONER_")}


def _serve(*, directory: Path, clusters: Sequence[CompiledCluster], control: Connection) -> None:
    sandbox = Sandbox(directory, SandboxSettings()).start([c.target for c in clusters])
    control.send("ready")
    while True:
        what, value = control.recv()
        if what == "stop":
            break
        for engine in sandbox.engines.values():
            engine.op_seconds = value
        serve_alone()  # seeded: what the process holds now stays out of full collections
        control.send("ok")
    sandbox.stop()


def _apis(sandbox_dir: Path, context: str) -> tuple[tuple[Any, Any], Any]:
    """(apps/v1, policy/v1), and core/v1, of one cluster's context in the sandbox's kubeconfig."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(sandbox_dir / "kubeconfig"), context=context)
    return (client.AppsV1Api(api), client.PolicyV1Api(api)), client.CoreV1Api(api)


def _workload(apps: Any, policy: Any, pool: str) -> None:
    """A Deployment filling the pool with one-GPU pods, and a budget of one pod down at a time."""
    container = {"name": "main", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    spec = {
        "containers": [container],
        "nodeSelector": {POOL_NODE_LABEL: pool},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    selector = {"matchLabels": {"app": pool}}
    template = {"metadata": {"labels": {"app": pool}}, "spec": spec}
    replicas = NODES * GPUS_PER_NODE
    body = {"replicas": replicas, "selector": selector, "template": template}
    apps.create_namespaced_deployment(NS, {"metadata": {"name": pool}, "spec": body})
    budget = {"selector": selector, "maxUnavailable": 1}
    policy.create_namespaced_pod_disruption_budget(NS, {"metadata": {"name": pool}, "spec": budget})


def _until_running(apis: list[tuple[tuple[Any, Any], Any]], pools: int, seconds: float = 60.0) -> None:
    wanted = pools * NODES * GPUS_PER_NODE
    deadline = time.monotonic() + seconds
    for _, core in apis:
        while True:
            pods = json.loads(core.list_namespaced_pod(NS, _preload_content=False).data)["items"]
            if sum(p["status"].get("phase") == "Running" for p in pods) == wanted:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bench's pods did not all run: {len(pods)} pods")
            time.sleep(0.1)


@dataclass
class Sampler:
    """Each pool's slices, sampled through its cluster's Kubernetes API while a command runs: the
    allocatable GPUs of the nodes labelled provisioner.io/pool=<pool> that are Ready and not
    cordoned (`schedulable`), and of all of them (`listed`, cordoned ones too, as
    tests/test_replace.py counts), one cluster's node listing after another."""

    world: ReplaceWorld
    pause: float = 0.05  # between rounds of every cluster's listing: light on the 2 cores
    schedulable: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (cluster, pool)
    listed: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    rounds: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._cores = [(c.name, _apis(self.world.sandbox_dir, c.name)[1]) for c in self.world.clusters]

    def __enter__(self) -> Sampler:
        self._round()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._round()

    def lowest_share(self, counts: dict[tuple[str, str], list[int]]) -> float:
        """The lowest of every pool's samples over its first one: the pool that fell the furthest."""
        return min(min(samples) / samples[0] for samples in counts.values())

    def _sample(self) -> None:
        while not self._stop.wait(self.pause):
            self._round()

    def _round(self) -> None:
        for cluster, core in self._cores:
            raw = core.list_node(label_selector=POOL_NODE_LABEL, _preload_content=False)
            seen: dict[str, list[int]] = {}
            for node in json.loads(raw.data)["items"]:
                gpus = int((node["status"].get("allocatable") or {}).get("nvidia.com/gpu", 0))
                up = _is_ready(node) and not node["spec"].get("unschedulable")
                counted = seen.setdefault(node["metadata"]["labels"][POOL_NODE_LABEL], [0, 0])
                counted[0] += gpus if up else 0
                counted[1] += gpus
            for pool in {p for c, p in self.listed if c == cluster} | set(seen):
                schedulable, listed = seen.get(pool, [0, 0])
                self.schedulable.setdefault((cluster, pool), []).append(schedulable)
                self.listed.setdefault((cluster, pool), []).append(listed)
        self.rounds += 1


def _is_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
