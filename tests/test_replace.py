"""Replacements that keep GPU capacity, on each cloud, over the wire: `provisioner apply` against the
sandbox while a thread samples the fleet pool's nodes and pods through the Kubernetes API, with a
Deployment on the pool and a PodDisruptionBudget over it, as a platform team runs them.

ACK is absent: every field of an ACK pool the fleet sets changes in place (FACTS.md, "Terraform:
what forces a new GPU node pool"), so no fleet edit replaces an ACK pool.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client, config

from provisioner.cli import main
from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from provisioner.pools import POOL_NODE_LABEL
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.kube.workloads import wait_for

NS = "ml"
CLUSTERS = {
    "aks": "    subscription: 22222222-2222-2222-2222-222222222222\n    resourceGroup: rg-{s}\n"
    "    cluster: aks-{s}",
    "gke": "    project: project-{s}\n    location: europe-west4-a\n    cluster: gke-{s}",
    "eks": "    region: us-west-2\n    cluster: eks-{s}\n    nodeRole: arn:aws:iam::123456789012:role/nodes\n"
    "    subnets: [subnet-0abc1234]",
}
# Two instance types of one GPU per node each, so a change between them forces a new pool.
INSTANCE_TYPES = {
    "aks": ("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"),
    "gke": ("g2-standard-8", "g2-standard-16"),
    "eks": ("g5.xlarge", "g5.2xlarge"),
}
FLEET = """\
clusters:
  - name: one
    cloud: {cloud}
{where}
    pools:
      - name: train
        instanceType: {instance_type}
        nodes: {{count: 2}}
{extra}"""


class Fleet:
    """One cluster of `cloud` in a sandbox whose components run in their own thread."""

    def __init__(self, tmp_path: Path, cloud: str):
        self.cloud, self.suffix = cloud, uuid.uuid4().hex[:8]
        self.path = tmp_path / "fleet.yaml"
        self.write(INSTANCE_TYPES[cloud][0])
        compiled = compile_file(self.path).clusters[0]
        self.ref = compiled.target.ref
        settings = SandboxSettings(op_seconds=0.3, scan_interval=0.1)
        self.sandbox = Sandbox(tmp_path / "sandbox", settings).start([compiled.target])
        api = config.new_client_from_config(str(self.sandbox.kubeconfig), context="one")
        self.core, self.apps, self.policy = (
            client.CoreV1Api(api),
            client.AppsV1Api(api),
            client.PolicyV1Api(api),
        )

    def write(self, instance_type: str, extra: str = "") -> None:
        where = CLUSTERS[self.cloud].format(s=self.suffix)
        text = FLEET.format(cloud=self.cloud, where=where, instance_type=instance_type, extra=extra)
        self.path.write_text(text, encoding="utf-8")

    def run(self, *args: str) -> Any:
        env = {
            "PROVISIONER_SANDBOX": str(self.sandbox.directory),
            "PROVISIONER_LOCK_DIR": "",
            "PROVISIONER_CATALOG": "",
        }
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    def cloud_pools(self) -> list[Any]:
        return [p for p in connect(self.cloud, self.sandbox.directory).list_pools(self.ref) if p.owned]

    def workload(self, replicas: int = 2, **budget: Any) -> None:
        """A Deployment of one-GPU pods on the fleet pool, and a budget over it."""
        container = {"name": "main", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": 1}}}
        spec = {
            "containers": [container],
            "nodeSelector": {POOL_NODE_LABEL: "train"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
        template = {"metadata": {"labels": {"app": "train"}}, "spec": spec}
        selector = {"matchLabels": {"app": "train"}}
        self.apps.create_namespaced_deployment(
            NS,
            {
                "metadata": {"name": "train"},
                "spec": {"replicas": replicas, "selector": selector, "template": template},
            },
        )
        self.policy.create_namespaced_pod_disruption_budget(
            NS, {"metadata": {"name": "train"}, "spec": {"selector": selector, **budget}}
        )
        assert wait_for(lambda: self.running() == replicas, seconds=20), self.running()

    def nodes(self) -> list[dict[str, Any]]:
        raw = self.core.list_node(label_selector=f"{POOL_NODE_LABEL}=train", _preload_content=False)
        return json.loads(raw.data)["items"]

    def slices(self) -> int:
        """The pool's GPUs on nodes that are up, cordoned ones included (their pods still run)."""
        return sum(int((n["status"].get("allocatable") or {}).get("nvidia.com/gpu", 0)) for n in self.nodes())

    def running(self) -> int:
        raw = self.core.list_namespaced_pod(NS, label_selector="app=train", _preload_content=False)
        pods = json.loads(raw.data)["items"]
        return sum(
            p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp") for p in pods
        )


