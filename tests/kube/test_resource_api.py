"""The sandbox's resource.k8s.io/v1 through the official client's ResourceV1Api: DeviceClasses,
ResourceClaims (with /status) and ResourceClaimTemplates validated as the API server does, the
group served from Kubernetes 1.34 with extendedResourceName kept only where DRAExtendedResource is
on (1.36), each cloud's device plugin switched off by its node label, and NVIDIA's DRA driver
installed by its chart's rules, publishing ResourceSlices where its kubelet plugin runs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from provisioner.clusters import ClusterRef
from provisioner.drivers.registry import connect
from provisioner.pools import PoolState
from provisioner.sandbox.kube.dra import ChartError, merged
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.kube.test_sandbox_kube import pool

GROUP = "resource.k8s.io/v1"
OVERRIDE = {"gpuResourcesEnabledOverride": True}


@dataclass(frozen=True)
class Seed:
    """A cluster to seed (the sandbox's settings give each its Kubernetes version)."""

    name: str
    ref: ClusterRef

    @property
    def cloud(self) -> str:
        return self.ref.cloud


class World:
    """One cluster per cloud at the default version (1.35), and AKS clusters at 1.36 and 1.33."""

    def __init__(self, directory: Path):
        suffix = uuid.uuid4().hex[:6]
        self.refs = {
            "aks": ClusterRef("aks", "22222222-2222-2222-2222-222222222222", "dra", f"aks-{suffix}"),
            "gke": ClusterRef("gke", "dra-project", "us-central1-a", f"gke-{suffix}"),
            "eks": ClusterRef(
                "eks",
                "123456789012",
                "us-west-2",
                f"eks-{suffix}",
                {"node_role": "arn:aws:iam::123456789012:role/nodes", "subnets": ("subnet-0abc1234",)},
            ),
            "ack": ClusterRef("ack", "", "cn-hangzhou", f"c{suffix}", {"vswitches": ("vsw-bp1dra",)}),
            "new": ClusterRef("aks", "22222222-2222-2222-2222-222222222222", "dra", f"new-{suffix}"),
            "old": ClusterRef("aks", "22222222-2222-2222-2222-222222222222", "dra", f"old-{suffix}"),
        }
        versions = {"new": "1.36.1", "old": "1.33.4"}
        targets = [Seed(name, ref) for name, ref in self.refs.items()]
        settings = SandboxSettings(seed=7, kubernetes_versions=versions)
        self.sandbox = Sandbox(directory, settings).start(targets)

    def create(self, name: str, state: PoolState) -> None:
        connect(self.refs[name].cloud, self.sandbox.directory).create_pool(self.refs[name], state)

    def client(self, name: str) -> client.ApiClient:
        return config.new_client_from_config(str(self.sandbox.kubeconfig), context=name)

    def resource(self, name: str) -> client.ResourceV1Api:
        return client.ResourceV1Api(self.client(name))

    def core(self, name: str) -> client.CoreV1Api:
        return client.CoreV1Api(self.client(name))

    def cluster(self, name: str) -> Any:
        return self.sandbox.kube.cluster(name)

    def slices(self, name: str, **selectors: str) -> list[dict[str, Any]]:
        raw = self.resource(name).list_resource_slice(_preload_content=False, **selectors)
        return json.loads(raw.data)["items"]

    def gpus(self, name: str, selector: str) -> dict[str, dict[str, str]]:
        """node -> its extended resources, of the nodes `selector` picks."""
        nodes = self.core(name).list_node(label_selector=selector).items
        return {n.metadata.name: {k: v for k, v in n.status.allocatable.items() if "/" in k} for n in nodes}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    made = World(tmp_path_factory.mktemp("dra") / "sandbox")
    yield made
    made.sandbox.stop()


def status_of(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


def claim(
    name: str, requests: list[dict[str, Any]], config_: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if config_ is not None:
        devices["config"] = config_
    return {
        "apiVersion": GROUP,
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": devices},
    }


def device_class(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP,
        "kind": "DeviceClass",
        "metadata": {"name": name, "labels": {"team": "ml"}},
        "spec": spec,
    }


def refused(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as caught:
        call(*args)
    assert caught.value.status == 422, caught.value.body
    return status_of(caught.value)


# The API: discovery, versions


def test_the_group_is_discovered_at_v1_with_the_claims_status_subresource(world: World):
    api = world.client("aks")
    groups = client.ApisApi(api).get_api_versions()
    [group] = [g for g in groups.groups if g.name == "resource.k8s.io"]
    assert (group.preferred_version.group_version, [v.version for v in group.versions]) == (GROUP, ["v1"])
    listed = client.ResourceV1Api(api).get_api_resources()
    assert {r.name: r.namespaced for r in listed.resources} == {
        "deviceclasses": False,
        "resourceclaims": True,
        "resourceclaims/status": True,
        "resourceclaimtemplates": True,
        "resourceslices": False,
    }
    raw = api.call_api("/openapi/v3", "GET", auth_settings=["BearerToken"], _preload_content=False)
    assert "apis/resource.k8s.io/v1" in json.loads(raw.data)["paths"]
    assert client.VersionApi(api).get_code().git_version == "v1.35.0"


def test_a_cluster_older_than_1_34_serves_no_resource_group(world: World):
    api = world.client("old")
    assert client.VersionApi(api).get_code().git_version == "v1.33.4"
    assert "resource.k8s.io" not in [g.name for g in client.ApisApi(api).get_api_versions().groups]
    with pytest.raises(ApiException) as missing:
        client.ResourceV1Api(api).list_device_class()
    assert missing.value.status == 404
    with pytest.raises(ChartError, match=r"No supported resource.k8s.io API version found"):
        world.cluster("old").install_dra_driver(OVERRIDE)


def test_extended_resource_name_is_dropped_where_the_gate_is_off_and_kept_from_1_36(world: World):
    body = device_class("ext.example.com", extendedResourceName="example.com/gpu")
    assert (
        world.resource("aks").create_device_class(body).spec.extended_resource_name is None
    )  # 1.35: alpha, off
    assert world.resource("new").create_device_class(body).spec.extended_resource_name == "example.com/gpu"
    bad = device_class("bad.example.com", extendedResourceName="kubernetes.io/gpu")
    status = refused(world.resource("new").create_device_class, bad)
    assert status["message"] == (
        'DeviceClass.resource.k8s.io "bad.example.com" is invalid: spec.extendedResourceName: '
        'Invalid value: "kubernetes.io/gpu": must be a valid extended resource name'
    )


# Stored kinds: create, read, list, delete; defaults; validation


def test_device_classes_are_created_listed_by_label_and_deleted(world: World):
    api = world.resource("eks")
    created = api.create_device_class(
        device_class("a.example.com", selectors=[{"cel": {"expression": "true"}}])
    )
    assert (created.metadata.generation, created.metadata.resource_version is not None) == (1, True)
    api.create_device_class({**device_class("b.example.com"), "metadata": {"name": "b.example.com"}})
    assert [c.metadata.name for c in api.list_device_class(label_selector="team=ml").items] == [
        "a.example.com"
    ]
    with pytest.raises(ApiException) as exists:
        api.create_device_class(device_class("a.example.com"))
    assert (exists.value.status, status_of(exists.value)["message"]) == (
        409,
        'deviceclasses.resource.k8s.io "a.example.com" already exists',
    )
    api.delete_device_class("a.example.com")
    with pytest.raises(ApiException) as gone:
        api.read_device_class("a.example.com")
    assert status_of(gone.value)["message"] == 'deviceclasses.resource.k8s.io "a.example.com" not found'


def test_a_claim_is_defaulted_and_its_spec_is_immutable(world: World):
    api = world.resource("eks")
    made = api.create_namespaced_resource_claim(
        "ml", claim("one", [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}])
    )
    exact = made.spec.devices.requests[0].exactly
    assert (exact.allocation_mode, exact.count) == ("ExactCount", 1)
    assert [c.metadata.name for c in api.list_resource_claim_for_all_namespaces().items] == ["one"]
    changed = claim("one", [{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com"}}])
    status = refused(api.replace_namespaced_resource_claim, "one", "ml", changed)
    assert status["details"]["causes"][0]["field"] == "spec"
    assert status["details"]["causes"][0]["message"].endswith("field is immutable")


def test_claim_validation_names_each_field_as_the_api_server_does(world: World):
    api = world.resource("eks")
    bad = claim(
        "bad",
        [
            {"name": "GPU", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
            {
                "name": "both",
                "exactly": {"deviceClassName": "gpu.nvidia.com"},
                "firstAvailable": [{"name": "x"}],
            },
            {"name": "none"},
            {
                "name": "all",
                "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "count": 2},
            },
            {"name": "some", "exactly": {"deviceClassName": "", "allocationMode": "Some"}},
            {"name": "neg", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": -1}},
            {
                "name": "cel",
                "exactly": {
                    "deviceClassName": "gpu.nvidia.com",
                    "selectors": [{"cel": {"expression": "x" * 10241}}],
                },
            },
            {"name": "none"},
        ],
        [{"requests": ["missing"], "opaque": {"driver": "GPU_nvidia", "parameters": [1]}}],
    )
    causes = {
        (c["field"], c["message"])
        for c in refused(api.create_namespaced_resource_claim, "ml", bad)["details"]["causes"]
    }
    r = "spec.devices.requests"
    assert causes >= {
        (
            f"{r}[0].name",
            'Invalid value: "GPU": a lowercase RFC 1123 label must consist of lower case alphanumeric '
            "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        (
            f"{r}[1]",
            "Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
            "but multiple fields are set",
        ),
        (f"{r}[2]", "Required value: exactly one of `exactly` or `firstAvailable` is required"),
        (f"{r}[3].exactly.count", "Invalid value: 2: must not be specified when allocationMode is 'All'"),
        (f"{r}[4].exactly.deviceClassName", "Required value"),
        (
            f"{r}[4].exactly.allocationMode",
            'Unsupported value: "Some": supported values: "All", "ExactCount"',
        ),
        (f"{r}[5].exactly.count", "Invalid value: -1: must be greater than zero"),
        (f"{r}[6].exactly.selectors[0].cel.expression", "Too long: must have at most 10240 bytes"),
        (f"{r}[7]", 'Duplicate value: "none"'),
        (
            "spec.devices.config[0].requests[0]",
            'Invalid value: "missing": must be the name of a request in the '
            "claim or the name of a request and a subrequest separated by '/'",
        ),
        (
            "spec.devices.config[0].opaque.parameters",
            'Invalid value: "<value omitted>": must be a valid JSON object',
        ),
    }
    assert any(f == "spec.devices.config[0].opaque.driver" and "RFC 1123 subdomain" in m for f, m in causes)
    status = refused(api.create_namespaced_resource_claim, "ml", bad)
    assert status["message"].startswith(
        'ResourceClaim.resource.k8s.io "bad" is invalid: [spec.devices.requests[0].name'
    )
    with pytest.raises(ApiException):
        api.read_namespaced_resource_claim("bad", "ml")  # nothing stored


def test_a_template_validates_its_claim_spec_at_spec_spec(world: World):
    api = world.resource("eks")
    template = {
        "apiVersion": GROUP,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "mig"},
        "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": "Mig"}}]}}},
    }
    [cause] = refused(api.create_namespaced_resource_claim_template, "ml", template)["details"]["causes"]
    assert cause["field"] == "spec.spec.devices.requests[0].exactly.deviceClassName"
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "mig.nvidia.com"
    made = api.create_namespaced_resource_claim_template("ml", template)
    assert made.spec.spec.devices.requests[0].exactly.count == 1
    assert [t.metadata.name for t in api.list_namespaced_resource_claim_template("ml").items] == ["mig"]


def test_the_claim_status_is_written_through_its_subresource_only(world: World):
    api = world.resource("gke")
    api.create_namespaced_resource_claim(
        "ml", claim("shared", [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}])
    )
    allocation = {
        "devices": {
            "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"}]
        }
    }
    reserved = [{"resource": "pods", "name": "p", "uid": "0b8c0f7e-4a65-4b0a-9f29-0c1c6a3a2f11"}]
    status = refused(
        api.patch_namespaced_resource_claim_status, "shared", "ml", {"status": {"reservedFor": reserved}}
    )
    assert (
        status["details"]["causes"][0]["message"]
        == "Forbidden: may not be specified when `allocated` is not set"
    )
    api.patch_namespaced_resource_claim_status(
        "shared", "ml", {"status": {"allocation": allocation, "reservedFor": reserved}}
    )
    read = api.read_namespaced_resource_claim("shared", "ml")
    assert read.status.allocation.devices.results[0].device == "gpu-0"
    api.patch_namespaced_resource_claim("shared", "ml", {"metadata": {"labels": {"a": "b"}}, "status": None})
    assert api.read_namespaced_resource_claim("shared", "ml").status.reserved_for[0].name == "p"  # kept
    assert (
        world.cluster("gke").resources.get("resourceclaims", "ml", "shared")["status"]["allocation"]
        == allocation
    )


