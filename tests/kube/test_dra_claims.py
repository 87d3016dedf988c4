"""Pods with ResourceClaims over the wire (the official client): the resourceclaim controller's
claims, the scheduler's DynamicResources messages, claims released with their pods."""

from __future__ import annotations

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
