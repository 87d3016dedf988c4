"""The sandbox's scheduler and cluster autoscaler, over the official kubernetes client and the
clouds' SDKs: pools the tool applies with `nodes: {min: 0, max: 2}` carry its node-template
hints, so a pod asking for a pool's slice scales that pool from zero and runs; a pool made
through the SDK without hints stays at zero with the autoscaler's NotTriggerScaleUp; idle nodes
go after the scale-down delay; max holds."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client, config

from provisioner.cli import main
from provisioner.compile import compile_file
from provisioner.sandbox.server import Sandbox, SandboxSettings

GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SHARED = "nvidia.com/gpu.shared"


def fleet_text(s: str) -> str:
    auto = "nodes: {min: 0, max: 2}"
    return f"""\
clusters:
  - name: azure
    cloud: aks
    subscription: 22222222-2222-2222-2222-222222222222
    resourceGroup: rg-{s}
    cluster: aks-{s}
    pools:
      - {{name: shared, instanceType: Standard_NC4as_T4_v3, gpu: {{sharing: time-slicing, replicas: 4}},
         {auto}}}
  - name: gcp
    cloud: gke
    project: project-{s}
    location: europe-west4-a
    cluster: gke-{s}
    pools:
      - {{name: shared, instanceType: g2-standard-8, gpu: {{sharing: time-slicing, replicas: 4}}, {auto}}}
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: eks-{s}
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
    pools:
      - {{name: shared, instanceType: g5.xlarge, gpu: {{sharing: time-slicing, replicas: 4}}, {auto}}}
      - {{name: mig, instanceType: p4d.24xlarge, gpu: {{mig: 1g.5gb}}, {auto}}}
  - name: ali
    cloud: ack
    region: cn-hangzhou
    clusterId: c{s * 4}
    vswitches: [vsw-bp1kube]
    pools:
      - {{name: mem, instanceType: ecs.gn6i-c4g1.xlarge, gpu: {{sharing: memory, isolation: memory}}, {auto}}}
"""


class Scaling:
    def __init__(self, directory: Path):
        self.suffix = uuid.uuid4().hex[:8]
        self.fleet = directory / "fleet.yaml"
        self.fleet.write_text(fleet_text(self.suffix), encoding="utf-8")
        targets = [c.target for c in compile_file(self.fleet).clusters]
        settings = SandboxSettings(scan_interval=0.05, scale_down_delay=0.3)
        self.sandbox = Sandbox(directory / "sandbox", settings).start(targets)
        env = {"PROVISIONER_SANDBOX": str(self.sandbox.directory), "PROVISIONER_LOCK_DIR": ""}
        result = CliRunner().invoke(main, ["apply", str(self.fleet), "--auto-approve"], env=env)
        assert result.exit_code == 0, result.output
        for engine in self.sandbox.engines.values():  # new nodes take a moment to join
            engine.op_seconds = 0.2

    def api(self, cluster: str) -> client.CoreV1Api:
        kubeconfig = str(self.sandbox.kubeconfig)
        return client.CoreV1Api(config.new_client_from_config(kubeconfig, context=cluster))

    def run(self, cluster: str, name: str, requests: dict[str, int], selector: dict[str, str]) -> None:
        container = {"name": "main", "image": "busybox", "resources": {"limits": requests}}
        spec = {"containers": [container], "nodeSelector": selector, "tolerations": [GPU_TAINT]}
        self.api(cluster).create_namespaced_pod("ml", {"metadata": {"name": name}, "spec": spec})

    def pod(self, cluster: str, name: str) -> Any:
        return self.api(cluster).read_namespaced_pod(name, "ml")

    def events(self, cluster: str, pod: str) -> dict[str, str]:
        """reason -> message of the pod's events, as kubectl describe pod lists them."""
        uid = self.pod(cluster, pod).metadata.uid
        selector = f"involvedObject.name={pod},involvedObject.namespace=ml,involvedObject.uid={uid}"
        found = self.api(cluster).list_namespaced_event("ml", field_selector=selector).items
        return {e.reason: e.message for e in found}

    def nodes(self, cluster: str, selector: str) -> list[str]:
        return sorted(n.metadata.name for n in self.api(cluster).list_node(label_selector=selector).items)

    def url(self, cloud: str) -> str:
        return self.sandbox.endpoints[cloud]


