"""provisioner.kube.drain's reconfigure_nodes against the sandbox's EKS nodes and their MIG manager
(its components running as a cluster's do, a scan each 50 ms; a reconfiguration taking 0.2 s):
node by node, cordoned, drained of its GPU pods, relabelled, waited for, uncordoned; a node that
fails or sticks stops the rollout, left cordoned, and the later nodes keep their layout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.hardware import PollSchedule
from provisioner.kube.drain import WaitFor, reconfigure_nodes
from tests.kube.workloads import Cluster, wait_for

MIG, STATE = "nvidia.com/mig.config", "nvidia.com/mig.config.state"
OLD, NEW = "all-1g.5gb", "all-3g.20gb"
EVERY_20_MS = PollSchedule(first=0.02, factor=1.0, ceiling=0.02)  # the drain's waits, kept short
FAST = {"timeout": 10.0, "drain_timeout": 10.0, "retry": EVERY_20_MS, "polling": EVERY_20_MS}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "sandbox", scan_interval=0.05)
    yield made
    made.stop()


@pytest.fixture
def mig_nodes(cluster: Cluster) -> list[str]:
    """Three p4d.24xlarge (8 A100 40GB each) in 1g.5gb, and a pod holding one of its GPUs."""
    nodes = cluster.node_group("mig", "p4d.24xlarge", 3, {MIG: OLD})
    cluster.engine.op_seconds = 0.2  # each MIG reconfiguration from now on
    cluster.deployment("train", 1, gpus=1, group="mig")
    assert wait_for(lambda: [p for p in cluster.pods("train").values() if p["status"]["phase"] == "Running"])
    return nodes


def _shown(cluster: Cluster, node: str) -> tuple[str, str, str, bool]:
    read = cluster.core.read_node(node)
    labels = read.metadata.labels
    return (
        labels[MIG],
        labels[STATE],
        read.status.allocatable["nvidia.com/gpu"],
        bool(read.spec.unschedulable),
    )


def test_a_mig_change_rolls_node_by_node_and_the_others_keep_their_layout_until_their_turn(
    cluster: Cluster, mig_nodes: list[str]
) -> None:
    (train,) = cluster.pods("train")
    lines: list[str] = []
    at_turn: list[dict[str, tuple[str, bool]]] = []

    def progress(line: str) -> None:
        lines.append(line)
        if " labelled " in line:  # each node's turn, as its label is set: what every node shows
            at_turn.append({n: (_shown(cluster, n)[0], _shown(cluster, n)[3]) for n in mig_nodes})

    outcomes = reconfigure_nodes(
        cluster.tool(), mig_nodes, {MIG: NEW}, wait_for=WaitFor.mig_success(), progress=progress, **FAST
    )
    assert [(o.node, o.status, o.cordoned) for o in outcomes] == [
        (n, "reconfigured", False) for n in mig_nodes
    ]
    for turn, shown in enumerate(at_turn):
        assert shown == {
            n: (NEW if i <= turn else OLD, i == turn)  # only the node in its turn is cordoned
            for i, n in enumerate(mig_nodes)
        }
    assert len(at_turn) == 3
    assert [_shown(cluster, n) for n in mig_nodes] == [(NEW, "success", "16", False)] * 3  # 8 x 2 3g.20gb
    # the GPU pod was evicted from the node it ran on, not deleted
    drained = [p for o in outcomes for p in o.drain.pods if o.drain]
    assert drained and drained[0].name == train and drained[0].status == "evicted"
    assert [line for line in lines if line.startswith(f"node {mig_nodes[0]} ")] == [
        f"node {mig_nodes[0]} cordoned",
        f"node {mig_nodes[0]} labelled {MIG}={NEW}",
        f"node {mig_nodes[0]} done, uncordoned",
    ]


def test_nodes_already_labelled_and_done_are_skipped_without_a_drain(
    cluster: Cluster, mig_nodes: list[str]
) -> None:
    lines: list[str] = []
    outcomes = reconfigure_nodes(
        cluster.tool(), mig_nodes, {MIG: OLD}, wait_for=WaitFor.mig_success(), progress=lines.append, **FAST
    )
    assert [o.status for o in outcomes] == ["skipped"] * 3
    assert lines == [f"node {n} skipped: already labelled and done" for n in mig_nodes]
    assert len([p for p in cluster.pods("train").values() if p["status"]["phase"] == "Running"]) == 1


def _untouched(cluster: Cluster, node: str) -> bool:
    return _shown(cluster, node) == (OLD, "success", "56", False)


def test_a_failed_node_stops_the_rollout_cordoned_and_the_later_nodes_are_untouched(
    cluster: Cluster, mig_nodes: list[str]
) -> None:
    first, second, third = mig_nodes
    cluster.kube.fail_mig(second)  # its MIG manager reports failed
    outcomes = reconfigure_nodes(
        cluster.tool(), mig_nodes, {MIG: NEW}, wait_for=WaitFor.mig_success(), **FAST
    )
    assert [o.status for o in outcomes] == ["reconfigured", "failed", "untouched"]
    assert outcomes[1].message == f"{STATE}=failed; left cordoned" and outcomes[1].cordoned
    assert cluster.core.read_node(second).spec.unschedulable is True
    assert _shown(cluster, first)[:2] == (NEW, "success")
    assert _untouched(cluster, third)


def test_under_the_fault_rate_a_batch_fails_after_its_reconfiguration_and_the_next_is_untouched(
    cluster: Cluster, mig_nodes: list[str]
) -> None:
    cluster.engine.fault_rate = 1.0  # every MIG reconfiguration fails, after its op-seconds pending
    lines: list[str] = []
    outcomes = reconfigure_nodes(
        cluster.tool(),
        mig_nodes,
        {MIG: NEW},
        wait_for=WaitFor.mig_success(),
        max_unavailable=2,
        progress=lines.append,
        **FAST,
    )
    assert [(o.status, o.message) for o in outcomes[:2]] == [("failed", f"{STATE}=failed; left cordoned")] * 2
    assert outcomes[2].status == "untouched"
    assert all(cluster.core.read_node(n).spec.unschedulable for n in mig_nodes[:2])
    assert _untouched(cluster, mig_nodes[2])
    assert lines[-1] == f"rollout stopped; not started: {mig_nodes[2]}"


def test_a_stalled_mig_manager_times_out_as_stuck_naming_the_known_bug_and_the_paused_operands(
    cluster: Cluster, mig_nodes: list[str]
) -> None:
    cluster.kube.stall_mig(mig_nodes[0])  # NVIDIA/gpu-operator#2833 on its next change
    outcomes = reconfigure_nodes(
        cluster.tool(), mig_nodes, {MIG: NEW}, wait_for=WaitFor.mig_success(), **{**FAST, "timeout": 0.5}
    )
    assert [o.status for o in outcomes] == ["failed", "untouched", "untouched"]
    message = outcomes[0].message
    assert message.startswith(f"stuck: {STATE}=pending after 0.5s; ")
    assert "NVIDIA/gpu-operator#2833" in message
    assert "nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change" in message
    assert message.endswith("; left cordoned")
    assert all(_untouched(cluster, n) for n in mig_nodes[1:])


def test_a_gpu_pod_its_budget_keeps_fails_the_node_before_its_label_changes_unless_forced(
    cluster: Cluster, mig_nodes: list[str]
) -> None:
    (train,) = cluster.pods("train")
    node = cluster.pods("train")[train]["spec"]["nodeName"]
    cluster.budget("train", "train", minAvailable=1)
    rest = [n for n in mig_nodes if n != node]
    outcomes = reconfigure_nodes(
        cluster.tool(),
        [node, *rest],
        {MIG: NEW},
        wait_for=WaitFor.mig_success(),
        **{**FAST, "drain_timeout": 0.5},
    )
    assert [o.status for o in outcomes] == ["failed", "untouched", "untouched"]
    assert outcomes[0].message.startswith(f"not drained: ml/{train} blocked: Cannot evict pod")
    assert "The disruption budget train needs 1 healthy pods" in outcomes[0].message
    assert _shown(cluster, node) == (OLD, "success", "56", True)  # its layout kept, cordoned
    assert list(cluster.pods("train")) == [train]

    outcomes = reconfigure_nodes(
        cluster.tool(),
        [node],
        {MIG: NEW},
        wait_for=WaitFor.mig_success(),
        force=True,
        **{**FAST, "drain_timeout": 0.5},
    )
    assert [o.status for o in outcomes] == ["reconfigured"]
    assert [(p.name, p.status) for p in outcomes[0].drain.pods] == [(train, "forced")]
    assert _shown(cluster, node) == (NEW, "success", "16", False)


def _device_plugin_configs(cluster: Cluster, replicas: int) -> None:
    config = (
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        f"      - name: nvidia.com/gpu\n        replicas: {replicas}\n"
    )
    body: dict[str, Any] = {
        "metadata": {"name": "nvidia-device-plugin-configs"},
        "data": {f"time-sliced-{replicas}": config},
    }
    cluster.core.create_namespaced_config_map("gpu-operator", body)


def test_a_device_plugin_change_waits_for_the_count_it_should_advertise(cluster: Cluster) -> None:
    nodes = cluster.node_group("ts", "g5.xlarge", 2)  # one A10G each
    _device_plugin_configs(cluster, 4)
    label = {"nvidia.com/device-plugin.config": "time-sliced-4"}
    outcomes = reconfigure_nodes(
        cluster.tool(), nodes, label, wait_for=WaitFor.allocatable("nvidia.com/gpu", 4), **FAST
    )
    assert [o.status for o in outcomes] == ["reconfigured"] * 2
    assert [cluster.core.read_node(n).status.allocatable["nvidia.com/gpu"] for n in nodes] == ["4", "4"]

    outcomes = reconfigure_nodes(
        cluster.tool(),
        nodes,
        label,
        wait_for=WaitFor.allocatable("nvidia.com/gpu", 5),
        **{**FAST, "timeout": 0.3},
    )
    assert [o.status for o in outcomes] == ["failed", "untouched"]
    assert outcomes[0].message == "stuck: allocatable nvidia.com/gpu=4, expecting 5 after 0.3s; left cordoned"


def test_what_to_wait_for_is_one_thing_at_least() -> None:
    with pytest.raises(ValueError, match="WaitFor needs"):
        WaitFor()
    with pytest.raises(ValueError, match="WaitFor needs"):
        WaitFor(resource="nvidia.com/gpu")
