"""kubectl cordon, uncordon and drain against the sandbox, its components running as a cluster's
do (a scan each 50 ms): drain cordons, evicts through the Eviction subresource, retries a 429
every 5 s as kubectl does, and gives up at --timeout with the pods it could not evict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube.workloads import NS, Cluster, ok, wait_for

DRAIN = ("--ignore-daemonsets", "--delete-emptydir-data")
RETRY = "(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "sandbox", scan_interval=0.05)
    yield made
    made.stop()


def _placed(cluster: Cluster, app: str, count: int) -> dict[str, str]:
    """The app's pods by name -> node, once `count` of them run and none terminates."""

    def running() -> dict[str, str]:
        pods = cluster.pods(app)
        placed = {
            n: p["spec"]["nodeName"]
            for n, p in pods.items()
            if p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")
        }
        return placed if len(placed) == count == len(pods) else {}

    found = wait_for(running)
    assert found, cluster.pods(app)
    return found


def test_kubectl_cordon_marks_the_node_and_keeps_new_pods_off_it(cluster: Cluster) -> None:
    (node,) = cluster.node_group("a", "g5.xlarge", 1)
    assert ok(cluster.kubectl("cordon", node)) == f"node/{node} cordoned\n"
    read = cluster.core.read_node(node)
    assert read.spec.unschedulable is True
    assert [(t.key, t.effect) for t in read.spec.taints] == [
        ("node.kubernetes.io/unschedulable", "NoSchedule")
    ]
    assert "Ready,SchedulingDisabled" in ok(cluster.kubectl("get", "node", node))
    cluster.deployment("web", 1, gpus=1)
    (pod,) = wait_for(lambda: [p for p in cluster.pods("web").values() if p["status"].get("conditions")])
    assert pod["status"]["phase"] == "Pending"
    assert "node(s) were unschedulable" in pod["status"]["conditions"][0]["message"]
    assert ok(cluster.kubectl("uncordon", node)) == f"node/{node} uncordoned\n"
    assert cluster.core.read_node(node).spec.taints is None
    assert list(_placed(cluster, "web", 1).values()) == [node]


def test_kubectl_drain_waits_out_a_budget_that_allows_one_eviction_at_a_time(cluster: Cluster) -> None:
    first, second = cluster.node_group("a", "g5.xlarge", 2)
    cluster.deployment("web", 2, group="a")  # both land on the first node (the scheduler does not spread)
    assert set(_placed(cluster, "web", 2).values()) == {first}
    cluster.budget("web", "web", maxUnavailable=1)

    done = cluster.kubectl("drain", first, *DRAIN, "--timeout", "60s")
    assert done.returncode == 0, done.stderr
    evicted = sorted(line.split("/", 1)[1] for line in done.stdout.splitlines() if line.endswith(" evicted"))
    assert len(evicted) == 2 and done.stdout.endswith(f"node/{first} drained\n")
    # kubectl evicts both at once: the budget lets one go, the other waits for its replacement
    # (unless the replacement is Ready before kubectl's second request: a busy machine's timing)
    retried = [line for line in done.stderr.splitlines() if RETRY in line]
    assert len(retried) <= 1
    for line in retried:
        assert line.startswith('error when evicting pods/"web-') and f'-n "{NS}"' in line
    assert set(_placed(cluster, "web", 2).values()) == {second}


def test_kubectl_drain_gives_up_at_its_timeout_when_the_budget_allows_none(cluster: Cluster) -> None:
    (node,) = cluster.node_group("a", "g5.xlarge", 1)
    cluster.deployment("web", 2)
    pods = sorted(_placed(cluster, "web", 2))
    cluster.budget("web", "web", minAvailable=2)

    done = cluster.kubectl("drain", node, *DRAIN, "--timeout", "5s")
    assert done.returncode == 1
    assert done.stdout.startswith(f"node/{node} cordoned\n")
    for pod in pods:
        assert f'error when evicting pods/"{pod}" -n "{NS}" {RETRY}' in done.stderr
        assert f'error when evicting pods/"{pod}" -n "{NS}": global timeout reached: 5s' in done.stderr
    assert f'error: unable to drain node "{node}"' in done.stderr
    assert sorted(_placed(cluster, "web", 2)) == pods  # nothing was evicted
    assert cluster.budget_status("web")["disruptionsAllowed"] == 0
