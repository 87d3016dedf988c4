"""Labels a live node's GPU stack acts on, changed through `provisioner apply`: node by node, each
cordoned, drained of its GPU pods, relabelled and waited for (the MIG manager's success, or the
device plugin's new count) before the next; a node that fails stops the rollout (sandbox, over
the wire)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client, config

from provisioner.cli import main
from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from provisioner.nvidia import DEVICE_PLUGIN_LABEL, MIG_CONFIG_LABEL
from provisioner.pools import POOL_NODE_LABEL
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.kube.workloads import wait_for

CLUSTER = {
    "eks": "    region: us-west-2\n    cluster: eks-{s}\n    nodeRole: arn:aws:iam::123456789012:role/nodes\n"
    "    subnets: [subnet-0abc1234]",
    "aks": "    subscription: 22222222-2222-2222-2222-222222222222\n    resourceGroup: rg-{s}\n"
    "    cluster: aks-{s}",
}
POOL = {
    "eks": "instanceType: p4d.24xlarge, gpu: {{mig: {value}}}",
    "aks": "instanceType: Standard_NC4as_T4_v3, gpu: {{sharing: time-slicing, replicas: {value}}}",
}
FLEET = """\
clusters:
  - name: one
    cloud: {cloud}
{where}
    pools:
      - {{name: infer, {pool}, nodes: {{count: 2}}}}
"""


class World:
    def __init__(self, tmp_path: Path, cloud: str):
        self.cloud, self.suffix, self.path = cloud, uuid.uuid4().hex[:8], tmp_path / "fleet.yaml"
        self.write("1g.5gb" if cloud == "eks" else 4)
        target = compile_file(self.path).clusters[0].target
        self.ref = target.ref
        self.sandbox = Sandbox(
            tmp_path / "sandbox", SandboxSettings(op_seconds=0.2, scan_interval=0.1)
        ).start([target])
        self.core = client.CoreV1Api(
            config.new_client_from_config(str(self.sandbox.kubeconfig), context="one")
        )

    def write(self, value: object) -> None:
        pool = POOL[self.cloud].format(value=value)
        where = CLUSTER[self.cloud].format(s=self.suffix)
        self.path.write_text(FLEET.format(cloud=self.cloud, where=where, pool=pool), encoding="utf-8")

    def run(self, *args: str) -> Any:
        env = {
            "PROVISIONER_SANDBOX": str(self.sandbox.directory),
            "PROVISIONER_LOCK_DIR": "",
            "PROVISIONER_CATALOG": "",
        }
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    def nodes(self) -> list[dict[str, Any]]:
        raw = self.core.list_node(label_selector=f"{POOL_NODE_LABEL}=infer", _preload_content=False)
        return sorted(json.loads(raw.data)["items"], key=lambda n: n["metadata"]["name"])

    def serving(self) -> set[str]:
        """A Deployment holding a GPU slice on each node, once the nodes advertise them; its pods' names."""
        resource = compile_file(self.path).clusters[0].pools[0].setup.resource  # as place asks for it

        def advertised() -> bool:
            return all(int(n["status"].get("allocatable", {}).get(resource, 0)) > 0 for n in self.nodes())

        assert wait_for(advertised, seconds=20), f"the nodes never advertised {resource}"
        container = {"name": "m", "image": "busybox:1.36", "resources": {"limits": {resource: 1}}}
        spec = {"containers": [container], "tolerations": [{"operator": "Exists"}]}
        selector = {"matchLabels": {"app": "serve"}}
        template = {"metadata": {"labels": {"app": "serve"}}, "spec": spec}
        body = {
            "metadata": {"name": "serve"},
            "spec": {"replicas": 2, "selector": selector, "template": template},
        }
        client.AppsV1Api(self.core.api_client).create_namespaced_deployment("ml", body)
        assert wait_for(lambda: len(self.serving_pods()) == 2, seconds=20)
        return self.serving_pods()

    def serving_pods(self) -> set[str]:
        raw = self.core.list_namespaced_pod("ml", label_selector="app=serve", _preload_content=False)
        pods = json.loads(raw.data)["items"]
        return {p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"}


@pytest.fixture(params=sorted(CLUSTER))
def world(request: pytest.FixtureRequest, tmp_path: Path):
    made = World(tmp_path, request.param)
    try:
        assert made.run("apply", str(made.path), "--auto-approve").exit_code == 0
        yield made
    finally:
        made.sandbox.stop()


def _label(world: World) -> str:
    return MIG_CONFIG_LABEL if world.cloud == "eks" else DEVICE_PLUGIN_LABEL


def test_a_label_change_on_live_nodes_goes_one_node_at_a_time_and_drains_its_gpu_pods(world: World):
    before = [n["metadata"]["labels"][_label(world)] for n in world.nodes()]
    before_pods = world.serving()
    world.write("3g.20gb" if world.cloud == "eks" else 8)
    shown = world.run("plan", str(world.path)).stdout
    assert "~ reconfigure (node by node, drains GPU pods)" in shown
    seen: list[tuple[int, tuple[str, ...]]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            nodes = world.nodes()
            cordoned = sum(bool(n["spec"].get("unschedulable")) for n in nodes)
            seen.append((cordoned, tuple(n["metadata"]["labels"][_label(world)] for n in nodes)))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        done = world.run("apply", str(world.path), "--auto-approve")
    finally:
        stop.set()
        sampler.join()
    assert done.exit_code == 0, done.output
    assert max(c for c, _ in seen) <= 1, "never more than one node cordoned at once"
    after = [n["metadata"]["labels"][_label(world)] for n in world.nodes()]
    assert after[0] != before[0] and after[0] == after[1]
    # Each node is done and uncordoned before the next is touched, as apply reports it.
    first, second = (n["metadata"]["name"] for n in world.nodes())
    lines = done.output.splitlines()
    told = [
        next(i for i, line in enumerate(lines) if f"node {name} {what}" in line)
        for name in (first, second)
        for what in ("cordoned", "labelled", "done")
    ]
    assert told == sorted(told), done.output
    assert not any(n["spec"].get("unschedulable") for n in world.nodes())
    assert wait_for(lambda: len(world.serving_pods()) == 2, seconds=20)
    assert not world.serving_pods() & before_pods, (
        "the GPU pods were evicted before their node's GPUs changed"
    )
    assert world.run("plan", str(world.path), "--detailed-exitcode").exit_code == 0


@pytest.mark.parametrize("world", ["eks"], indirect=True)  # MIG by label; AKS partitions at creation
def test_a_node_whose_mig_manager_fails_stops_the_rollout_and_the_pool_keeps_its_labels(world: World):
    first, second = (n["metadata"]["name"] for n in world.nodes())
    world.sandbox.kube.cluster("one").fail_mig(first)
    world.write("3g.20gb")
    done = world.run("apply", str(world.path), "--auto-approve")
    assert done.exit_code == 1
    assert (
        first in done.output
        and "failed" in done.output
        and "labels at the cloud are unchanged" in done.output
    )
    untouched = {n["metadata"]["name"]: n["metadata"]["labels"][MIG_CONFIG_LABEL] for n in world.nodes()}
    assert untouched[second] == "all-1g.5gb"  # the rollout stopped before its turn
    (pool,) = [p for p in connect("eks", world.sandbox.directory).list_pools(world.ref) if p.owned]
    assert pool.label_map[MIG_CONFIG_LABEL] == "all-1g.5gb"
