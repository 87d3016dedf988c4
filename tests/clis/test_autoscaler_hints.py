"""The node-template hints apply writes, as each cloud's API holds them: the EKS node group's and
its Auto Scaling group's tags through the aws CLI, the AKS pool's and the ACK pool's ECS tags on
the wire. The keys are spelled here from cluster-autoscaler's cloud providers (cloudprovider/aws
README, cloudprovider/azure azure_template.go) and ACK's node-autoscaling FAQ, not from the
tool's data. A plan after apply is empty; a sharing change rewrites them in place."""

from __future__ import annotations

import json

import requests

from tests.clis.conftest import Served, ok

FLEET = """\
clusters:
  - name: azure
    cloud: aks
    subscription: 00000000-0000-0000-0000-000000000000
    resourceGroup: ml
    cluster: hints-aks
    pools:
      - name: t4ts
        instanceType: Standard_NC4as_T4_v3
        gpu: {sharing: time-slicing, replicas: 4}
        nodes: {min: 0, max: 2}
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: hints-eks
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
    pools:
      - name: a10g-ts
        instanceType: g5.xlarge
        gpu: {sharing: time-slicing, replicas: 4}  # a10g-ts
        nodes: {min: 0, max: 3}  # a10g-ts
      - {name: fixed, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 1}}
  - name: ali
    cloud: ack
    region: cn-hangzhou
    clusterId: c0123456789abcdef0123456789abcdef
    vswitches: [vsw-bp1a2b3c4d5e6f7g8h9i0]
    kubeContext: ali
    pools:
      - name: a10-cgpu
        instanceType: ecs.gn7i-c8g1.2xlarge
        gpu: {sharing: memory, isolation: memory}
        nodes: {min: 0, max: 2}
"""
EKS = "k8s.io/cluster-autoscaler/node-template/"
AKS = "k8s.io_cluster-autoscaler_node-template_"
ACK = "k8s.io/cluster-autoscaler/node-template/resource/"


def edit(served: Served, line: str, new: str) -> None:
    text = served.fleet.read_text()
    assert line in text
    served.fleet.write_text(text.replace(line, new))


def hints(tags: dict[str, str], prefix: str) -> dict[str, str]:
    return {key: value for key, value in tags.items() if key.startswith(prefix)}


def eks_tags(served: Served, nodegroup: str) -> tuple[dict[str, str], dict[str, str]]:
    """The node group's tags, and its Auto Scaling group's, as the aws CLI lists them."""
    group = json.loads(
        ok(
            served.aws(
                "us-west-2",
                "eks",
                "describe-nodegroup",
                "--cluster-name",
                "hints-eks",
                "--nodegroup-name",
                nodegroup,
            )
        )
    )["nodegroup"]
    asg = group["resources"]["autoScalingGroups"][0]["name"]
    listed = json.loads(
        ok(
            served.aws(
                "us-west-2",
                "autoscaling",
                "describe-tags",
                "--filters",
                f"Name=auto-scaling-group,Values={asg}",
            )
        )
    )["Tags"]
    return group["tags"], {t["Key"]: t["Value"] for t in listed}


def aks_tags(served: Served, pool: str) -> dict[str, str]:
    path = (
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml/providers/"
        f"Microsoft.ContainerService/managedClusters/hints-aks/agentPools/{pool}"
    )
    answer = requests.get(
        served.endpoints["aks"] + path,
        params={"api-version": "2024-09-01"},
        headers={"Authorization": "Bearer sandbox"},
        timeout=30,
    )
    answer.raise_for_status()
    return answer.json()["properties"].get("tags") or {}  # agentPools keep tags among the properties