def wait_for(check: Callable[[], Any], seconds: float = 10.0) -> Any:
    """`check`'s first truthy answer, polled until a deadline (the autoscaler runs in a thread)."""
    deadline = time.monotonic() + seconds
    while True:
        answer = check()
        if answer or time.monotonic() > deadline:
            assert answer, f"not within {seconds}s"
            return answer
        time.sleep(0.05)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Scaling]:
    made = Scaling(tmp_path)
    yield made
    made.sandbox.stop()


def running_on(world: Scaling, cluster: str, pod: str) -> str | None:
    found = world.pod(cluster, pod)
    return found.spec.node_name if found.status.phase == "Running" else None


def scales_from_zero_and_back(world: Scaling, cluster: str, pod: str, group: str, pool_label: str) -> None:
    """`pod` (created) triggers its pool's scale-up, runs on the new node, and once it is deleted
    the idle node goes again."""
    node = wait_for(lambda: running_on(world, cluster, pod))
    assert world.nodes(cluster, pool_label) == [node]
    assert world.events(cluster, pod)["TriggeredScaleUp"] == (
        f"pod triggered scale-up: [{{{group} 0->1 (max: 2)}}]"
    )
    world.api(cluster).delete_namespaced_pod(pod, "ml")
    wait_for(lambda: not world.nodes(cluster, pool_label))


def group_of(message: str) -> str:
    return message.removeprefix("pod triggered scale-up: [{").split(" ", 1)[0]


def test_aks_time_slicing_scales_from_zero_with_the_pool_tags_and_not_without(world: Scaling):
    from azure.core.credentials import AccessToken
    from azure.mgmt.containerservice import ContainerServiceClient

    class Token:
        def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
            return AccessToken("sandbox", int(time.time()) + 3600)

    aks = ContainerServiceClient(
        Token(), "22222222-2222-2222-2222-222222222222", base_url=world.url("aks"), retry_total=0
    )
    bare = {
        "properties": {
            "vmSize": "Standard_NC4as_T4_v3",
            "count": 0,
            "enableAutoScaling": True,
            "minCount": 0,
            "maxCount": 2,
            "nodeLabels": {"nvidia.com/device-plugin.config": "time-sliced-4"},
        }
    }
    rg, cluster = f"rg-{world.suffix}", f"aks-{world.suffix}"
    aks.agent_pools.begin_create_or_update(
        rg, cluster, "bare", bare, enforce_https=False, polling_interval=0.05
    ).result()

    world.run("azure", "hinted", {SHARED: 1}, {"agentpool": "shared"})
    world.run("azure", "unhinted", {SHARED: 1}, {"agentpool": "bare"})
    world.run("azure", "too-big", {SHARED: 5}, {})
    pending = world.pod("azure", "too-big").status.conditions[0]
    assert (pending.type, pending.status, pending.reason) == ("PodScheduled", "False", "Unschedulable")
    assert pending.message.startswith("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.shared.")
    assert "FailedScheduling" in world.events("azure", "too-big")
    group = group_of(wait_for(lambda: world.events("azure", "hinted").get("TriggeredScaleUp")))
    assert group.startswith("aks-shared-") and group.endswith("-vmss")
    assert wait_for(lambda: world.events("azure", "unhinted").get("NotTriggerScaleUp")) == (
        "pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu.shared, "
        "1 node(s) didn't match Pod's node affinity/selector"
    )
    assert wait_for(lambda: world.events("azure", "too-big").get("NotTriggerScaleUp")) == (
        "pod didn't trigger scale-up: 2 Insufficient nvidia.com/gpu.shared"
    )
    assert world.pod("azure", "unhinted").status.phase == "Pending"
    assert world.nodes("azure", "agentpool=bare") == []
    scales_from_zero_and_back(world, "azure", "hinted", group, "agentpool=shared")
    assert aks.agent_pools.get(rg, cluster, "shared", enforce_https=False).count == 0


