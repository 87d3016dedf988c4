"""The MIG manager on EKS nodes, through the official client: a change of nvidia.com/mig.config is
`pending` (the device plugin paused, no GPUs advertised) for the sandbox's op-seconds on its
engine's clock, then `success` with the new layout, or `failed` with nothing advertised under its
fault rate; it never cordons the node, and pods already holding GPUs keep running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kube.workloads import NS, Cluster

MIG, STATE, DEPLOY = (
    "nvidia.com/mig.config",
    "nvidia.com/mig.config.state",
    "nvidia.com/gpu.deploy.device-plugin",
)
OP_SECONDS = 600.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "sandbox")
    yield made
    made.stop()


def _node(cluster: Cluster) -> str:
    (node,) = cluster.node_group("mig", "p4d.24xlarge", 1, {MIG: "all-1g.5gb"})  # 8 A100 40GB
    cluster.engine.op_seconds = OP_SECONDS  # from now on each reconfiguration takes this long
    return node


def _shown(cluster: Cluster, node: str) -> tuple[str, str, str | None, bool]:
    read = cluster.core.read_node(node)
    labels = read.metadata.labels
    return (
        labels[STATE],
        labels[DEPLOY],
        read.status.allocatable.get("nvidia.com/gpu"),
        bool(read.spec.unschedulable),
    )


def _relabel(cluster: Cluster, node: str, config: str) -> None:
    cluster.core.patch_node(node, {"metadata": {"labels": {MIG: config}}})  # kubectl label --overwrite


def _holding_pod(cluster: Cluster, node: str) -> dict[str, Any]:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 7}}}
    cluster.core.create_namespaced_pod(
        NS, {"metadata": {"name": "trainer"}, "spec": {"containers": [container]}}
    )
    return cluster.core.read_namespaced_pod("trainer", NS)


def test_a_mig_change_is_pending_for_op_seconds_then_succeeds_and_running_pods_stay(cluster: Cluster) -> None:
    node = _node(cluster)
    assert _shown(cluster, node) == ("success", "true", "56", False)  # the layout it joined with
    assert _holding_pod(cluster, node).status.phase == "Running"

    _relabel(cluster, node, "all-3g.20gb")
    assert _shown(cluster, node) == ("pending", "paused-for-mig-change", "0", False)  # not cordoned
    cluster.engine.advance(OP_SECONDS / 2)
    assert _shown(cluster, node)[0] == "pending"
    assert cluster.core.read_namespaced_pod("trainer", NS).status.phase == "Running"  # the kubelet keeps it

    cluster.engine.advance(OP_SECONDS / 2)
    assert _shown(cluster, node) == ("success", "true", "16", False)  # 8 x 2 3g.20gb
    labels = cluster.core.read_node(node).metadata.labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"
    assert cluster.core.read_namespaced_pod("trainer", NS).status.phase == "Running"


def test_a_config_it_cannot_validate_fails_at_once_and_keeps_the_layout(cluster: Cluster) -> None:
    node = _node(cluster)
    _relabel(cluster, node, "all-9g.99gb")
    assert _shown(cluster, node) == ("failed", "true", "56", False)


def test_under_the_fault_rate_a_change_fails_and_advertises_nothing_until_the_next_change(
    cluster: Cluster,
) -> None:
    node = _node(cluster)
    cluster.engine.fault_rate = 1.0  # every reconfiguration fails (the kube API draws no request faults)
    _relabel(cluster, node, "all-2g.10gb")
    assert _shown(cluster, node)[0] == "pending"
    cluster.engine.advance(OP_SECONDS)
    # mig-parted returns before restarting the GPU clients: the device plugin stays paused
    assert _shown(cluster, node) == ("failed", "paused-for-mig-change", "0", False)

    cluster.engine.fault_rate = 0.0
    _relabel(cluster, node, "all-1g.5gb")  # the next change is a new attempt
    assert _shown(cluster, node)[0] == "pending"
    cluster.engine.advance(OP_SECONDS)
    assert _shown(cluster, node) == ("success", "true", "56", False)


def test_a_stalled_mig_manager_stays_pending_until_the_label_changes_again(cluster: Cluster) -> None:
    node = _node(cluster)
    _relabel(cluster, node, "all-3g.20gb")
    cluster.kube.stall_mig(node)  # NVIDIA/gpu-operator#2833: it gave up waiting for the GPU clients
    cluster.engine.advance(10 * OP_SECONDS)
    assert _shown(cluster, node) == ("pending", "paused-for-mig-change", "0", False)
    _relabel(cluster, node, "all-2g.10gb")
    cluster.engine.advance(OP_SECONDS)
    assert _shown(cluster, node) == ("success", "true", "24", False)  # 8 x 3 2g.10gb


def test_fault_draws_repeat_under_the_seed(cluster: Cluster) -> None:
    """The same seed, cluster, node and change draw the same outcome, whatever else was asked."""
    from provisioner.sandbox.kube.migmanager import MigManager

    def outcomes(noise: int) -> list[str]:
        clock = [0.0]
        manager = MigManager(lambda: clock[0], lambda: 1.0, lambda: 0.5, 5, "fleet")
        found = []
        for i in range(12):
            manager.report(f"node-{i}", "all-1g.5gb", True)
            for _ in range(noise):  # other nodes' changes in between
                manager.report(f"other-{_}", "all-disabled", True)
            manager.report(f"node-{i}", "all-3g.20gb", True)
        clock[0] = 2.0
        for i in range(12):
            found.append(manager.report(f"node-{i}", "all-3g.20gb", True).state)
        return found

    first = outcomes(0)
    assert first == outcomes(3)
    assert set(first) == {"success", "failed"}  # rate 0.5 over 12 nodes: both happen under seed 5
