"""The pod garbage collector in the sandbox (sandbox/kube/podgc.py, kube-controller-manager's
gcOrphaned): a Deployment's pod whose node went with its pool, deleted or scaled down, is deleted
at the cluster's next scan, and its ReplicaSet makes it again, bound elsewhere or left Pending."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.drivers.registry import connect
from provisioner.pools import Scaling
from tests.kube.workloads import Cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "sandbox")
    yield made
    made.stop()


def _where(cluster: Cluster, app: str) -> dict[str, tuple[str, str]]:
    """The app's pods by name -> (phase, node)."""
    return {
        name: (pod["status"]["phase"], pod["spec"].get("nodeName") or "")
        for name, pod in cluster.pods(app).items()
    }


def test_a_pod_whose_pool_was_deleted_is_made_again_on_another_pool(cluster: Cluster) -> None:
    first = cluster.node_group("a", "g5.xlarge", 1)
    second = cluster.node_group("b", "g5.xlarge", 1)
    cluster.deployment("web", 1, gpus=1)
    cluster.scan()
    ((old, (phase, node)),) = _where(cluster, "web").items()
    assert phase == "Running"
    pool = "a" if node in first else "b"
    connect("eks", cluster.sandbox.directory).delete_pool(cluster.ref, pool)
    assert _where(cluster, "web") == {old: (phase, node)}  # no kubelet is left to end it

    cluster.scan()
    ((new, (phase, node)),) = _where(cluster, "web").items()
    assert new != old and phase == "Running"
    assert node in (second if pool == "a" else first)


def test_a_pod_whose_node_a_scale_down_removed_is_made_again_and_waits(cluster: Cluster) -> None:
    kept, removed = cluster.node_group("a", "g5.xlarge", 2)
    cluster.deployment("web", 2, gpus=1)  # one GPU a node: one pod on each
    cluster.scan()
    before = _where(cluster, "web")
    assert sorted(before.values()) == [("Running", kept), ("Running", removed)]
    (orphan,) = [name for name, (_, node) in before.items() if node == removed]
    driver = connect("eks", cluster.sandbox.directory)
    state = {p.name: p for p in driver.list_pools(cluster.ref)}["a"]
    driver.update_pool(cluster.ref, dataclasses.replace(state, scaling=Scaling.fixed(1)))
    assert (
        cluster.core.list_node(label_selector="eks.amazonaws.com/nodegroup=a").items[0].metadata.name == kept
    )

    cluster.scan()
    after = _where(cluster, "web")
    assert orphan not in after and len(after) == 2
    assert sorted(after.values()) == [("Pending", ""), ("Running", kept)]  # no GPU left for it