def test_eks_time_slicing_and_mig_scale_from_the_group_tags_and_max_holds(world: Scaling):
    import boto3

    eks = boto3.client(
        "eks",
        endpoint_url=world.url("eks"),
        region_name="us-west-2",
        aws_access_key_id="sandbox",
        aws_secret_access_key="sandbox",
    )
    eks.create_nodegroup(
        clusterName=f"eks-{world.suffix}",
        nodegroupName="bare",
        nodeRole="arn:aws:iam::123456789012:role/nodes",
        subnets=["subnet-0abc1234"],
        instanceTypes=["g5.xlarge"],
        scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 0},
        labels={"nvidia.com/device-plugin.config": "time-sliced-4"},
    )
    autoscaling = boto3.client(
        "autoscaling",
        endpoint_url=world.url("eks"),
        region_name="us-west-2",
        aws_access_key_id="sandbox",
        aws_secret_access_key="sandbox",
    )
    groups = {
        t["Value"]: g["AutoScalingGroupName"]
        for g in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
        for t in g["Tags"]
        if t["Key"] == "eks:nodegroup-name" and f"eks-{world.suffix}" in str(g["Tags"])
    }
    world.run("aws", "mig", {"nvidia.com/gpu": 1}, {"eks.amazonaws.com/nodegroup": "mig"})
    world.run("aws", "unhinted", {SHARED: 1}, {"eks.amazonaws.com/nodegroup": "bare"})
    for i in range(3):  # a whole node's slices each: two nodes at most
        world.run("aws", f"shared-{i}", {SHARED: 4}, {"eks.amazonaws.com/nodegroup": "shared"})
    shared = [wait_for(lambda i=i: running_on(world, "aws", f"shared-{i}")) for i in range(2)]
    assert len(set(shared)) == 2
    # One scan that saw both pods grows 0->2; scans between their creations grow 0->1, then 1->2.
    grown = {world.events("aws", f"shared-{i}")["TriggeredScaleUp"] for i in range(2)}
    steps = [{"0->2"}, {"0->1", "1->2"}]
    assert grown in [
        {f"pod triggered scale-up: [{{{groups['shared']} {s} (max: 2)}}]" for s in ss} for ss in steps
    ]
    assert wait_for(lambda: world.events("aws", "shared-2").get("NotTriggerScaleUp")) == (
        "pod didn't trigger scale-up: 1 max node group size reached, "
        "2 node(s) didn't match Pod's node affinity/selector"
    )
    assert world.events("aws", "unhinted")["NotTriggerScaleUp"].startswith(
        "pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu.shared"
    )
    described = eks.describe_nodegroup(clusterName=f"eks-{world.suffix}", nodegroupName="shared")
    assert described["nodegroup"]["scalingConfig"]["desiredSize"] == 2
    assert world.pod("aws", "shared-2").status.phase == "Pending"
    scales_from_zero_and_back(world, "aws", "mig", groups["mig"], "eks.amazonaws.com/nodegroup=mig")


def test_gke_time_sharing_scales_from_what_gke_knows_of_its_pool(world: Scaling):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import container_v1

    selector = {
        "cloud.google.com/gke-nodepool": "shared",
        "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing",
    }
    world.run("gcp", "shared", {"nvidia.com/gpu": 1}, selector)
    world.run("gcp", "never", {"nvidia.com/gpu": 5}, {})
    group = group_of(wait_for(lambda: world.events("gcp", "shared").get("TriggeredScaleUp")))
    assert group.startswith(f"gke-gke-{world.suffix}-shared-") and group.endswith("-grp")
    assert wait_for(lambda: world.events("gcp", "never").get("NotTriggerScaleUp")) == (
        "pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu"
    )
    gke = container_v1.ClusterManagerClient(
        transport="rest",
        client_options={"api_endpoint": world.url("gke")},
        credentials=AnonymousCredentials(),
    )
    cluster = f"projects/project-{world.suffix}/locations/europe-west4-a/clusters/gke-{world.suffix}"
    name = f"{cluster}/nodePools/shared"
    wait_for(lambda: gke.get_node_pool(name=name).initial_node_count == 1)
    scales_from_zero_and_back(world, "gcp", "shared", group, "cloud.google.com/gke-nodepool=shared")


