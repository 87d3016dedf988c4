"""verify on DRA pools, judged from plain dicts shaped as the Kubernetes API sends them: nodes and
resource.k8s.io/v1 ResourceSlices as NVIDIA's DRA driver publishes them (its deviceinfo.go and
mig.go attributes: type, productName, profile, uuid, parentUUID; capacity memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provisioner import hardware
from provisioner.compile import CompiledCluster, CompiledPool, compile_file
from provisioner.kube.dra import names_gpu, published
from provisioner.kube.verify import NO_DRA_API, judge_cluster
from provisioner.sandbox.kube.rules import PCIE_PRODUCTS, PRODUCTS

FLEET = """\
clusters:
  - name: aws
    cloud: eks
    region: us-east-1
    cluster: ml-eks
    nodeRole: arn:aws:iam::123456789012:role/eks-gpu-nodes
    subnets: [subnet-0abc1234]
    pools:
      - {name: mig, instanceType: p4de.24xlarge, gpu: {mig: 2g.20gb, allocation: dra}, nodes: {count: 1}}
      - {name: whole, instanceType: g5.12xlarge, gpu: {allocation: dra}, nodes: {count: 1}}
      - name: shared
        instanceType: g5.12xlarge
        gpu: {sharing: time-slicing, replicas: 4, allocation: dra, draFeatureGates: [TimeSlicingSettings]}
        nodes: {count: 1}
      - {name: plugin, instanceType: g5.xlarge, nodes: {count: 1}}
"""
DRIVER = "gpu.nvidia.com"
POOL_LABEL = "eks.amazonaws.com/nodegroup"
OFF = "nvidia.com/gpu.deploy.device-plugin"


@pytest.fixture
def cluster(tmp_path: Path) -> CompiledCluster:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    [compiled] = compile_file(fleet).clusters
    return compiled


def _pool(cluster: CompiledCluster, name: str) -> CompiledPool:
    return next(p for p in cluster.pools if p.pool.name == name)


def node_of(pool: CompiledPool, name: str, allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    """A node as the pool's cloud and the GPU Operator leave it: the pool's labels, MIG done."""
    labels = {POOL_LABEL: pool.pool.name, **pool.setup.labels, "nvidia.com/mig.config.state": "success"}
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.setup.taints]
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {"allocatable": {"cpu": "48", **(allocatable or {})}},
    }


def gpu_device(index: int, product: str) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": product},
            "uuid": {"string": f"GPU-{index:08d}"},
            "architecture": {"string": "Ampere"},
        },
        "capacity": {"memory": {"value": "24Gi"}},
    }


def mig_device(gpu: int, index: int, profile: str, product: str) -> dict[str, Any]:
    return {
        "name": f"gpu-{gpu}-mig-{index}",
        "attributes": {
            "type": {"string": "mig"},
            "profile": {"string": profile},
            "productName": {"string": product},
            "parentUUID": {"string": f"GPU-{gpu:08d}"},
            "uuid": {"string": f"MIG-{gpu:04d}{index:04d}"},
        },
        "capacity": {"memory": {"value": "20Gi"}},
    }


def slice_for(node: str, devices: list[dict[str, Any]], generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-{generation}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def whole(count: int, product: str = "NVIDIA A10G") -> list[dict[str, Any]]:
    return [gpu_device(i, product) for i in range(count)]


def migs(gpus: int, per_gpu: int, profile: str = "2g.20gb", product: str = "NVIDIA A100-SXM4-80GB") -> list:
    return [mig_device(g, i, profile, product) for g in range(gpus) for i in range(per_gpu)]


def right_world(cluster: CompiledCluster) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every pool's node as a working DRA set-up leaves it, and the slices the driver publishes."""
    nodes = [
        node_of(_pool(cluster, "mig"), "n-mig"),
        node_of(_pool(cluster, "whole"), "n-whole"),
        node_of(_pool(cluster, "shared"), "n-shared"),
        node_of(_pool(cluster, "plugin"), "n-plugin", {"nvidia.com/gpu": "1"}),
    ]
    slices = [slice_for("n-mig", migs(8, 3)), slice_for("n-whole", whole(4)), slice_for("n-shared", whole(4))]
    return nodes, slices


