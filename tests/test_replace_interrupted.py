"""`kill -9` of a create-first replacement at each of its steps, in real processes, then a new
`apply`: it finishes the same replacement from what the cloud holds (both pools, the new one
marked with its generation), never makes a third pool and never deletes the new one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from provisioner.pools import POOL_NODE_LABEL
from tests.kube.workloads import wait_for
from tests.test_replace import CLUSTERS, FLEET, INSTANCE_TYPES

PROVISIONER = [sys.executable, "-m", "provisioner"]


class Served:
    """`provisioner sandbox serve` in its own process, and the fleet's one cluster."""

    def __init__(self, tmp_path: Path, cloud: str):
        self.cloud, suffix = cloud, uuid.uuid4().hex[:8]
        self.fleet = tmp_path / "fleet.yaml"
        self.texts = [
            FLEET.format(cloud=cloud, where=CLUSTERS[cloud].format(s=suffix), instance_type=t, extra="")
            for t in INSTANCE_TYPES[cloud]
        ]
        self.fleet.write_text(self.texts[0], encoding="utf-8")
        self.directory = tmp_path / "sandbox"
        self.env = {**os.environ, "PROVISIONER_SANDBOX": str(self.directory), "PROVISIONER_LOCK_DIR": ""}
        serve = [
            "sandbox",
            "serve",
            "--dir",
            str(self.directory),
            "--seed",
            str(self.fleet),
            "--op-seconds",
            "1",
        ]
        self.server = subprocess.Popen(
            [*PROVISIONER, *serve], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while not (self.directory / "endpoints.json").exists():
            assert time.monotonic() < deadline, "the sandbox did not start"
            time.sleep(0.1)
        self.ref = compile_file(self.fleet).clusters[0].target.ref
        self.driver = connect(cloud, self.directory)
        self.names: set[str] = set()  # every owned cloud pool seen while the test ran

    def stop(self) -> None:
        self.server.send_signal(signal.SIGTERM)
        self.server.wait(timeout=10)

    def apply(self) -> subprocess.Popen[str]:
        command = [*PROVISIONER, "apply", str(self.fleet), "--auto-approve", "--drain-timeout", "60"]
        return subprocess.Popen(
            command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def pools(self) -> list[Any]:
        found = [p for p in self.driver.list_pools(self.ref) if p.owned]
        self.names |= {p.name for p in found}
        return found

    def kube(self) -> tuple[Any, Any, Any]:
        api = config.new_client_from_config(str(self.directory / "kubeconfig"), context="one")
        return client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)

    def workload(self) -> None:
        _, apps, policy = self.kube()
        spec = {
            "containers": [
                {"name": "m", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": 1}}}
            ],
            "nodeSelector": {POOL_NODE_LABEL: "train"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
        selector = {"matchLabels": {"app": "train"}}
        body = {
            "replicas": 2,
            "selector": selector,
            "template": {"metadata": {"labels": {"app": "train"}}, "spec": spec},
        }
        apps.create_namespaced_deployment("ml", {"metadata": {"name": "train"}, "spec": body})
        policy.create_namespaced_pod_disruption_budget(
            "ml", {"metadata": {"name": "train"}, "spec": {"selector": selector, "maxUnavailable": 1}}
        )
        wait_for(lambda: self.running() == 2, seconds=30)

    def running(self) -> int:
        core, _, _ = self.kube()
        pods = json.loads(core.list_namespaced_pod("ml", _preload_content=False).data)["items"]
        return sum(
            p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp") for p in pods
        )

    def old_nodes_cordoned(self) -> bool:
        core, _, _ = self.kube()
        nodes = json.loads(
            core.list_node(label_selector=f"{POOL_NODE_LABEL}=train", _preload_content=False).data
        )
        return any(n["spec"].get("unschedulable") for n in nodes["items"])


def _creating(served: Served) -> bool:
    return any(p.generation == 2 and p.status == "changing" for p in served.pools())


def _deleting(served: Served) -> bool:
    return any(p.generation == 1 and p.status == "changing" for p in served.pools())


# The step each test kills the apply in, on one cloud each, so the three clouds are all covered.
STEPS: dict[str, tuple[str, Callable[[Served], bool]]] = {
    "while the new pool is created": ("gke", _creating),
    "while the old pool is drained": ("eks", Served.old_nodes_cordoned),
    "while the old pool is deleted": ("aks", _deleting),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_replacement_killed_at_any_step_is_finished_by_the_next_apply(tmp_path: Path, step: str):
    cloud, reached = STEPS[step]
    served = Served(tmp_path, cloud)
    try:
        first = subprocess.run(
            [*PROVISIONER, "apply", str(served.fleet), "--auto-approve"], env=served.env, check=False
        )
        assert first.returncode == 0
        served.workload()
        served.fleet.write_text(served.texts[1], encoding="utf-8")
        watching = threading.Event()
        watcher = threading.Thread(target=lambda: _watch(served, watching), daemon=True)
        watcher.start()
        killed = served.apply()
        wait_for(lambda: reached(served) or killed.poll() is not None, seconds=60)
        assert killed.poll() is None, (
            f"apply ended before {step}: {killed.stdout.read() if killed.stdout else ''}"
        )
        killed.send_signal(signal.SIGKILL)
        killed.wait()

        again = subprocess.run(
            [*PROVISIONER, "apply", str(served.fleet), "--auto-approve", "--drain-timeout", "60"],
            env=served.env,
            capture_output=True,
            text=True,
            check=False,
        )
        watching.set()
        watcher.join()
        assert again.returncode == 0, again.stdout + again.stderr
        (pool,) = served.pools()
        assert (pool.pool_name, pool.generation) == ("train", 2)
        assert pool.instance_type == INSTANCE_TYPES[cloud][1]
        assert len(served.names) == 2, f"a third pool was made: {sorted(served.names)}"
        assert wait_for(lambda: served.running() == 2, seconds=30)
        plan = subprocess.run(
            [*PROVISIONER, "plan", str(served.fleet), "--detailed-exitcode"],
            env=served.env,
            capture_output=True,
            check=False,
        )
        assert plan.returncode == 0
    finally:
        served.stop()


def _watch(served: Served, done: threading.Event) -> None:
    """Record every cloud pool that exists while the test runs: each is listed for at least the
    1 s its create takes (--op-seconds 1), so a look each 0.25 s sees every one."""
    while not done.is_set():
        served.pools()
        time.sleep(0.25)
