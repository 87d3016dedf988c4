"""provisioner.kube.drain's drain against the sandbox's Kubernetes API, through the official client:
it cordons, evicts through the Eviction subresource as its PodDisruptionBudgets allow, retries a
429 until its timeout, then names what is left (or deletes it, forced), and leaves DaemonSet and
mirror pods alone."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.hardware import PollSchedule
from provisioner.kube.drain import EVICTION_RETRY, POLLING, DrainResult, drain, uses_gpu
from tests.kube.workloads import NS, Cluster, wait_for

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
EVERY_20_MS = PollSchedule(first=0.02, factor=1.0, ceiling=0.02)  # the drain's waits, kept short
FAST = {"retry": EVERY_20_MS, "polling": EVERY_20_MS}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "sandbox")  # its components run only when a test scans
    yield made
    made.stop()


def _running(cluster: Cluster, app: str) -> dict[str, str]:
    """The app's pods that run and are not terminating, by name -> node."""
    return {
        name: pod["spec"]["nodeName"]
        for name, pod in cluster.pods(app).items()
        if pod["status"]["phase"] == "Running" and not pod["metadata"].get("deletionTimestamp")
    }


def _in_background(work: Any) -> tuple[threading.Thread, list[Any]]:
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(work()), daemon=True)
    thread.start()
    return thread, done


def test_a_budget_of_one_disruption_is_honoured_one_eviction_at_a_time(cluster: Cluster) -> None:
    first, second = cluster.node_group("a", "g5.xlarge", 2)
    cluster.deployment("web", 3, group="a")
    cluster.scan()
    assert set(_running(cluster, "web").values()) == {first}  # the scheduler does not spread
    cluster.budget("web", "web", maxUnavailable=1)
    lines: list[str] = []
    thread, done = _in_background(
        lambda: drain(cluster.tool(), [first], timeout=60, progress=lines.append, **FAST)
    )

    def said(word: str) -> int:
        return sum(word in line for line in lines)

    for turn in (1, 2, 3):
        # Until the next scan nothing changes: the budget lets one eviction through, refuses the rest.
        assert wait_for(lambda t=turn: said(" evicted from ") == t and said(" not evicted yet") == 2), lines
        pods = cluster.pods("web")
        terminating = [n for n, p in pods.items() if p["metadata"].get("deletionTimestamp")]
        assert len(terminating) == 1 and len(_running(cluster, "web")) == 2  # one unavailable, never two
        assert cluster.budget_status("web")["disruptionsAllowed"] == 0
        cluster.scan()  # the kubelet stops it, its replacement starts on the second node
    thread.join(10)
    result: DrainResult = done[0]
    assert result.ok and [p.status for p in result.pods] == ["evicted"] * 3
    assert set(_running(cluster, "web").values()) == {second}
    assert lines[0] == f"node {first} cordoned"
    refused = [line for line in lines if " not evicted yet" in line]
    # the budget's status as the eviction took from it, before its controller counted again
    assert all(
        line.endswith(f"{VIOLATION} The disruption budget web needs 2 healthy pods and has 3 currently")
        for line in refused
    )


def _two_pods_no_disruption(cluster: Cluster) -> tuple[str, list[str]]:
    (node,) = cluster.node_group("a", "g5.xlarge", 1)
    cluster.deployment("web", 2)
    cluster.scan()
    cluster.budget("web", "web", minAvailable=2)
    return node, sorted(_running(cluster, "web"))


def test_a_refused_eviction_is_tried_again_soon_then_never_more_often_than_kubectl():
    """Karpenter's doubling from 0.1 s, up to kubectl drain's 5 s between tries; an evicted pod is
    looked at on the same doubling up to kubectl's waitForDelete second."""
    for schedule, ceiling in ((EVICTION_RETRY, 5.0), (POLLING, 1.0)):
        waited, intervals = 0.0, []
        for _ in range(12):
            intervals.append(schedule.interval(waited))
            waited += intervals[-1]
        doubling = [0.1 * 2**n for n in range(12)]
        assert intervals == pytest.approx([min(d, ceiling) for d in doubling])