@dataclass
class Sampler:
    """The fleet pool's slices and running pods, sampled while an apply runs."""

    fleet: Fleet
    slices: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.slices.append(self.fleet.slices())
            self.running.append(self.fleet.running())
            time.sleep(0.02)


@pytest.fixture(params=sorted(INSTANCE_TYPES))
def fleet(request: pytest.FixtureRequest, tmp_path: Path):
    made = Fleet(tmp_path, request.param)
    try:
        assert made.run("apply", str(made.path), "--auto-approve").exit_code == 0
        yield made
    finally:
        made.sandbox.stop()


def test_a_replaced_pool_keeps_slices_and_its_pods_move_under_a_budget_of_one(fleet: Fleet):
    fleet.workload(maxUnavailable=1)
    fleet.write(INSTANCE_TYPES[fleet.cloud][1])
    planned = json.loads(fleet.run("plan", str(fleet.path), "--json").stdout)
    (change,) = planned["changes"]
    assert (change["action"], change["order"], change["retires"]) == ("replace", "create-first", ["train"])
    shown = fleet.run("plan", str(fleet.path)).stdout
    assert f"create-first: creates {change['cloud_name']}" in shown
    counted = "its nodes" if fleet.cloud == "gke" else "its 2 nodes"  # GKE's listing gives no count
    assert f"keeps meanwhile: {counted}, until the new pool's nodes are ready" in shown

    with Sampler(fleet) as sampled:
        done = fleet.run("apply", str(fleet.path), "--auto-approve", "--drain-timeout", "60")
    assert done.exit_code == 0, done.output
    assert min(sampled.slices) >= 2, "the pool's slices dropped while it was replaced"
    assert min(sampled.running) >= 1, "the budget allows one pod down at a time"
    (pool,) = fleet.cloud_pools()
    assert (pool.name, pool.pool_name, pool.generation) == (change["cloud_name"], "train", 2)
    assert pool.instance_type == INSTANCE_TYPES[fleet.cloud][1]
    assert wait_for(lambda: fleet.running() == 2, seconds=20)
    assert fleet.run("plan", str(fleet.path), "--detailed-exitcode").exit_code == 0


def test_a_budget_that_allows_no_eviction_leaves_the_old_pool_and_names_the_pods(fleet: Fleet):
    fleet.workload(minAvailable=2)
    fleet.write(INSTANCE_TYPES[fleet.cloud][1])
    done = fleet.run("apply", str(fleet.path), "--auto-approve", "--drain-timeout", "1")
    assert done.exit_code == 1
    assert "train" in done.output and "disruption budget" in done.output and "ml/train-" in done.output
    names = sorted(p.name for p in fleet.cloud_pools())
    assert "train" in names and len(names) == 2  # nothing deleted that still holds pods
    assert fleet.running() == 2
    # Once the budget allows it, the next apply finishes the same replacement: no third pool.
    fleet.policy.delete_namespaced_pod_disruption_budget("train", NS)
    again = fleet.run("apply", str(fleet.path), "--auto-approve", "--drain-timeout", "60")
    assert again.exit_code == 0, again.output
    assert [p.name for p in fleet.cloud_pools()] == [n for n in names if n != "train"]


def test_force_drain_deletes_what_blocks_past_the_timeout(fleet: Fleet):
    fleet.workload(minAvailable=2)
    fleet.write(INSTANCE_TYPES[fleet.cloud][1])
    done = fleet.run("apply", str(fleet.path), "--auto-approve", "--drain-timeout", "1", "--force-drain")
    assert done.exit_code == 0, done.output
    assert [p.generation for p in fleet.cloud_pools()] == [2]


def test_delete_first_deletes_then_creates_under_the_fleet_name_as_before(fleet: Fleet):
    fleet.workload(maxUnavailable=1)
    fleet.write(INSTANCE_TYPES[fleet.cloud][1], extra="        replace: delete-first\n")
    with Sampler(fleet) as sampled:
        done = fleet.run("apply", str(fleet.path), "--auto-approve")
    assert done.exit_code == 0, done.output
    assert min(sampled.slices) == 0  # what delete-first costs, and why it is not the default
    assert [(p.name, p.generation) for p in fleet.cloud_pools()] == [("train", 1)]