def judged(cluster: CompiledCluster, nodes: list, slices: list | None) -> dict[str, tuple[str, list]]:
    verdicts = judge_cluster(cluster, nodes, {"data": {}}, None, slices)
    return {v.pool: (v.status, [(p.node, p.message) for p in v.problems]) for v in verdicts}


def test_right_nodes_are_ok(cluster: CompiledCluster):
    nodes, slices = right_world(cluster)
    assert judged(cluster, nodes, slices) == {
        name: ("ok", []) for name in ("mig", "whole", "shared", "plugin")
    }
    allocations = {
        v.pool: v.json()["allocation_mode"] for v in judge_cluster(cluster, nodes, None, None, slices)
    }
    assert allocations == {"mig": "dra", "whole": "dra", "shared": "dra", "plugin": "device-plugin"}


def test_no_slice_for_a_node_names_the_driver_and_its_node_selector(cluster: CompiledCluster):
    nodes, slices = right_world(cluster)
    slices = [s for s in slices if s["spec"]["nodeName"] != "n-whole"]
    assert judged(cluster, nodes, slices)["whole"] == (
        "degraded",
        [
            (
                "n-whole",
                "the DRA driver gpu.nvidia.com publishes no devices for node n-whole, expected 4 GPU "
                "devices (gpu.nvidia.com): its kubelet plugin runs only on the nodes its Helm values "
                f"select (kubeletPlugin.nodeSelector {OFF}=false, as `provisioner render` prints them)",
            )
        ],
    )


def test_a_wrong_count_is_caught(cluster: CompiledCluster):
    nodes, slices = right_world(cluster)
    slices[1] = slice_for("n-whole", whole(3))
    assert judged(cluster, nodes, slices)["whole"][1] == [
        (
            "n-whole",
            "the DRA driver gpu.nvidia.com publishes 3 GPU devices for node n-whole, expected 4 GPU devices",
        )
    ]


