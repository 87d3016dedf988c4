"""The sandbox's Kubernetes API, through the official `kubernetes` client unchanged: a context per
fleet cluster, nodes that follow the pools the cloud drivers create and scale, what each node
advertises as the GPU stack would (so a missing ConfigMap key shows as sharing off), pods bound
to nodes, ConfigMaps by server-side apply, and errors as Status objects."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from provisioner.clusters import ClusterRef, Target
from provisioner.drivers.registry import connect
from provisioner.pools import NativeSharing, PoolState, Scaling, Taint
from provisioner.sandbox.server import Sandbox, SandboxSettings

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
NS, CM = "gpu-operator", "nvidia-device-plugin-configs"


def config_text(replicas: int, section: str = "timeSlicing") -> str:
    """A device-plugin config as `provisioner render` writes one."""
    return (
        "version: v1\nflags:\n  migStrategy: single\nsharing:\n"
        f"  {section}:\n    renameByDefault: true\n    failRequestsGreaterThanOne: true\n"
        f"    resources:\n    - name: nvidia.com/gpu\n      replicas: {replicas}\n"
    )


def pool(
    name: str,
    instance_type: str,
    gpus: int,
    count: int,
    labels: dict[str, str] | None = None,
    *,
    taints: tuple[Taint, ...] = (),
    mig: str | None = None,
    sharing: NativeSharing | None = None,
    spot: bool = False,
) -> PoolState:
    return PoolState(
        name=name,
        instance_type=instance_type,
        gpus_per_node=gpus,
        mig_setting=mig,
        sharing=sharing,
        spot=spot,
        disk_size_gb=None,
        scaling=Scaling.fixed(count),
        labels=tuple((labels or {}).items()),
        taints=taints,
    )


class World:
    """A sandbox with one cluster per cloud, their pools made through the cloud drivers."""

    def __init__(self, directory: Path):
        suffix = uuid.uuid4().hex[:6]
        self.refs = {
            "aks": ClusterRef("aks", "22222222-2222-2222-2222-222222222222", "kube", f"aks-{suffix}"),
            "gke": ClusterRef("gke", "kube-project", "us-central1-a", f"gke-{suffix}"),
            "eks": ClusterRef(
                "eks",
                "123456789012",
                "us-west-2",
                f"eks-{suffix}",
                {"node_role": "arn:aws:iam::123456789012:role/nodes", "subnets": ("subnet-0abc1234",)},
            ),
            "ack": ClusterRef("ack", "", "cn-hangzhou", f"c{suffix}", {"vswitches": ("vsw-bp1kube",)}),
        }
        self.names = {cloud: f"{cloud}-fleet-{suffix}" for cloud in self.refs}
        targets = [Target(self.names[cloud], ref) for cloud, ref in self.refs.items()]
        self.sandbox = Sandbox(directory, SandboxSettings(seed=5)).start(targets)

    def driver(self, cloud: str) -> Any:
        return connect(cloud, self.sandbox.directory)

    def create(self, cloud: str, state: PoolState) -> PoolState:
        return self.driver(cloud).create_pool(self.refs[cloud], state)

    def api(self, cloud: str) -> client.CoreV1Api:
        context = self.names[cloud]
        return client.CoreV1Api(config.new_client_from_config(str(self.sandbox.kubeconfig), context=context))

    def nodes(self, cloud: str, selector: str) -> dict[str, client.V1Node]:
        return {n.metadata.name: n for n in self.api(cloud).list_node(label_selector=selector).items}

    def apply_configs(self, cloud: str, configs: dict[str, str], manager: str = "provisioner") -> Any:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CM, "namespace": NS},
            "data": configs,
        }
        return self.api(cloud).patch_namespaced_config_map(
            CM, NS, body, field_manager=manager, force=True, _content_type="application/apply-patch+yaml"
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path / "sandbox")
    yield made
    made.sandbox.stop()


def gpu_resources(node: client.V1Node) -> dict[str, str]:
    return {k: v for k, v in node.status.allocatable.items() if k != "pods"}


def status_of(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


# Reaching the clusters


def test_the_kubeconfig_has_one_context_per_fleet_cluster_each_at_its_own_prefix(world: World):
    contexts, current = config.list_kube_config_contexts(config_file=str(world.sandbox.kubeconfig))
    assert [c["name"] for c in contexts] == list(world.names.values())
    assert current["name"] == world.names["aks"]
    endpoints = json.loads((world.sandbox.directory / "endpoints.json").read_text())
    served = config.new_client_from_config(str(world.sandbox.kubeconfig), context=world.names["gke"])
    assert served.configuration.host == f"{endpoints['kube']}/clusters/{world.names['gke']}"
    version = client.VersionApi(served).get_code()
    assert (version.major, version.minor, version.git_version) == ("1", "35", "v1.35.1")  # GKE 1.35: its .1


def test_a_wrong_token_is_refused_with_a_status(world: World):
    served = world.api("aks").api_client.configuration
    guessed = client.Configuration(host=served.host, api_key={"authorization": "Bearer guessed"})
    guessed.ssl_ca_cert = served.ssl_ca_cert  # the sandbox CA the kubeconfig names
    api = client.CoreV1Api(client.ApiClient(guessed))
    with pytest.raises(ApiException) as refused:
        api.list_node()
    assert refused.value.status == 401
    assert status_of(refused.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_the_sandbox_stopping_removes_its_kubeconfig(tmp_path: Path):
    sandbox = Sandbox(tmp_path, SandboxSettings()).start([])
    assert sandbox.kubeconfig.exists()
    sandbox.stop()
    assert not sandbox.kubeconfig.exists()


# Nodes follow the pools


def test_aks_nodes_are_named_labelled_and_tainted_as_aks_does_and_follow_scaling(world: World):
    world.create(
        "aks", pool("t4", "Standard_NC4as_T4_v3", 1, 2, {"team": "ml"}, taints=(GPU_TAINT,), spot=True)
    )
    nodes = world.nodes("aks", "kubernetes.azure.com/agentpool=t4")
    assert len(nodes) == 2
    first = sorted(nodes)[0]
    prefix = first.removesuffix("vmss000000")
    assert prefix.startswith("aks-t4-") and sorted(nodes) == [f"{prefix}vmss000000", f"{prefix}vmss000001"]
    labels = nodes[first].metadata.labels
    assert {k: labels[k] for k in ("kubernetes.azure.com/agentpool", "agentpool", "team")} == {
        "kubernetes.azure.com/agentpool": "t4",
        "agentpool": "t4",
        "team": "ml",
    }
    assert labels["kubernetes.azure.com/scalesetpriority"] == "spot"
    assert labels["node.kubernetes.io/instance-type"] == "Standard_NC4as_T4_v3"
    assert sorted((t.key, t.value, t.effect) for t in nodes[first].spec.taints) == [
        ("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule"),
        ("nvidia.com/gpu", "present", "NoSchedule"),
    ]

    world.driver("aks").update_pool(
        world.refs["aks"],
        pool("t4", "Standard_NC4as_T4_v3", 1, 3, {"team": "ml"}, taints=(GPU_TAINT,), spot=True),
    )
    assert len(world.nodes("aks", "agentpool=t4")) == 3
    world.driver("aks").update_pool(
        world.refs["aks"],
        pool("t4", "Standard_NC4as_T4_v3", 1, 1, {"team": "ml"}, taints=(GPU_TAINT,), spot=True),
    )
    assert sorted(world.nodes("aks", "agentpool=t4")) == [first]


def test_gke_nodes_carry_gke_s_accelerator_labels_and_gpu_taint(world: World):
    world.create(
        "gke",
        pool("l4-ts", "g2-standard-8", 1, 2, {"team": "ml"}, sharing=NativeSharing("TIME_SHARING", 4)),
    )
    nodes = world.nodes("gke", "cloud.google.com/gke-nodepool=l4-ts")
    assert len(nodes) == 2 and all(n.startswith(f"gke-{world.refs['gke'].name}-l4-ts-") for n in nodes)
    node = next(iter(nodes.values()))
    gke_labels = {k: v for k, v in node.metadata.labels.items() if k.startswith("cloud.google.com/")}
    assert gke_labels == {
        "cloud.google.com/gke-nodepool": "l4-ts",
        "cloud.google.com/gke-accelerator": "nvidia-l4",
        "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing",
        "cloud.google.com/gke-max-shared-clients-per-gpu": "4",
    }
    assert node.metadata.labels["topology.kubernetes.io/zone"] == "us-central1-a"
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [
        ("nvidia.com/gpu", "present", "NoSchedule")
    ]
    assert gpu_resources(node) == {"nvidia.com/gpu": "4"}  # GKE shares itself: no ConfigMap involved

    world.driver("gke").update_pool(
        world.refs["gke"],
        pool("l4-ts", "g2-standard-8", 1, 3, {"team": "ml"}, sharing=NativeSharing("TIME_SHARING", 4)),
    )
    assert len(world.nodes("gke", "cloud.google.com/gke-nodepool=l4-ts")) == 3


def test_a_regional_gke_pool_spreads_its_count_over_the_clusters_three_zones(tmp_path: Path):
    ref = ClusterRef("gke", "kube-project", "europe-west4", f"regional-{uuid.uuid4().hex[:6]}")
    sandbox = Sandbox(tmp_path, SandboxSettings()).start([Target("regional", ref)])
    try:
        # 3 nodes in all (the fleet's count is the pool's): one in each zone, as GKE's per-zone count
        connect("gke", tmp_path).create_pool(ref, pool("a100", "a2-highgpu-1g", 1, 3, mig="1g.5gb"))
        api = client.CoreV1Api(config.new_client_from_config(str(sandbox.kubeconfig), context="regional"))
        nodes = api.list_node(label_selector="cloud.google.com/gke-nodepool=a100").items
        assert sorted(n.metadata.labels["topology.kubernetes.io/zone"] for n in nodes) == [
            "europe-west4-a",
            "europe-west4-b",
            "europe-west4-c",
        ]
        assert {n.metadata.labels["cloud.google.com/gke-gpu-partition-size"] for n in nodes} == {"1g.5gb"}
        assert [gpu_resources(n) for n in nodes] == [{"nvidia.com/gpu": "7"}] * 3  # 7 x 1g.5gb per A100
    finally:
        sandbox.stop()


def test_eks_nodes_are_named_by_ip_and_labelled_with_their_node_group(world: World):
    world.create("eks", pool("g5", "g5.xlarge", 1, 2, {"team": "ml"}, taints=(GPU_TAINT,)))
    nodes = world.nodes("eks", "eks.amazonaws.com/nodegroup=g5")
    assert sorted(nodes) == [
        "ip-10-0-1-10.us-west-2.compute.internal",  # g5 sorts before system: the first subnet
        "ip-10-0-1-11.us-west-2.compute.internal",
    ]
    labels = next(iter(nodes.values())).metadata.labels
    assert (labels["eks.amazonaws.com/capacityType"], labels["team"]) == ("ON_DEMAND", "ml")
    assert [(t.key, t.value, t.effect) for t in next(iter(nodes.values())).spec.taints] == [
        ("nvidia.com/gpu", "present", "NoSchedule")
    ]
    world.driver("eks").update_pool(
        world.refs["eks"], pool("g5", "g5.xlarge", 1, 4, {"team": "ml"}, taints=(GPU_TAINT,))
    )
    assert len(world.nodes("eks", "eks.amazonaws.com/nodegroup=g5")) == 4


def test_ack_nodes_carry_their_node_pool_id(world: World):
    created = world.create(
        "ack", pool("t4-cgpu", "ecs.gn6i-c4g1.xlarge", 1, 2, {"ack.node.gpu.schedule": "cgpu"})
    )
    nodes = world.nodes("ack", f"alibabacloud.com/nodepool-id={created.cloud_id}")
    assert sorted(nodes) == ["cn-hangzhou.10.0.2.10", "cn-hangzhou.10.0.2.11"]


# What nodes advertise: the device plugin on AKS and EKS


def test_a_label_naming_a_key_the_config_map_lacks_leaves_sharing_off_until_the_key_is_applied(world: World):
    world.create(
        "aks", pool("ts", "Standard_NC4as_T4_v3", 1, 2, {"nvidia.com/device-plugin.config": "time-sliced-10"})
    )
    nodes = world.nodes("aks", "agentpool=ts")
    assert [gpu_resources(n) for n in nodes.values()] == [{"nvidia.com/gpu": "1"}] * 2  # no ConfigMap at all

    world.apply_configs("aks", {"default": "version: v1\n", "time-sliced-4": config_text(4)})
    node = next(iter(world.nodes("aks", "agentpool=ts").values()))
    assert gpu_resources(node) == {"nvidia.com/gpu": "1"}  # the ConfigMap lacks the key the label names
    assert node.metadata.labels["nvidia.com/gpu.replicas"] == "1"

    world.apply_configs("aks", {"default": "version: v1\n", "time-sliced-10": config_text(10)})
    node = next(iter(world.nodes("aks", "agentpool=ts").values()))
    assert gpu_resources(node) == {"nvidia.com/gpu.shared": "10"}
    assert {k: node.metadata.labels[k] for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.replicas")} == {
        "nvidia.com/gpu.product": "Tesla-T4-SHARED",
        "nvidia.com/gpu.replicas": "10",
    }


def test_a_label_changed_with_kubectl_is_followed_on_that_node_only(world: World):
    world.create("eks", pool("g5", "g5.xlarge", 1, 2, {"nvidia.com/device-plugin.config": "time-sliced-4"}))
    world.apply_configs("eks", {"time-sliced-4": config_text(4), "mps-2": config_text(2, "mps")})
    names = sorted(world.nodes("eks", "eks.amazonaws.com/nodegroup=g5"))
    api = world.api("eks")

    api.patch_node(names[0], {"metadata": {"labels": {"nvidia.com/device-plugin.config": "time-sliced-8"}}})
    nodes = world.nodes("eks", "eks.amazonaws.com/nodegroup=g5")
    assert [gpu_resources(nodes[n]) for n in names] == [
        {"nvidia.com/gpu": "1"},
        {"nvidia.com/gpu.shared": "4"},
    ]
    assert nodes[names[0]].metadata.labels["nvidia.com/device-plugin.config"] == "time-sliced-8"

    api.patch_node(names[0], {"metadata": {"labels": {"nvidia.com/device-plugin.config": "mps-2"}}})
    node = api.read_node(names[0])
    assert gpu_resources(node) == {"nvidia.com/gpu.shared": "2"}
    assert node.metadata.labels["nvidia.com/gpu.sharing-strategy"] == "mps"

    api.patch_node(names[0], {"metadata": {"labels": {"nvidia.com/device-plugin.config": None}}})
    assert gpu_resources(api.read_node(names[0])) == {
        "nvidia.com/gpu": "1"
    }  # no label: the key "default", absent


def test_a_label_changed_by_the_cloud_wins_over_an_earlier_kubectl_edit(world: World):
    labels = {"nvidia.com/device-plugin.config": "time-sliced-4"}
    world.create("eks", pool("g5", "g5.xlarge", 1, 1, labels))
    world.apply_configs("eks", {"time-sliced-4": config_text(4), "time-sliced-6": config_text(6)})
    (name,) = world.nodes("eks", "eks.amazonaws.com/nodegroup=g5")
    world.api("eks").patch_node(
        name, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "time-sliced-9"}}}
    )
    world.driver("eks").update_pool(
        world.refs["eks"], pool("g5", "g5.xlarge", 1, 1, {"nvidia.com/device-plugin.config": "time-sliced-6"})
    )
    node = world.api("eks").read_node(name)
    assert node.metadata.labels["nvidia.com/device-plugin.config"] == "time-sliced-6"
    assert gpu_resources(node) == {"nvidia.com/gpu.shared": "6"}


def test_eks_mig_label_is_applied_by_the_mig_manager_or_fails(world: World):
    world.create("eks", pool("p4d", "p4d.24xlarge", 8, 1, {"nvidia.com/mig.config": "all-1g.5gb"}))
    (name,) = world.nodes("eks", "eks.amazonaws.com/nodegroup=p4d")
    api = world.api("eks")
    node = api.read_node(name)
    assert {
        k: v
        for k, v in node.metadata.labels.items()
        if k.startswith("nvidia.com/") and k != "nvidia.com/mig.config"
    } == {
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/gpu.present": "true",  # the GPU Operator's own labels
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.count": "56",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
    }
    assert gpu_resources(node) == {"nvidia.com/gpu": "56"}  # 8 A100s x 7 instances, strategy single

    api.patch_node(name, {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb-typo"}}})
    node = api.read_node(name)
    assert node.metadata.labels["nvidia.com/mig.config.state"] == "failed"
    # A config it cannot validate is refused before anything changes: the 1g.5gb layout stays.
    assert gpu_resources(node) == {"nvidia.com/gpu": "56"}

    api.patch_node(name, {"metadata": {"labels": {"nvidia.com/mig.config": "all-3g.20gb"}}})
    world.sandbox.kube.cluster(world.names["eks"]).fail_mig(name)  # the MIG manager gets stuck
    node = api.read_node(name)
    assert (node.metadata.labels["nvidia.com/mig.config.state"], gpu_resources(node)) == (
        "failed",
        {"nvidia.com/gpu": "8"},
    )


def test_aks_mig_comes_from_the_pool_and_sharing_multiplies_its_instances(world: World):
    labels = {"nvidia.com/device-plugin.config": "time-sliced-2"}
    world.create("aks", pool("a100", "Standard_NC24ads_A100_v4", 1, 1, labels, mig="MIG1g"))
    (node,) = world.nodes("aks", "agentpool=a100").values()
    assert gpu_resources(node) == {"nvidia.com/gpu": "7"}  # MIG1g: 7 x 1g.10gb; the key is missing
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-80GB-PCIe-MIG-1g.10gb"
    assert "nvidia.com/mig.config.state" not in node.metadata.labels  # no MIG manager on AKS
    world.apply_configs("aks", {"time-sliced-2": config_text(2)})
    (node,) = world.nodes("aks", "agentpool=a100").values()
    assert gpu_resources(node) == {"nvidia.com/gpu.shared": "14"}
    world.apply_configs("aks", {"time-sliced-2": config_text(2, "mps")})
    (node,) = world.nodes("aks", "agentpool=a100").values()
    assert gpu_resources(node) == {}  # the device plugin refuses MPS on MIG devices and does not start


def test_gke_ignores_kubectl_labels_its_own_sharing_comes_from_the_pool(world: World):
    world.create("gke", pool("l4", "g2-standard-24", 2, 1, sharing=NativeSharing("MPS", 3)))
    (name,) = world.nodes("gke", "cloud.google.com/gke-nodepool=l4")
    api = world.api("gke")
    assert gpu_resources(api.read_node(name)) == {"nvidia.com/gpu": "6"}  # 2 L4s x 3 clients
    api.patch_node(name, {"metadata": {"labels": {"cloud.google.com/gke-max-shared-clients-per-gpu": "10"}}})
    node = api.read_node(name)
    assert node.metadata.labels["cloud.google.com/gke-max-shared-clients-per-gpu"] == "10"
    assert gpu_resources(node) == {"nvidia.com/gpu": "6"}


def test_ack_advertises_gpu_memory_in_gib_under_a_shared_scheduling_label(world: World):
    world.create("ack", pool("t4", "ecs.gn6i-c24g1.12xlarge", 2, 1, {"ack.node.gpu.schedule": "cgpu"}))
    world.create("ack", pool("t4core", "ecs.gn6i-c4g1.xlarge", 1, 1, {"ack.node.gpu.schedule": "core_mem"}))
    world.create("ack", pool("t4whole", "ecs.gn6i-c4g1.xlarge", 1, 1))
    by_pool = {
        p: gpu_resources(next(iter(world.nodes("ack", f"alibabacloud.com/nodepool-id={i}").values())))
        for p, i in (
            (s.name, s.cloud_id) for s in world.driver("ack").list_pools(world.refs["ack"]) if s.owned
        )
    }
    assert by_pool == {
        "t4": {"nvidia.com/gpu": "0", "aliyun.com/gpu-mem": "30", "aliyun.com/gpu-count": "2"},
        "t4core": {
            "nvidia.com/gpu": "0",
            "aliyun.com/gpu-mem": "15",
            "aliyun.com/gpu-count": "1",
            "aliyun.com/gpu-core.percentage": "100",
        },
        "t4whole": {"nvidia.com/gpu": "1"},
    }


# Pods


def _pod(
    name: str, node: str | None, resource: str = "nvidia.com/gpu.shared", count: int = 1
) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": {"limits": {resource: str(count)}}}
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_pods_bound_to_nodes_run_and_list_by_node_and_the_kubelet_refuses_what_does_not_fit(world: World):
    world.create(
        "aks", pool("ts", "Standard_NC4as_T4_v3", 1, 2, {"nvidia.com/device-plugin.config": "time-sliced-4"})
    )
    world.apply_configs("aks", {"time-sliced-4": config_text(4)})
    first, second = sorted(world.nodes("aks", "agentpool=ts"))
    api = world.api("aks")
    assert api.create_namespaced_pod("ml", _pod("a", first, count=3)).status.phase == "Running"
    assert api.create_namespaced_pod("ml", _pod("b", second)).status.phase == "Running"
    assert api.create_namespaced_pod("other", _pod("c", first)).status.phase == "Running"
    # No node has 10 slices: the scheduler leaves it Pending (one it fits is bound, below).
    assert api.create_namespaced_pod("ml", _pod("unbound", None, count=10)).status.phase == "Pending"
    refused = api.create_namespaced_pod("ml", _pod("d", first)).status
    assert (refused.phase, refused.reason, refused.message) == (
        "Failed",
        "OutOfnvidia.com/gpu.shared",
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu.shared, "
        "requested: 1, used: 4, capacity: 4",
    )

    on_first = api.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={first},status.phase!=Failed")
    assert sorted((p.metadata.namespace, p.metadata.name) for p in on_first.items) == [
        ("ml", "a"),
        ("other", "c"),
    ]
    assert sorted(p.metadata.name for p in api.list_namespaced_pod("ml").items) == ["a", "b", "d", "unbound"]
    world.sandbox.kube.cluster(world.names["aks"]).finish_pod("ml", "a")
    running = api.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={first},status.phase!=Succeeded,status.phase!=Failed"
    )
    assert [p.metadata.name for p in running.items] == ["c"]
    api.delete_namespaced_pod("c", "other")
    assert api.list_namespaced_pod("other").items == []


def test_a_pod_without_containers_is_invalid(world: World):
    with pytest.raises(ApiException) as invalid:
        world.api("eks").create_namespaced_pod(
            "ml", {"metadata": {"name": "empty"}, "spec": {"containers": []}}
        )
    assert invalid.value.status == 422
    assert status_of(invalid.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Pod "empty" is invalid: spec.containers: Required value',
        "reason": "Invalid",
        "details": {
            "name": "empty",
            "kind": "Pod",
            "causes": [
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"}
            ],
        },
        "code": 422,
    }


def test_an_unknown_field_selector_is_a_bad_request(world: World):
    with pytest.raises(ApiException) as bad:
        world.api("eks").list_pod_for_all_namespaces(field_selector="spec.schedulerName=x")
    assert (bad.value.status, status_of(bad.value)["message"]) == (
        400,
        "field label not supported: spec.schedulerName",
    )


# ConfigMaps: server-side apply


def _managed(config_map: client.V1ConfigMap) -> dict[tuple[str, str], list[str]]:
    return {
        (e.manager, e.operation): sorted(k.removeprefix("f:") for k in e.fields_v1.get("f:data", {}))
        for e in config_map.metadata.managed_fields
    }


def test_server_side_apply_creates_updates_and_records_each_manager_s_keys(world: World):
    api = world.api("aks")
    created = world.apply_configs("aks", {"default": "version: v1\n", "time-sliced-4": config_text(4)})
    assert created.data == {"default": "version: v1\n", "time-sliced-4": config_text(4)}
    assert _managed(created) == {("provisioner", "Apply"): ["default", "time-sliced-4"]}

    # Another manager adds its own key with a plain update; the next apply keeps it.
    theirs = api.read_namespaced_config_map(CM, NS)
    theirs.data["custom"] = "version: v1\n"
    theirs.metadata.managed_fields = None
    api.replace_namespaced_config_map(CM, NS, theirs, field_manager="kubectl-edit")
    applied = world.apply_configs("aks", {"default": "version: v1\n", "time-sliced-10": config_text(10)})
    assert applied.data == {
        "default": "version: v1\n",
        "time-sliced-10": config_text(10),
        "custom": "version: v1\n",
    }
    assert _managed(applied) == {
        ("provisioner", "Apply"): ["default", "time-sliced-10"],
        ("kubectl-edit", "Update"): ["custom"],
    }
    assert int(applied.metadata.resource_version) > int(created.metadata.resource_version)


def test_applying_a_key_another_manager_changed_conflicts_unless_forced(world: World):
    api = world.api("eks")
    world.apply_configs("eks", {"time-sliced-4": config_text(4)})
    api.patch_namespaced_config_map(
        CM, NS, {"data": {"time-sliced-4": config_text(5)}}, field_manager="kubectl-edit"
    )
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CM},
        "data": {"time-sliced-4": config_text(4)},
    }
    with pytest.raises(ApiException) as conflict:
        api.patch_namespaced_config_map(
            CM, NS, body, field_manager="provisioner", _content_type="application/apply-patch+yaml"
        )
    assert conflict.value.status == 409
    assert status_of(conflict.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.time-sliced-4',
        "reason": "Conflict",
        "details": {
            "causes": [
                {
                    "type": "FieldManagerConflict",
                    "message": 'conflict with "kubectl-edit" using v1',
                    "field": ".data.time-sliced-4",
                }
            ]
        },
        "code": 409,
    }
    forced = world.apply_configs("eks", {"time-sliced-4": config_text(4)})
    assert forced.data == {"time-sliced-4": config_text(4)}
    assert _managed(forced) == {("provisioner", "Apply"): ["time-sliced-4"]}


def test_a_key_the_applier_stops_applying_is_removed(world: World):
    world.apply_configs("gke", {"a": "1", "b": "2"})
    assert world.apply_configs("gke", {"b": "2"}).data == {"b": "2"}


def test_a_dry_run_apply_answers_without_keeping_anything(world: World):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CM}, "data": {"k": "v"}}
    answered = world.api("gke").patch_namespaced_config_map(
        CM, NS, body, field_manager="provisioner", dry_run="All", _content_type="application/apply-patch+yaml"
    )
    assert answered.data == {"k": "v"}
    with pytest.raises(ApiException) as missing:
        world.api("gke").read_namespaced_config_map(CM, NS)
    assert missing.value.status == 404


# Errors


def test_a_missing_object_is_a_not_found_status_and_a_second_create_already_exists(world: World):
    api = world.api("ack")
    with pytest.raises(ApiException) as missing:
        api.read_node("no-such-node")
    assert status_of(missing.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "no-such-node" not found',
        "reason": "NotFound",
        "details": {"name": "no-such-node", "kind": "nodes"},
        "code": 404,
    }
    body = {"metadata": {"name": "settings"}, "data": {"a": "1"}}
    api.create_namespaced_config_map("default", body)
    with pytest.raises(ApiException) as twice:
        api.create_namespaced_config_map("default", body)
    assert (twice.value.status, status_of(twice.value)["reason"], status_of(twice.value)["message"]) == (
        409,
        "AlreadyExists",
        'configmaps "settings" already exists',
    )
    listed = api.list_config_map_for_all_namespaces()
    assert [(c.metadata.namespace, c.metadata.name) for c in listed.items] == [("default", "settings")]
    assert _managed(listed.items[0]) == {("OpenAPI-Generator", "Update"): ["a"]}  # the client's user agent