def test_ack_memory_sharing_scales_from_the_ecs_tags(world: Scaling):
    world.run("ali", "mem", {"aliyun.com/gpu-mem": 8}, {"ack.node.gpu.schedule": "cgpu"})
    world.run("ali", "too-much", {"aliyun.com/gpu-mem": 16}, {})
    group = group_of(wait_for(lambda: world.events("ali", "mem").get("TriggeredScaleUp")))
    assert group.startswith("asg-")
    assert wait_for(lambda: world.events("ali", "too-much").get("NotTriggerScaleUp")) == (
        "pod didn't trigger scale-up: 1 Insufficient aliyun.com/gpu-mem"
    )
    scales_from_zero_and_back(world, "ali", "mem", group, "ack.node.gpu.schedule=cgpu")


def test_a_scale_up_sets_the_clouds_size_at_once_and_the_node_joins_later(world: Scaling):
    """As a real autoscaler (SetDesiredCapacity, the scale set's capacity): the cloud reports the
    new size while the instance boots, the Kubernetes API lists the node only once it joined, the
    pods meanwhile wait for it rather than ask again, and a plan stays empty (the size is the
    autoscaler's)."""
    import boto3
    from azure.core.credentials import AccessToken
    from azure.mgmt.containerservice import ContainerServiceClient

    class Token:
        def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
            return AccessToken("sandbox", int(time.time()) + 3600)

    engines = list(world.sandbox.engines.values())
    for engine in engines:  # the new instances boot until the test lets them join
        engine.op_seconds = 3600.0
    eks = boto3.client(
        "eks",
        endpoint_url=world.url("eks"),
        region_name="us-west-2",
        aws_access_key_id="sandbox",
        aws_secret_access_key="sandbox",
    )
    aks = ContainerServiceClient(
        Token(), "22222222-2222-2222-2222-222222222222", base_url=world.url("aks"), retry_total=0
    )
    pools = {"aws": "eks.amazonaws.com/nodegroup=shared", "azure": "agentpool=shared"}
    for cluster, label in pools.items():
        key, value = label.split("=")
        world.run(cluster, "first", {SHARED: 2}, {key: value})
    for cluster in pools:
        assert group_of(wait_for(lambda c=cluster: world.events(c, "first").get("TriggeredScaleUp")))
    described = eks.describe_nodegroup(clusterName=f"eks-{world.suffix}", nodegroupName="shared")
    assert described["nodegroup"]["scalingConfig"]["desiredSize"] == 1
    rg, name = f"rg-{world.suffix}", f"aks-{world.suffix}"
    assert aks.agent_pools.get(rg, name, "shared", enforce_https=False).count == 1
    for cluster, label in pools.items():
        assert world.nodes(cluster, label) == []  # still booting: not registered yet
        assert world.pod(cluster, "first").status.phase == "Pending"

    env = {"PROVISIONER_SANDBOX": str(world.sandbox.directory), "PROVISIONER_LOCK_DIR": ""}
    listed = CliRunner().invoke(main, ["pools", str(world.fleet), "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    current = {
        (c["cluster"], p["pool"]): p["current_nodes"] for c in json.loads(listed.output) for p in c["pools"]
    }
    assert (current[("aws", "shared")], current[("azure", "shared")]) == (1, 1)
    plan = CliRunner().invoke(main, ["plan", str(world.fleet), "--detailed-exitcode"], env=env)
    assert plan.exit_code == 0, plan.output

    for cluster, label in pools.items():  # the booting node has room for a second pod: it waits
        key, value = label.split("=")
        world.run(cluster, "second", {SHARED: 2}, {key: value})
        world.run(cluster, "probe", {SHARED: 5}, {})  # its answer shows a scan saw "second" too
    for cluster in pools:
        wait_for(lambda c=cluster: world.events(c, "probe").get("NotTriggerScaleUp"))
        assert set(world.events(cluster, "second")) == {"FailedScheduling"}
    described = eks.describe_nodegroup(clusterName=f"eks-{world.suffix}", nodegroupName="shared")
    assert described["nodegroup"]["scalingConfig"]["desiredSize"] == 1
    assert aks.agent_pools.get(rg, name, "shared", enforce_https=False).count == 1

    for engine in engines:
        engine.op_seconds = 0.05
    for cluster, label in pools.items():
        node = wait_for(lambda c=cluster: running_on(world, c, "first"))
        assert wait_for(lambda c=cluster: running_on(world, c, "second")) == node
        assert world.nodes(cluster, label) == [node]
        ready = world.api(cluster).read_node(node).status.conditions
        assert [(c.type, c.status) for c in ready] == [("Ready", "True")]
