"""Pods with ResourceClaims over the wire (the official client): the resourceclaim controller's
claims, the scheduler's DynamicResources messages, claims released with their pods."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.kube.test_sandbox_kube import World, pool

CLASS = "gpu.example.com"  # a class of the test's own: the chart's come with the driver


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path / "sandbox")
    yield made
    made.sandbox.stop()


def resource_api(world: World, cloud: str) -> client.ResourceV1Api:
    context = world.names[cloud]
    return client.ResourceV1Api(config.new_client_from_config(str(world.sandbox.kubeconfig), context=context))


def _class(api: client.ResourceV1Api) -> None:
    expression = "device.driver == 'gpu.nvidia.com'"
    api.create_device_class(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }
    )


def _claim_spec(device_class: str = CLASS) -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}


def _pod(name: str, **source: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", **source}],
            "containers": [{"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def _nodes(world: World) -> int:
    world.create("eks", pool("plain", "g5.xlarge", 1, 2))
    return len(world.api("eks").list_node().items)


def _cannot_allocate(total: int) -> str:
    return (
        f"0/{total} nodes are available: {total} cannot allocate all claims. still not schedulable, "
        f"preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
    )


def _events(world: World, pod: str) -> list[tuple[str, str]]:
    found = world.api("eks").list_namespaced_event("ml", field_selector=f"involvedObject.name={pod}")
    return [(e.reason, e.message) for e in found.items]


def test_a_template_makes_one_claim_per_pod_owned_by_it_and_deleted_with_it(world: World) -> None:
    total, resources, core = _nodes(world), resource_api(world, "eks"), world.api("eks")
    _class(resources)
    resources.create_namespaced_resource_claim_template(
        "ml",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {"metadata": {"labels": {"team": "ml"}}, "spec": _claim_spec()},
        },
    )
    created = core.create_namespaced_pod("ml", _pod("trainer", resourceClaimTemplateName="one-gpu"))
    [status] = created.status.resource_claim_statuses
    claim = resources.read_namespaced_resource_claim(status.resource_claim_name, "ml")
    assert (status.name, claim.metadata.name[: len("trainer-gpu-")], len(claim.metadata.name)) == (
        "gpu",
        "trainer-gpu-",
        len("trainer-gpu-") + 5,
    )
    [owner] = claim.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        "Pod",
        "trainer",
        created.metadata.uid,
        True,
        True,
    )
    assert claim.metadata.annotations == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert claim.metadata.labels == {"team": "ml"}
    # No driver publishes devices here: no node can allocate the claim.
    [condition] = created.status.conditions
    assert (created.status.phase, condition.reason, condition.message) == (
        "Pending",
        "Unschedulable",
        _cannot_allocate(total),
    )
    assert ("FailedScheduling", _cannot_allocate(total)) in _events(world, "trainer")
    core.delete_namespaced_pod("trainer", "ml")
    assert resources.list_namespaced_resource_claim("ml").items == []


def test_a_missing_template_is_the_controllers_event(world: World) -> None:
    _nodes(world)
    created = world.api("eks").create_namespaced_pod(
        "ml", _pod("trainer", resourceClaimTemplateName="absent")
    )
    assert (created.status.phase, created.status.conditions) == ("Pending", None)
    assert _events(world, "trainer") == [
        (
            "FailedResourceClaimCreation",
            'PodResourceClaim gpu: resource claim template "absent": '
            'resourceclaimtemplate.resource.k8s.io "absent" not found',
        )
    ]


def test_a_pod_whose_claim_does_not_exist_waits_unseen_until_it_does(world: World) -> None:
    total, resources, core = _nodes(world), resource_api(world, "eks"), world.api("eks")
    _class(resources)
    created = core.create_namespaced_pod("ml", _pod("waiting", resourceClaimName="shared"))
    # PreEnqueue keeps it out of the scheduling queue: no attempt, no condition, no event.
    assert (created.status.phase, created.status.conditions, _events(world, "waiting")) == (
        "Pending",
        None,
        [],
    )
    resources.create_namespaced_resource_claim(
        "ml",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared"},
            "spec": _claim_spec(),
        },
    )
    world.sandbox.kube.cluster(world.names["eks"]).scan()  # the claim's event requeues the pod
    [condition] = core.read_namespaced_pod("waiting", "ml").status.conditions
    assert condition.message == _cannot_allocate(total)


def test_a_missing_device_class_fails_every_node_at_prefilter(world: World) -> None:
    total, resources, core = _nodes(world), resource_api(world, "eks"), world.api("eks")
    resources.create_namespaced_resource_claim(
        "ml",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared"},
            "spec": _claim_spec("nope.example.com"),
        },
    )
    [condition] = core.create_namespaced_pod("ml", _pod("lost", resourceClaimName="shared")).status.conditions
    assert condition.message == (
        f"0/{total} nodes are available: request gpu: device class nope.example.com does not exist. "
        f"no new claims to deallocate, preemption: 0/{total} nodes are available: "
        f"{total} Preemption is not helpful for scheduling."
    )


# With NVIDIA's DRA driver installed: a p4d node in MIG mode (56 x 1g.5gb), two g5 nodes (one A10G each).

DRIVER = "gpu.nvidia.com"
PROFILE = f"device.attributes['{DRIVER}'].profile == '%s'"


def _driver(world: World, **values: Any) -> Any:
    world.create("eks", pool("p4d", "p4d.24xlarge", 8, 1, {"nvidia.com/mig.config": "all-1g.5gb"}))
    world.create("eks", pool("g5", "g5.xlarge", 1, 2))
    cluster = world.sandbox.kube.cluster(world.names["eks"])
    cluster.install_dra_driver({"gpuResourcesEnabledOverride": True, **values})
    return cluster


def _claim(name: str, device_class: str, *selectors: str, config: list[Any] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    spec: dict[str, Any] = {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}
    if config:
        spec["devices"]["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def _template(name: str, device_class: str, *selectors: str) -> dict[str, Any]:
    claim = _claim(name, device_class, *selectors)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": claim["spec"]},
    }


def _allocated(resources: client.ResourceV1Api, name: str) -> tuple[str, list[str], list[str]]:
    """The claim's node, devices and the pods it is reserved for."""
    status = resources.read_namespaced_resource_claim(name, "ml").status
    if status is None or status.allocation is None:
        return "", [], [r.name for r in (status.reserved_for if status else None) or []]
    allocation = status.allocation
    [term] = allocation.node_selector.node_selector_terms
    return (
        term.match_fields[0].values[0],
        [r.device for r in allocation.devices.results],
        [r.name for r in status.reserved_for or []],
    )