# Each cloud's device plugin, switched off per node


def test_each_cloud_s_label_switches_its_device_plugin_off(world: World):
    world.create(
        "gke", pool("l4off", "g2-standard-24", 2, 1, {"gke-no-default-nvidia-gpu-device-plugin": "true"})
    )
    world.create("gke", pool("l4on", "g2-standard-24", 2, 1))
    assert list(world.gpus("gke", "cloud.google.com/gke-nodepool=l4off").values()) == [{}]
    assert list(world.gpus("gke", "cloud.google.com/gke-nodepool=l4on").values()) == [{"nvidia.com/gpu": "2"}]
    world.create("ack", pool("off", "ecs.gn6i-c4g1.xlarge", 1, 1, {"ack.node.gpu.schedule": "disabled"}))
    assert list(world.gpus("ack", "ack.node.gpu.schedule=disabled").values()) == [{}]
    world.create("eks", pool("off", "g5.xlarge", 1, 1, {"nvidia.com/gpu.deploy.device-plugin": "false"}))
    world.create("eks", pool("on", "g5.xlarge", 1, 1))
    [off] = world.core("eks").list_node(label_selector="eks.amazonaws.com/nodegroup=off").items
    [on] = world.core("eks").list_node(label_selector="eks.amazonaws.com/nodegroup=on").items
    assert "nvidia.com/gpu" not in off.status.allocatable
    assert off.metadata.labels["nvidia.com/gpu.deploy.device-plugin"] == "false"  # the operator keeps it
    assert on.metadata.labels["nvidia.com/gpu.deploy.device-plugin"] == "true"  # the operator writes it
    assert on.metadata.labels["nvidia.com/gpu.present"] == "true"
    assert on.status.allocatable["nvidia.com/gpu"] == "1"