def test_a_budget_that_allows_none_blocks_the_drain_at_its_timeout_and_nothing_is_deleted(
    cluster: Cluster,
) -> None:
    node, pods = _two_pods_no_disruption(cluster)
    lines: list[str] = []
    result = drain(cluster.tool(), [node], timeout=1.0, progress=lines.append, **FAST)
    assert not result.ok
    why = f"{VIOLATION} The disruption budget web needs 2 healthy pods and has 2 currently"
    assert sorted((p.name, p.node, p.status, p.message) for p in result.pods) == [
        (pod, node, "blocked", why) for pod in pods
    ]
    assert f"{NS}/{pods[0]} blocked: {why}" in result.problems()
    assert sorted(_running(cluster, "web")) == pods  # nothing evicted, nothing deleted
    assert cluster.core.read_node(node).spec.unschedulable is True
    # one line per pod when first refused (not each retry), one when given up on; no \r
    assert sorted(line for line in lines if "not evicted yet" in line) == [
        f"pod {NS}/{pod} not evicted yet, trying again, at most 0.02s apart: {why}" for pod in pods
    ]
    assert sorted(line for line in lines if " blocked: " in line) == [
        f"pod {NS}/{pod} blocked: {why}" for pod in pods
    ]
    assert not any("\r" in line or "\n" in line for line in lines)


def test_forced_the_pods_a_budget_kept_are_deleted_at_the_timeout(cluster: Cluster) -> None:
    node, pods = _two_pods_no_disruption(cluster)
    lines: list[str] = []
    result = drain(cluster.tool(), [node], timeout=1.0, force=True, progress=lines.append, **FAST)
    assert result.ok
    assert sorted((p.name, p.status) for p in result.pods) == [(pod, "forced") for pod in pods]
    assert all("The disruption budget web needs 2" in p.message for p in result.pods)
    assert not set(cluster.pods("web")) & set(pods)  # deleted; their replacements wait (cordoned)
    assert sorted(line.split(" forced off")[0] for line in lines if " forced off " in line) == [
        f"pod {NS}/{pod}" for pod in pods
    ]


