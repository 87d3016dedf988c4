"""Issue 27's promise, as a user meets it: on every cloud, a pool at zero nodes that apply made,
a pod placed with `provisioner place --manifest` and applied with kubectl goes from Pending to
Running on a node the cluster's autoscaler added for it; `kubectl get events` says why."""

from __future__ import annotations

import json
import time

import pytest

from tests.clis.conftest import Served, ok

FLEET = """\
clusters:
  - name: azure
    cloud: aks
    subscription: 33333333-3333-3333-3333-333333333333
    resourceGroup: ml
    cluster: zero-aks
    pools:
      - name: t4ts
        instanceType: Standard_NC4as_T4_v3
        gpu: {sharing: time-slicing, replicas: 4}
        nodes: {min: 0, max: 2}
  - name: gcp
    cloud: gke
    project: zero-project
    location: europe-west4-a
    cluster: zero-gke
    pools:
      - name: l4-share
        instanceType: g2-standard-8
        gpu: {sharing: time-slicing, replicas: 4}
        nodes: {min: 0, max: 2}
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: zero-eks
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
    pools:
      - name: a100-mig
        instanceType: p4d.24xlarge
        gpu: {mig: 1g.5gb}
        nodes: {min: 0, max: 2}
  - name: ali
    cloud: ack
    region: cn-hangzhou
    clusterId: c33333333333333333333333333333333
    vswitches: [vsw-bp1zero]
    kubeContext: ali
    pools:
      - name: a10-cgpu
        instanceType: ecs.gn7i-c8g1.2xlarge
        gpu: {sharing: memory, isolation: memory}
        nodes: {min: 0, max: 2}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: notebook}
spec:
  containers:
    - {name: main, image: busybox, command: [sleep, infinity]}
"""
# What each pod asks for: a slice of the cluster's one pool.
REQUESTS = {
    "azure": ["--gpu-memory", "4GB"],
    "gcp": ["--gpu-memory", "4GB"],
    "aws": ["--mig", "1g.5gb"],
    "ali": ["--gpu-memory", "4GiB"],
}


@pytest.fixture(scope="module")
def applied(served: Served) -> Served:
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))
    ok(served.provisioner("sync", str(served.fleet)))
    return served


@pytest.mark.parametrize("cluster", sorted(REQUESTS))
def test_a_placed_pod_starts_a_node_of_a_pool_at_zero(applied: Served, cluster: str):
    pod = applied.directory.parent / f"pod-{cluster}.yaml"
    pod.write_text(POD, encoding="utf-8")
    placed = json.loads(ok(applied.provisioner("place", "--cluster", cluster, *REQUESTS[cluster], "--json")))
    assert placed["capacity"]["tier"] == "growable", placed  # no node yet: it must grow
    manifest = applied.directory.parent / f"placed-{cluster}.yaml"
    manifest.write_text(
        ok(applied.provisioner("place", "--cluster", cluster, *REQUESTS[cluster], "--manifest", str(pod)))
    )
    assert (
        ok(applied.kubectl(cluster, "get", "nodes", "-l", _pool_label(placed), "-o", "name")) == ""
    )  # at zero
    ok(applied.kubectl(cluster, "apply", "-f", str(manifest)))
    deadline = time.monotonic() + 30
    phase = ""
    while time.monotonic() < deadline and phase != "Running":
        phase = ok(applied.kubectl(cluster, "get", "pod", "notebook", "-o", "jsonpath={.status.phase}"))
        time.sleep(0.2)
    assert phase == "Running"
    node = ok(applied.kubectl(cluster, "get", "pod", "notebook", "-o", "jsonpath={.spec.nodeName}"))
    assert node in ok(applied.kubectl(cluster, "get", "nodes", "-l", _pool_label(placed), "-o", "name"))
    events = ok(applied.kubectl(cluster, "get", "events", "--field-selector", "involvedObject.name=notebook"))
    assert "TriggeredScaleUp" in events and "pod triggered scale-up: [{" in events
    assert "Scheduled" in events


def _pool_label(placed: dict) -> str:
    """The node selector's pool label, as a kubectl label selector."""
    return ",".join(f"{key}={value}" for key, value in placed["nodeSelector"].items())