# The DRA driver's chart


def test_helm_merges_values_into_the_chart_defaults():
    values = merged(
        {"a": {"b": 1, "c": [1, 2]}, "d": {"e": 1}, "f": 1},
        {"a": {"c": [3]}, "d": None, "g": {"h": 2}},
    )
    assert values == {"a": {"b": 1, "c": [3]}, "f": 1, "g": {"h": 2}}


def test_the_chart_refuses_gpus_without_the_override_and_installs_nothing(world: World):
    cluster = world.cluster("ack")
    with pytest.raises(ChartError) as failed:
        cluster.install_dra_driver({})
    assert str(failed.value).startswith(
        "INSTALLATION FAILED: execution error at (dra-driver-nvidia-gpu/templates/validation.yaml:42:4): \n\n"
        "The default value of 'resources.gpus.enabled == true'. However, when 'resources.gpus.enabled=true' "
        "this DRA driver cannot be deployed alongside the standard GPU device plugin on the same node."
    )
    with pytest.raises(ChartError, match="Running in the 'default' namespace is not recommended"):
        cluster.install_dra_driver(OVERRIDE, namespace="default")
    assert cluster.dra_driver is None
    assert world.resource("ack").list_device_class().items == []


def test_the_chart_s_device_classes_and_feature_gates(world: World):
    cluster = world.cluster("new")
    release = cluster.install_dra_driver(
        {
            **OVERRIDE,
            "resources": {"computeDomains": {"enabled": False}},
            "featureGates": {"TimeSlicingSettings": True},
        }
    )
    classes = {c.metadata.name: c for c in world.resource("new").list_device_class().items}
    assert set(classes) >= {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"}
    assert not any(name.startswith("compute-domain") for name in classes)
    gpu = classes["gpu.nvidia.com"]
    assert gpu.spec.extended_resource_name == "nvidia.com/gpu"  # 1.36: the gate is on
    assert gpu.spec.selectors[0].cel.expression == (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    )
    assert gpu.metadata.annotations["meta.helm.sh/release-name"] == "dra-driver-nvidia-gpu"
    assert release.gate_enabled("TimeSlicingSettings") and not release.gate_enabled("MPSSupport")
    with pytest.raises(ChartError, match="cannot re-use a name that is still in use"):
        cluster.install_dra_driver(OVERRIDE)
    cluster.uninstall_dra_driver()
    assert not any(
        c.metadata.name.endswith("nvidia.com") for c in world.resource("new").list_device_class().items
    )


# Where the kubelet plugin runs, and the slices it publishes


def test_aks_mig_pool_publishes_a_device_per_mig_instance_and_a_whole_pool_both(world: World):
    world.create(
        "aks",
        pool(
            "mig",
            "Standard_NC24ads_A100_v4",
            1,
            1,
            {"nvidia.com/gpu.deploy.device-plugin": "false"},
            mig="MIG1g",
        ),
    )
    world.create("aks", pool("whole", "Standard_NC48ads_A100_v4", 2, 1))
    world.cluster("aks").install_dra_driver(OVERRIDE)
    by_node = {s["spec"]["nodeName"]: s for s in world.slices("aks")}
    mig_node = next(n for n in by_node if n.startswith("aks-mig-"))
    whole_node = next(n for n in by_node if n.startswith("aks-whole-"))
    mig = by_node[mig_node]
    assert mig["metadata"]["name"].startswith(f"00000-gpu.nvidia.com-{mig_node}-")
    assert mig["spec"]["pool"] == {"name": mig_node, "generation": 1, "resourceSliceCount": 1}
    devices = mig["spec"]["devices"]
    assert [d["name"] for d in devices] == [
        f"gpu-0-mig-1g10gb-19-{i}" for i in range(7)
    ]  # 7 x 1g.10gb, GI 19
    first = devices[0]
    assert {
        k: next(iter(v.values()))
        for k, v in first["attributes"].items()
        if k in ("type", "profile", "productName")
    } == {
        "type": "mig",
        "profile": "1g.10gb",
        "productName": "NVIDIA A100 80GB PCIe",
    }
    assert first["attributes"]["parentUUID"]["string"].startswith("GPU-")
    assert first["capacity"]["memory"] == {"value": "9856Mi"}
    assert world.gpus("aks", "agentpool=mig") == {mig_node: {}}  # the device plugin is off there
    whole = by_node[whole_node]["spec"]["devices"]
    assert [(d["name"], d["attributes"]["type"]["string"]) for d in whole] == [
        ("gpu-0", "gpu"),
        ("gpu-1", "gpu"),
    ]
    assert world.gpus("aks", "agentpool=whole") == {whole_node: {"nvidia.com/gpu": "2"}}  # both advertise it
    assert [
        s["spec"]["nodeName"] for s in world.slices("aks", field_selector=f"spec.nodeName={mig_node}")
    ] == [mig_node]
    assert world.slices("aks", field_selector="spec.driver=other.example.com") == []
    again = world.slices("aks")
    assert [s["metadata"]["name"] for s in again] == sorted(s["metadata"]["name"] for s in by_node.values())
    with pytest.raises(ApiException) as unsupported:
        world.resource("aks").list_resource_slice(field_selector="spec.pool.name=x")
    assert unsupported.value.status == 400


def test_eks_mig_manager_label_gives_mig_devices_and_stranded_gpus_give_none(world: World):
    world.create("eks", pool("p4d", "p4d.24xlarge", 8, 1, {"nvidia.com/mig.config": "all-1g.5gb"}))
    cluster = world.cluster("eks")
    cluster.install_dra_driver(
        {**OVERRIDE, "kubeletPlugin": {"nodeSelector": {"eks.amazonaws.com/nodegroup": "p4d"}}}
    )
    [node] = world.core("eks").list_node(label_selector="eks.amazonaws.com/nodegroup=p4d").items
    [mig] = world.slices("eks")
    devices = mig["spec"]["devices"]
    assert len(devices) == 56  # 8 A100s x 7 instances
    assert {d["attributes"]["profile"]["string"] for d in devices} == {"1g.5gb"}
    assert len({d["attributes"]["parentUUID"]["string"] for d in devices}) == 8
    assert devices[0]["capacity"]["memorySlice0"] == {"value": "1"}
    assert world.slices("eks") == [mig]  # stable: names, uuids, versions
    cluster.strand_mig(node.metadata.name)
    assert world.slices("eks") == []  # MIG mode on, no partitions: nothing to announce
    cluster.uninstall_dra_driver()


def test_gke_needs_the_driver_root_and_an_affinity_its_nodes_match(world: World):
    world.create(
        "gke", pool("dra", "g2-standard-24", 2, 1, {"gke-no-default-nvidia-gpu-device-plugin": "true"})
    )
    cluster = world.cluster("gke")
    selector = {"cloud.google.com/gke-nodepool": "dra"}
    [node] = world.gpus("gke", "cloud.google.com/gke-nodepool=dra")

    cluster.install_dra_driver({**OVERRIDE, "kubeletPlugin": {"nodeSelector": selector}})
    assert not cluster.dra_plugin_pods()[node].scheduled  # GKE's nodes carry no NFD or Operator labels
    cluster.uninstall_dra_driver()

    cluster.install_dra_driver({**OVERRIDE, "kubeletPlugin": {"nodeSelector": selector, "affinity": None}})
    pod = cluster.dra_plugin_pods()[node]
    assert (pod.scheduled, pod.running) == (True, False)
    assert "/home/kubernetes/bin/nvidia" in pod.message
    assert world.slices("gke") == []
    cluster.uninstall_dra_driver()

    values = {
        **OVERRIDE,
        "nvidiaDriverRoot": "/home/kubernetes/bin/nvidia",
        "kubeletPlugin": {"nodeSelector": selector, "affinity": None, "tolerations": []},
    }
    cluster.install_dra_driver(values)
    assert (
        cluster.dra_plugin_pods()[node].message == "node(s) had untolerated taint {nvidia.com/gpu: present}"
    )
    cluster.uninstall_dra_driver()

    del values["kubeletPlugin"]["tolerations"]  # the chart's own: nvidia.com/gpu Exists NoSchedule
    cluster.install_dra_driver(values)
    [published] = world.slices("gke")
    assert [d["attributes"]["productName"]["string"] for d in published["spec"]["devices"]] == [
        "NVIDIA L4"
    ] * 2
    assert published["spec"]["devices"][0]["attributes"]["architecture"] == {"string": "Ada Lovelace"}
    assert world.gpus("gke", "cloud.google.com/gke-nodepool=dra") == {node: {}}
    cluster.uninstall_dra_driver()
