"""Deployments and ReplicaSets in the sandbox, through kubectl and the official client: kubectl
apply makes a ReplicaSet `<deployment>-<pod-template-hash>` whose pods are `<rs>-<5 characters>`,
owned by it; kubectl scale resizes it; a changed template makes a new ReplicaSet and empties the
old; a deleted pod is made again; kubectl get prints deployments, replicasets and budgets as the
API server's printers do; deleting a Deployment takes what it owned."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiException

from provisioner.sandbox.kube.objects import NAME_ALPHABET
from tests.kube.workloads import NS, Cluster, ok

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: "IMAGE", ports: [{containerPort: 80}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: ml}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "sandbox")
    made.node_group("a", "g5.xlarge", 2)
    yield made
    made.stop()


def _apply(cluster: Cluster, tmp_path: Path, image: str) -> str:
    path = tmp_path / "web.yaml"
    path.write_text(MANIFEST.replace("IMAGE", image), encoding="utf-8")
    return ok(cluster.kubectl("apply", "-f", str(path)))


def _table(cluster: Cluster, *what: str) -> list[list[str]]:
    """kubectl get's lines split into words, without the AGE column's (it is a clock's)."""
    return [line.split()[:-1] for line in ok(cluster.kubectl("get", *what, "-n", NS)).splitlines()]


def test_kubectl_apply_makes_a_replica_set_and_its_pods_then_get_prints_them(
    cluster: Cluster, tmp_path: Path
) -> None:
    created = _apply(cluster, tmp_path, "nginx:1.25")
    assert created == "deployment.apps/web created\npoddisruptionbudget.policy/web created\n"
    (replica_set,) = cluster.apps.list_namespaced_replica_set(NS).items
    hashed = replica_set.metadata.labels["pod-template-hash"]
    assert replica_set.metadata.name == f"web-{hashed}" and set(hashed) <= set(NAME_ALPHABET)
    owner = replica_set.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("Deployment", "web", True)
    pods = cluster.pods("web")
    assert (
        all(re.fullmatch(rf"web-{hashed}-[{NAME_ALPHABET}]{{5}}", name) for name in pods) and len(pods) == 2
    )
    assert {p["status"]["phase"] for p in pods.values()} == {"Pending"}  # the scheduler has not run yet
    cluster.scan()

    assert _table(cluster, "deploy") == [
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE"],
        ["web", "2/2", "2", "2"],
    ]
    assert _table(cluster, "rs") == [
        ["NAME", "DESIRED", "CURRENT", "READY"],
        [f"web-{hashed}", "2", "2", "2"],
    ]
    assert _table(cluster, "pdb") == [
        ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS"],
        ["web", "N/A", "1", "1"],
    ]
    status = cluster.apps.read_namespaced_deployment("web", NS).status
    assert (status.replicas, status.ready_replicas, status.available_replicas, status.updated_replicas) == (
        2,
        2,
        2,
        2,
    )


def test_kubectl_scale_and_a_new_template_move_the_replicas(cluster: Cluster, tmp_path: Path) -> None:
    _apply(cluster, tmp_path, "nginx:1.25")
    cluster.scan()
    assert (
        ok(cluster.kubectl("scale", "deployment/web", "-n", NS, "--replicas=3"))
        == "deployment.apps/web scaled\n"
    )
    cluster.scan()
    assert len(cluster.pods("web")) == 3
    assert cluster.apps.read_namespaced_deployment_scale("web", NS).status.replicas == 3

    (old,) = [r.metadata.name for r in cluster.apps.list_namespaced_replica_set(NS).items]
    _apply(cluster, tmp_path, "nginx:1.27")  # back to the manifest's 2, with a new image
    cluster.scan()
    sizes = {r.metadata.name: r.spec.replicas for r in cluster.apps.list_namespaced_replica_set(NS).items}
    (new,) = set(sizes) - {old}
    assert sizes == {old: 0, new: 2}
    images = {p["spec"]["containers"][0]["image"] for p in cluster.pods("web").values()}
    assert images == {"nginx:1.27"}
    revision = cluster.apps.read_namespaced_replica_set(new, NS).metadata.annotations
    assert revision["deployment.kubernetes.io/revision"] == "2"


def test_a_deleted_pod_is_made_again_and_a_deleted_deployment_takes_its_own(
    cluster: Cluster, tmp_path: Path
) -> None:
    _apply(cluster, tmp_path, "nginx:1.25")
    cluster.scan()
    gone = sorted(cluster.pods("web"))[0]
    cluster.core.delete_namespaced_pod(gone, NS)
    pods = cluster.pods("web")
    assert gone not in pods and len(pods) == 2
    assert ok(cluster.kubectl("delete", "deployment", "web", "-n", NS)) == 'deployment.apps "web" deleted\n'
    cluster.scan()  # the kubelets stop the pods the garbage collector deleted
    assert cluster.apps.list_namespaced_replica_set(NS).items == [] and cluster.pods("web") == {}


def test_a_deployment_whose_selector_misses_its_template_is_refused(cluster: Cluster) -> None:
    body = {
        "metadata": {"name": "bad"},
        "spec": {
            "selector": {"matchLabels": {"app": "other"}},
            "template": {
                "metadata": {"labels": {"app": "bad"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    with pytest.raises(ApiException) as refused:
        cluster.apps.create_namespaced_deployment(NS, body)
    assert refused.value.status == 422
    assert (
        'Deployment.apps \\"bad\\" is invalid: spec.template.metadata.labels: Invalid value: '
        '{\\"app\\":\\"bad\\"}: `selector` does not match template `labels`'
    ) in refused.value.body


def test_kubectl_apply_replaces_a_budget_s_selector_whole(cluster: Cluster, tmp_path: Path) -> None:
    _apply(cluster, tmp_path, "nginx:1.25")
    path = tmp_path / "budget.yaml"
    path.write_text(MANIFEST.split("---\n")[1].replace("{app: web}", "{tier: front}"), encoding="utf-8")
    ok(cluster.kubectl("apply", "-f", str(path)))
    selector = cluster.policy.read_namespaced_pod_disruption_budget("web", NS).spec.selector
    assert selector.match_labels == {"tier": "front"}  # patchStrategy replace: app=web is gone