def test_pods_sharing_one_claim_land_together_on_its_device_and_release_it(world: World) -> None:
    cluster, resources, core = _driver(world), resource_api(world, "eks"), world.api("eks")
    resources.create_namespaced_resource_claim("ml", _claim("shared", "gpu.nvidia.com"))
    first = core.create_namespaced_pod("ml", _pod("first", resourceClaimName="shared"))
    second = core.create_namespaced_pod("ml", _pod("second", resourceClaimName="shared"))
    node, devices, reserved = _allocated(resources, "shared")
    assert (first.status.phase, second.status.phase) == ("Running", "Running")
    assert (first.spec.node_name, second.spec.node_name) == (node, node)
    assert (len(devices), reserved) == (1, ["first", "second"])
    assert node in {n for n, s in cluster.dra_plugin_pods().items() if s.running}
    core.delete_namespaced_pod("first", "ml")
    assert _allocated(resources, "shared") == (node, devices, ["second"])
    cluster.finish_pod("ml", "second")
    assert _allocated(resources, "shared") == ("", [], [])  # unused: deallocated, kept (not generated)


def test_a_mig_profile_selector_gets_one_slice_of_that_profile_per_pod(world: World) -> None:
    _driver(world)
    resources, core = resource_api(world, "eks"), world.api("eks")
    resources.create_namespaced_resource_claim_template(
        "ml", _template("slice", "mig.nvidia.com", PROFILE % "1g.5gb")
    )
    pods = [
        core.create_namespaced_pod("ml", _pod(f"p{i}", resourceClaimTemplateName="slice")) for i in range(3)
    ]
    assert {p.status.phase for p in pods} == {"Running"}
    [node] = {p.spec.node_name for p in pods}
    claims = [p.status.resource_claim_statuses[0].resource_claim_name for p in pods]
    devices = [_allocated(resources, c)[1][0] for c in claims]
    assert len(set(devices)) == 3 and all("-mig-1g5gb-" in d for d in devices), devices
    assert world.api("eks").read_node(node).metadata.labels["nvidia.com/mig.config"] == "all-1g.5gb"


def test_no_device_matching_the_selector_leaves_the_pod_pending_with_the_schedulers_message(
    world: World,
) -> None:
    _driver(world)
    resources, core = resource_api(world, "eks"), world.api("eks")
    total = len(core.list_node().items)
    resources.create_namespaced_resource_claim_template(
        "ml", _template("big", "mig.nvidia.com", PROFILE % "3g.20gb")
    )
    pending = core.create_namespaced_pod("ml", _pod("big", resourceClaimTemplateName="big"))
    assert (pending.status.phase, pending.status.conditions[0].message) == (
        "Pending",
        _cannot_allocate(total),
    )
    assert ("FailedScheduling", _cannot_allocate(total)) in _events(world, "big")


