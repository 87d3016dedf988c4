"""The sandbox's PodDisruptionBudgets and Eviction subresource through the official client: the
disruption controller's arithmetic, and what the API server answers an eviction (201, 429, 500,
404, 400), each step decided by an explicit scan of the cluster's components."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kube.workloads import NS, Cluster

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "sandbox")
    made.node_group("a", "g5.xlarge", 2)  # one A10G each
    made.node_group("b", "g5.xlarge", 1)
    yield made
    made.stop()


def _counts(status: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        status["expectedPods"],
        status["desiredHealthy"],
        status["currentHealthy"],
        status["disruptionsAllowed"],
    )


# The disruption controller's arithmetic: 3 replicas of 1 GPU on 3 GPU nodes, or 4 where 3 fit


@pytest.mark.parametrize(
    ("replicas", "bounds", "expected"),
    [
        (3, {"minAvailable": 2}, (3, 2, 3, 1)),
        (3, {"minAvailable": "50%"}, (3, 2, 3, 1)),  # ceil(1.5)
        (3, {"minAvailable": "100%"}, (3, 3, 3, 0)),
        (3, {"maxUnavailable": 1}, (3, 2, 3, 1)),
        (3, {"maxUnavailable": "50%"}, (3, 1, 3, 2)),  # maxUnavailable ceil(1.5) = 2
        (3, {"maxUnavailable": "0%"}, (3, 3, 3, 0)),
        # a fourth replica finds no GPU: the controller's 4 count for percents and maxUnavailable,
        # the pods selected (4) for an integer minAvailable; only 3 are healthy
        (4, {"maxUnavailable": 1}, (4, 3, 3, 0)),
        (4, {"minAvailable": "50%"}, (4, 2, 3, 1)),
        (4, {"minAvailable": 3}, (4, 3, 3, 0)),
    ],
)
def test_a_budget_s_status_is_the_disruption_controller_s_arithmetic(
    cluster: Cluster, replicas: int, bounds: dict[str, Any], expected: tuple[int, int, int, int]
) -> None:
    cluster.deployment("web", replicas, gpus=1)
    cluster.scan()
    cluster.budget("web", "web", **bounds)
    status = cluster.budget_status("web")
    assert _counts(status) == expected
    assert status["observedGeneration"] == 1
    (condition,) = status["conditions"]
    allowed = expected[3] > 0
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True" if allowed else "False",
        "SufficientPods" if allowed else "InsufficientPods",
    )


def test_pods_without_a_controller_count_for_nothing_under_max_unavailable(cluster: Cluster) -> None:
    for name in ("solo-1", "solo-2"):
        body = {
            "metadata": {"name": name, "labels": {"app": "solo"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        cluster.core.create_namespaced_pod(NS, body)
    cluster.budget("solo", "solo", maxUnavailable=1)
    assert _counts(cluster.budget_status("solo")) == (0, 0, 2, 0)  # expected 0: nothing allowed
    events = cluster.core.list_namespaced_event(NS, field_selector="involvedObject.name=solo").items
    assert [(e.reason, e.involved_object.kind) for e in events] == [("UnmanagedPods", "PodDisruptionBudget")]
    assert "(selector: app=solo)" in events[0].message
    cluster.policy.patch_namespaced_pod_disruption_budget(
        "solo", NS, {"spec": {"maxUnavailable": None, "minAvailable": 1}}
    )
    status = cluster.budget_status("solo")
    assert (_counts(status), status["observedGeneration"]) == ((2, 1, 2, 1), 2)  # an integer counts the pods


def test_a_budget_with_both_bounds_or_a_bad_percent_is_refused(cluster: Cluster) -> None:
    from kubernetes.client import ApiException

    for bounds, message in (
        ({"minAvailable": 1, "maxUnavailable": 1}, "minAvailable and maxUnavailable cannot be both set"),
        (
            {"maxUnavailable": "150%"},
            'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%',
        ),
        ({"minAvailable": -1}, "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
    ):
        with pytest.raises(ApiException) as refused:
            cluster.budget("bad", "web", **bounds)
        assert refused.value.status == 422
        said = json.loads(refused.value.body)["message"]
        assert said.startswith('PodDisruptionBudget.policy "bad" is invalid: ') and message in said


# Evictions


def _running(cluster: Cluster, app: str) -> list[str]:
    return sorted(
        n
        for n, p in cluster.pods(app).items()
        if p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")
    )


def test_an_eviction_takes_from_the_budget_and_the_replica_is_made_again_elsewhere(cluster: Cluster) -> None:
    cluster.deployment("web", 2, gpus=1)  # on group a's two nodes; group b's is free
    cluster.scan()
    cluster.budget("web", "web", maxUnavailable=1)
    first, second = _running(cluster, "web")
    node = cluster.pods("web")[first]["spec"]["nodeName"]
    cluster.core.patch_node(node, {"spec": {"unschedulable": True}})  # kubectl cordon

    assert cluster.evict(first) == (
        201,
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
    )
    evicted = cluster.pods("web")[first]
    assert evicted["metadata"]["deletionTimestamp"]  # Terminating until its kubelet stops it
    assert {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}.items() <= next(
        c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget"
    ).items()
    status = cluster.budget_status("web")
    assert (status["disruptionsAllowed"], list(status["disruptedPods"])) == (0, [first])

    code, body = cluster.evict(second)
    assert code == 429
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": VIOLATION,
        "reason": "TooManyRequests",
        "code": 429,
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web needs 1 healthy pods and has 2 currently",
                }
            ]
        },
    }
    replacement = [n for n in cluster.pods("web") if n not in (first, second)]
    assert [cluster.pods("web")[n]["status"]["phase"] for n in replacement] == [
        "Pending"
    ]  # made, not yet scheduled

    cluster.scan()  # the kubelet stops the evicted pod; the scheduler binds its replacement
    pods = cluster.pods("web")
    assert first not in pods and replacement[0] in pods
    assert pods[replacement[0]]["status"]["phase"] == "Running"
    assert pods[replacement[0]]["spec"]["nodeName"] not in (
        node,
        cluster.pods("web")[second]["spec"]["nodeName"],
    )
    assert pods[replacement[0]]["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    status = cluster.budget_status("web")
    assert (status["disruptionsAllowed"], status.get("disruptedPods")) == (1, None)
    assert cluster.evict(second)[0] == 201


def test_a_pod_under_two_budgets_is_a_500_and_an_unknown_pod_a_404(cluster: Cluster) -> None:
    cluster.deployment("web", 1)
    cluster.scan()
    cluster.budget("one", "web", maxUnavailable=1)
    cluster.budget("two", "web", minAvailable=0)
    (pod,) = _running(cluster, "web")
    assert cluster.evict(pod) == (
        500,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
            "not support.",
            "code": 500,
        },
    )
    code, body = cluster.evict("nope")
    assert (code, body["reason"], body["message"]) == (404, "NotFound", 'pods "nope" not found')


def test_a_pending_pod_is_evicted_without_asking_its_budget(cluster: Cluster) -> None:
    cluster.deployment("web", 4, gpus=1)  # three GPUs: one replica stays Pending
    cluster.scan()
    cluster.budget("web", "web", minAvailable=3)
    assert cluster.budget_status("web")["disruptionsAllowed"] == 0
    (pending,) = [n for n, p in cluster.pods("web").items() if p["status"]["phase"] == "Pending"]
    running = _running(cluster, "web")[0]
    assert cluster.evict(running)[0] == 429
    assert cluster.evict(pending)[0] == 201
    assert pending not in cluster.pods("web")  # not bound: deleted at once


def test_a_dry_run_eviction_changes_nothing(cluster: Cluster) -> None:
    cluster.deployment("web", 2)
    cluster.scan()
    cluster.budget("web", "web", maxUnavailable=1)
    pod = _running(cluster, "web")[0]
    assert cluster.evict(pod, dryRun=["All"])[0] == 201
    assert cluster.budget_status("web")["disruptionsAllowed"] == 1
    assert not cluster.pods("web")[pod]["metadata"].get("deletionTimestamp")


def test_a_name_in_the_body_must_be_the_url_s(cluster: Cluster) -> None:
    cluster.deployment("web", 1)
    cluster.scan()
    (pod,) = _running(cluster, "web")
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}}
    from kubernetes.client import ApiException

    with pytest.raises(ApiException) as refused:
        cluster.core.create_namespaced_pod_eviction(pod, NS, body)
    assert (
        refused.value.status,
        "name in URL does not match name in Eviction object" in refused.value.body,
    ) == (400, True)