def test_a_wrong_profile_or_whole_gpus_on_a_mig_pool_are_caught(cluster: CompiledCluster):
    nodes, slices = right_world(cluster)
    slices[0] = slice_for("n-mig", migs(8, 7, profile="1g.10gb"))
    assert judged(cluster, nodes, slices)["mig"][1] == [
        (
            "n-mig",
            "the DRA driver gpu.nvidia.com publishes 56 MIG 1g.10gb devices for node n-mig, "
            "expected 24 MIG 2g.20gb devices",
        )
    ]
    # MIG never finished: the driver found whole GPUs when it started (the MIG manager's label says why)
    nodes[0]["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"
    slices[0] = slice_for("n-mig", whole(8, "NVIDIA A100-SXM4-80GB"))
    assert judged(cluster, nodes, slices)["mig"][1] == [
        (
            "n-mig",
            "the DRA driver gpu.nvidia.com publishes 8 GPU devices for node n-mig, expected 24 MIG 2g.20gb "
            "devices; MIG is not in place: nvidia.com/mig.config.state is failed, expected success",
        )
    ]


def test_a_wrong_model_is_caught(cluster: CompiledCluster):
    nodes, slices = right_world(cluster)
    slices[2] = slice_for("n-shared", whole(4, "NVIDIA L4"))
    assert judged(cluster, nodes, slices)["shared"][1] == [
        (
            "n-shared",
            "the DRA driver publishes NVIDIA L4 devices for node n-shared, expected the pool's A10G 24GB",
        )
    ]


def test_a_device_plugin_still_on_is_caught_with_the_label_that_should_be_there(cluster: CompiledCluster):
    nodes, slices = right_world(cluster)
    del nodes[1]["metadata"]["labels"][OFF]  # kubectl label node n-whole nvidia.com/gpu.deploy.device-plugin-
    nodes[1]["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    assert judged(cluster, nodes, slices)["whole"][1] == [
        (
            "n-whole",
            "node n-whole of a DRA pool also advertises nvidia.com/gpu: 4 through a device plugin: the "
            "device plugin and the DRA driver both manage its GPUs, so one GPU can go to two pods (EKS "
            f"warns of silent oversubscription); the label {OFF}=false keeps the device plugin off; "
            f"label {OFF}=false is missing",
        )
    ]
    # the driver gone from the node too: the device plugin has its GPUs instead
    without = [s for s in slices if s["spec"]["nodeName"] != "n-whole"]
    assert judged(cluster, nodes, without)["whole"][1][1] == (
        "n-whole",
        "node n-whole of a DRA pool advertises nvidia.com/gpu: 4 through a device plugin instead of the "
        f"DRA driver; the label {OFF}=false keeps the device plugin off",
    )
    # any GPU extended resource counts: the shared one as much as the whole
    nodes[1]["status"]["allocatable"] = {"nvidia.com/gpu.shared": "40"}
    nodes[1]["metadata"]["labels"][OFF] = "false"
    assert "also advertises nvidia.com/gpu.shared: 40" in judged(cluster, nodes, slices)["whole"][1][0][1]


def test_a_device_plugin_pools_node_with_dra_slices_is_caught(cluster: CompiledCluster):
    nodes, slices = right_world(cluster)
    slices.append(slice_for("n-plugin", whole(1)))
    assert judged(cluster, nodes, slices)["plugin"] == (
        "degraded",
        [
            (
                "n-plugin",
                "the DRA driver gpu.nvidia.com publishes 1 GPU device for node n-plugin of a device-plugin "
                "pool: the device plugin and the DRA driver both manage its GPUs, so one GPU can go to two "
                "pods; the driver's kubelet plugin belongs on DRA pools' nodes only (its nodeSelector in "
                "the values `provisioner render` prints)",
            )
        ],
    )


def test_no_resource_api_is_said_once_per_dra_pool(cluster: CompiledCluster):
    nodes, _ = right_world(cluster)
    found = judged(cluster, nodes, None)
    assert found["whole"] == ("degraded", [(None, NO_DRA_API)])
    assert found["mig"] == ("degraded", [(None, NO_DRA_API)])
    assert found["plugin"] == ("ok", [])
    assert "Kubernetes before 1.34, or DRA turned off" in NO_DRA_API


def test_only_the_newest_generation_and_the_nvidia_driver_count():
    old = slice_for("n", whole(2), generation=1)
    new = slice_for("n", whole(4), generation=2)
    other = slice_for("n", whole(3))
    other["spec"]["driver"] = "example.com/other"
    network = slice_for("n", whole(5), generation=2)
    del network["spec"]["nodeName"]
    network["spec"]["allNodes"] = True
    assert [d.name for d in published([old, new, other, network], DRIVER)["n"]] == [
        f"gpu-{i}" for i in range(4)
    ]


def _gpus_of_each_cloud() -> list[tuple[str, str, str]]:
    """(cloud, instance type, GPU key) for one instance type of each GPU each cloud offers."""
    seen, rows = set(), []
    for cloud, types in sorted(hardware.load().instance_types.items()):
        for name, machine in sorted(types.items()):
            if (cloud, machine.gpu.key) not in seen:
                seen.add((cloud, machine.gpu.key))
                rows.append((cloud, name, machine.gpu.key))
    return rows


@pytest.mark.parametrize(("cloud", "instance_type", "gpu"), _gpus_of_each_cloud())
def test_each_clouds_gpu_is_named_by_its_product_and_no_other_family(
    cloud: str, instance_type: str, gpu: str
):
    """NVML's product name (the sandbox's, as GPU feature discovery hyphenates it, and with NVML's
    own spaces) names the instance type's GPU, and no GPU of another model."""
    gpus = hardware.load().gpus
    product = PCIE_PRODUCTS.get(instance_type, PRODUCTS[gpu])
    spaced = product.replace("-", " ", 1)  # "NVIDIA A100-SXM4-80GB", as nvidia-smi -L prints it
    for name in (product, spaced):
        assert names_gpu(name, gpus[gpu]), (cloud, name)
    family = gpus[gpu].name.split()[0]
    others = [g for g in gpus.values() if g.name.split()[0] != family]
    assert [g.key for g in others if names_gpu(product, g)] == []