def test_whole_gpus_run_out_and_come_back_when_a_pod_finishes(world: World) -> None:
    cluster, resources, core = _driver(world), resource_api(world, "eks"), world.api("eks")
    total = len(core.list_node().items)
    resources.create_namespaced_resource_claim_template("ml", _template("whole", "gpu.nvidia.com"))
    running = [
        core.create_namespaced_pod("ml", _pod(f"w{i}", resourceClaimTemplateName="whole")) for i in range(2)
    ]
    assert sorted(p.spec.node_name for p in running) == sorted(
        n.metadata.name for n in core.list_node(label_selector="eks.amazonaws.com/nodegroup=g5").items
    )
    third = core.create_namespaced_pod("ml", _pod("w2", resourceClaimTemplateName="whole"))
    assert third.status.conditions[0].message == _cannot_allocate(total)
    cluster.finish_pod("ml", "w0")  # its claim is deleted with it (the pod is done): the GPU is free
    assert len(resources.list_namespaced_resource_claim("ml").items) == 2
    cluster.scan()
    assert core.read_namespaced_pod("w2", "ml").spec.node_name == running[0].spec.node_name


def _time_slicing() -> dict[str, Any]:
    parameters = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing"},
    }
    return {"opaque": {"driver": DRIVER, "parameters": parameters}}


def test_time_slicing_without_the_drivers_gate_does_not_start(world: World) -> None:
    _driver(world)
    resources, core = resource_api(world, "eks"), world.api("eks")
    resources.create_namespaced_resource_claim("ml", _claim("ts", "gpu.nvidia.com", config=[_time_slicing()]))
    pod = core.create_namespaced_pod("ml", _pod("ts", resourceClaimName="ts"))
    claim = resources.read_namespaced_resource_claim("ts", "ml")
    assert pod.spec.node_name and pod.status.phase == "Pending"
    assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    assert claim.status.allocation.devices.config[0].source == "FromClaim"
    assert (
        "FailedPrepareDynamicResources",
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
        f"ResourceClaim ts: error preparing devices for claim ml/ts:{claim.metadata.uid}: "
        "prepare devices failed: "
        'error validating GPU config: "TimeSlicing" is selected as the GPU sharing strategy, but the '
        '"TimeSlicingSettings" feature gate is not enabled',
    ) in _events(world, "ts")


def test_time_slicing_with_the_gate_runs(world: World) -> None:
    _driver(world, featureGates={"TimeSlicingSettings": True})
    resources, core = resource_api(world, "eks"), world.api("eks")
    resources.create_namespaced_resource_claim("ml", _claim("ts", "gpu.nvidia.com", config=[_time_slicing()]))
    assert core.create_namespaced_pod("ml", _pod("ts", resourceClaimName="ts")).status.phase == "Running"


def test_kubectl_creates_a_template_and_pods_and_reads_their_claims(world: World, tmp_path: Path) -> None:
    _driver(world)
    documents = [
        _template("slice", "mig.nvidia.com", PROFILE % "1g.5gb"),
        _pod("kubectl-pod", resourceClaimTemplateName="slice"),
    ]
    manifests = [tmp_path / "template.json", tmp_path / "pod.json"]
    for path, document in zip(manifests, documents, strict=True):
        path.write_text(json.dumps(document), encoding="utf-8")

    def kubectl(*args: str) -> str:
        command = [
            "kubectl",
            "--kubeconfig",
            str(world.sandbox.kubeconfig),
            "--context",
            world.names["eks"],
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    for path in manifests:
        kubectl("apply", "-n", "ml", "-f", str(path))
    claim = kubectl(
        "get",
        "pod",
        "kubectl-pod",
        "-n",
        "ml",
        "-o",
        "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}",
    )
    assert claim.startswith("kubectl-pod-gpu-")
    reserved = kubectl(
        "get", "resourceclaim", claim, "-n", "ml", "-o", "jsonpath={.status.reservedFor[*].name}"
    )
    device = kubectl(
        "get",
        "resourceclaim",
        claim,
        "-n",
        "ml",
        "-o",
        "jsonpath={.status.allocation.devices.results[0].device}",
    )
    assert (reserved, "-mig-1g5gb-" in device) == ("kubectl-pod", True)
    assert kubectl("get", "pod", "kubectl-pod", "-n", "ml", "-o", "jsonpath={.status.phase}") == "Running"