def ack_tags(served: Served, pool: str) -> dict[str, str]:
    """The pool's ECS tags, through Alibaba's own SDK as a user's script would read them."""
    from alibabacloud_credentials.client import Client as Credentials
    from alibabacloud_credentials.models import Config as CredentialsConfig
    from alibabacloud_cs20151215 import models as cs
    from alibabacloud_cs20151215.client import Client
    from alibabacloud_tea_openapi import models as openapi

    keys = CredentialsConfig(type="access_key", access_key_id="sandbox", access_key_secret="sandbox")
    config = openapi.Config(
        credential=Credentials(keys),
        region_id="cn-hangzhou",
        endpoint=served.endpoints["ack"].removeprefix("http://"),
        protocol="http",
    )
    answer = Client(config).describe_cluster_node_pools(
        "c0123456789abcdef0123456789abcdef", cs.DescribeClusterNodePoolsRequest(nodepool_name=pool)
    )
    (found,) = answer.body.nodepools
    return {tag.key: tag.value for tag in found.scaling_group.tags or []}


def test_apply_writes_the_hints_each_autoscaler_reads_and_keeps_them_in_step(served: Served):
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))
    again = served.provisioner("plan", str(served.fleet), "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr  # the tool's own tags never drift

    shared = {
        f"{EKS}resources/nvidia.com/gpu.shared": "4",
        f"{EKS}resources/nvidia.com/gpu": "0",  # the time-sliced node advertises no whole GPU
        f"{EKS}label/nvidia.com/device-plugin.config": "time-sliced-4",
        f"{EKS}label/provisioner.io/pool": "a10g-ts",  # the fleet pool's label, which pods select
        f"{EKS}taint/nvidia.com/gpu": "present:NoSchedule",
    }
    nodegroup, asg = eks_tags(served, "a10g-ts")
    assert hints(nodegroup, EKS) == shared
    assert hints(asg, EKS) == shared  # EKS copies no node-group tag to its Auto Scaling group
    assert asg["eks:nodegroup-name"] == "a10g-ts"
    assert hints(eks_tags(served, "fixed")[0], EKS) == {}  # a fixed pool is never scaled up
    assert hints(aks_tags(served, "t4ts"), AKS) == {
        f"{AKS}resources_nvidia.com_gpu.shared": "4",
        f"{AKS}resources_nvidia.com_gpu": "0",
        f"{AKS}label_nvidia.com_device-plugin.config": "time-sliced-4",
        f"{AKS}label_provisioner.io_pool": "t4ts",
        f"{AKS}taint_nvidia.com_gpu": "present:NoSchedule",
    }
    assert hints(ack_tags(served, "a10-cgpu"), ACK) == {
        f"{ACK}aliyun.com/gpu-mem": "22",
        f"{ACK}nvidia.com/gpu": "0",
    }

    edit(
        served,
        "gpu: {sharing: time-slicing, replicas: 4}  # a10g-ts",
        "gpu: {sharing: time-slicing, replicas: 8}",
    )
    plan = json.loads(ok(served.provisioner("plan", str(served.fleet), "--json")))
    change = next(c for c in plan["changes"] if c["pool"] == "a10g-ts")
    assert change["action"] == "update"  # in place: tags, and the label the device plugin reads
    hinted = next(f for f in change["fields"] if f["field"] == "autoscaler_hints")
    assert hinted["after"]["resources"] == {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 8}
    assert any("kubernetes/autoscaler#8095" in note for note in plan["notes"])
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))
    nodegroup, asg = eks_tags(served, "a10g-ts")
    wanted = {
        **shared,
        f"{EKS}resources/nvidia.com/gpu.shared": "8",
        f"{EKS}label/nvidia.com/device-plugin.config": "time-sliced-8",
    }
    assert hints(nodegroup, EKS) == hints(asg, EKS) == wanted
    again = served.provisioner("plan", str(served.fleet), "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr

    # Fixed at its size, the pool needs no hints: they are taken off both resources.
    edit(served, "nodes: {min: 0, max: 3}  # a10g-ts", "nodes: {count: 1}")
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))
    nodegroup, asg = eks_tags(served, "a10g-ts")
    assert hints(nodegroup, EKS) == hints(asg, EKS) == {}
    assert nodegroup["managed-by"] == "provisioner"