def _bound_pod(cluster: Cluster, node: str, name: str, **metadata: Any) -> None:
    body = {
        "metadata": {"name": name, **metadata},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    cluster.core.create_namespaced_pod(NS, body)


@pytest.fixture
def busy_node(cluster: Cluster) -> str:
    """One node running a Deployment's pod, a GPU Deployment's, a DaemonSet's, a mirror pod and a
    finished pod."""
    (node,) = cluster.node_group("a", "g5.xlarge", 1)
    cluster.deployment("web", 1)
    cluster.deployment("train", 1, gpus=1)
    # what the DaemonSet controller makes: a pod it controls, bound to the node
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": str(uuid.uuid4())}
    _bound_pod(cluster, node, "agent-x7k2p", ownerReferences=[{**owner, "controller": True}])
    _bound_pod(cluster, node, f"static-{node}", annotations={"kubernetes.io/config.mirror": "0f3c"})
    _bound_pod(cluster, node, "job-done")
    cluster.kube.finish_pod(NS, "job-done")
    cluster.scan()
    return node


def _names(result: DrainResult, status: str) -> list[str]:
    return sorted(p.name.split("-")[0] for p in result.pods if p.status == status)


def test_daemon_set_and_mirror_pods_are_left_and_finished_ones_ignored(
    cluster: Cluster, busy_node: str
) -> None:
    thread, done = _in_background(lambda: drain(cluster.tool(), [busy_node], timeout=30, **FAST))
    assert wait_for(
        lambda: all(
            p["metadata"].get("deletionTimestamp")
            for a in ("web", "train")
            for p in cluster.pods(a).values()
            if p["spec"].get("nodeName") == busy_node
        )
    )
    cluster.scan()
    thread.join(10)
    result = done[0]
    assert result.ok and _names(result, "evicted") == ["train", "web"]
    assert [(p.name, p.message) for p in result.pods if p.status == "left"] == [
        ("agent-x7k2p", "DaemonSet-managed"),
        (f"static-{busy_node}", "mirror pod"),
    ]
    still = {
        p.metadata.name
        for p in cluster.core.list_namespaced_pod(NS, field_selector=f"spec.nodeName={busy_node}").items
    }
    assert still == {"agent-x7k2p", f"static-{busy_node}", "job-done"}


def test_only_the_pods_a_predicate_selects_are_evicted(cluster: Cluster, busy_node: str) -> None:
    thread, done = _in_background(
        lambda: drain(cluster.tool(), [busy_node], timeout=30, only=uses_gpu, **FAST)
    )
    assert wait_for(
        lambda: any(p["metadata"].get("deletionTimestamp") for p in cluster.pods("train").values())
    )
    cluster.scan()
    thread.join(10)
    assert [(p.name.split("-")[0], p.status) for p in done[0].pods] == [("train", "evicted")]
    assert list(_running(cluster, "web").values()) == [busy_node]


def test_an_eviction_refused_otherwise_than_by_429_fails_that_pod_with_the_api_s_words(
    cluster: Cluster,
) -> None:
    (node,) = cluster.node_group("a", "g5.xlarge", 1)
    cluster.deployment("web", 1)
    cluster.scan()
    cluster.budget("one", "web", maxUnavailable=1)
    cluster.budget("two", "web", minAvailable=0)
    result = drain(cluster.tool(), [node], timeout=5, **FAST)
    (pod,) = result.pods
    assert pod.status == "failed" and not result.ok
    assert pod.message.startswith("500 ") and pod.message.endswith(
        ": This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )
    assert list(_running(cluster, "web").values()) == [node]


@pytest.mark.parametrize(
    ("spec", "gpu"),
    [
        ({"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}, True),
        ({"containers": [{"resources": {"requests": {"nvidia.com/mig-1g.5gb": "2"}}}]}, True),
        ({"containers": [{"resources": {"limits": {"nvidia.com/gpu.shared": 1}}}]}, True),
        ({"containers": [{"resources": {"limits": {"aliyun.com/gpu-mem": 4}}}]}, True),
        ({"containers": [{}], "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}, True),
        ({"containers": [{}], "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}, True),
        ({"containers": [{"resources": {"limits": {"nvidia.com/gpu": 0, "cpu": "2"}}}]}, False),
        ({"containers": [{"resources": {"limits": {"example.com/fpga": 1}}}]}, False),
        ({"containers": [{}]}, False),
    ],
)
def test_which_pods_use_gpus(spec: dict[str, Any], gpu: bool) -> None:
    assert uses_gpu({"metadata": {"name": "p"}, "spec": spec}) is gpu


def test_a_pod_no_controller_manages_is_left_blocked_unless_forced(cluster: Cluster) -> None:
    (node,) = cluster.node_group("a", "g5.xlarge", 1)
    _bound_pod(cluster, node, "notebook")  # a bare pod: evicted, nothing would make it again
    cluster.scan()
    result = drain(cluster.tool(), [node], timeout=5, **FAST)
    assert [(p.name, p.status) for p in result.pods] == [("notebook", "blocked")]
    assert "no controller manages it" in result.problems() and not result.ok
    assert cluster.core.read_namespaced_pod("notebook", NS).metadata.deletion_timestamp is None
    thread, done = _in_background(lambda: drain(cluster.tool(), [node], timeout=5, force=True, **FAST))
    assert wait_for(lambda: cluster.core.read_namespaced_pod("notebook", NS).metadata.deletion_timestamp)
    cluster.scan()
    thread.join(10)
    assert [(p.name, p.status) for p in done[0].pods] == [("notebook", "evicted")]


def test_the_tool_marks_the_nodes_it_cordons_and_unmarks_them_when_it_uncordons(cluster: Cluster) -> None:
    from provisioner.kube.drain import cordon, cordoned_by_us, uncordon

    (node,) = cluster.node_group("a", "g5.xlarge", 1)
    kube = cluster.tool()
    cordon(kube, node)
    assert cordoned_by_us(kube.node(node)) and kube.node(node)["spec"]["unschedulable"] is True
    uncordon(kube, node)
    assert not cordoned_by_us(kube.node(node)) and not kube.node(node)["spec"].get("unschedulable")
    cluster.kubectl("cordon", node)  # a person's cordon is not the tool's
    assert not cordoned_by_us(kube.node(node))
