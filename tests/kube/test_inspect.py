"""inspect end to end: pods bound across nodes through the real client, exact allocated / total."""

from __future__ import annotations

import json
from typing import Any

from provisioner.kube.inspect import quantity
from tests.kube.conftest import KubeWorld

SHARED = "nvidia.com/gpu.shared"


def _pod(name: str, node: str, *, requests: int | None = None, limits: int | None = None, init: int = 0):
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = {SHARED: str(requests)}
    if limits is not None:
        resources["limits"] = {SHARED: str(limits)}
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "main", "image": "cuda:12", "resources": resources}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if init:
        limit = {SHARED: str(init)}
        spec["initContainers"] = [{"name": "warm", "image": "cuda:12", "resources": {"limits": limit}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_inspect_totals_what_pods_hold_per_node_pool_and_cluster(applied: KubeWorld):
    first, second = applied.node_names("azure", "kubernetes.azure.com/agentpool=t4")
    (eks_node,) = applied.node_names("aws", "eks.amazonaws.com/nodegroup=shared")
    azure, aws = applied.core("azure"), applied.core("aws")
    azure.create_namespaced_pod("ml", _pod("train", first, requests=3, limits=3))
    azure.create_namespaced_pod("ml", _pod("limits-only", first, limits=2))
    azure.create_namespaced_pod("etl", _pod("with-init", second, limits=1, init=4))  # counts 4
    azure.create_namespaced_pod("ml", _pod("done", second, limits=5))
    assert applied.sandbox.kube is not None
    applied.sandbox.kube.cluster("azure").finish_pod("ml", "done")  # finished: holds nothing
    refused = azure.create_namespaced_pod("ml", _pod("too-big", second, limits=20))
    assert refused.status.phase == "Failed"  # the kubelet refused it: holds nothing either
    aws.create_namespaced_pod("default", _pod("infer", eks_node, limits=1))

    result = applied.run("inspect", str(applied.fleet), "--json", "-d")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    shared_nodes = [n for n in document["nodes"] if n["resource"] == SHARED]
    assert shared_nodes == [
        {
            "cluster": "azure",
            "pool": "t4",
            "node": first,
            "resource": SHARED,
            "allocated": 5,
            "total": 10,
            "pods": [{"pod": "ml/limits-only", "amount": 2}, {"pod": "ml/train", "amount": 3}],
        },
        {
            "cluster": "azure",
            "pool": "t4",
            "node": second,
            "resource": SHARED,
            "allocated": 4,
            "total": 10,
            "pods": [{"pod": "etl/with-init", "amount": 4}],
        },
        {
            "cluster": "aws",
            "pool": "shared",
            "node": eks_node,
            "resource": SHARED,
            "allocated": 1,
            "total": 4,
            "pods": [{"pod": "default/infer", "amount": 1}],
        },
    ]
    pools = {(p["cluster"], p["pool"], p["resource"]): p for p in document["pools"]}
    assert pools[("azure", "t4", SHARED)] == {
        "cluster": "azure",
        "pool": "t4",
        "resource": SHARED,
        "allocated": 9,
        "total": 20,
        "nodes": 2,
    }
    assert pools[("azure", "whole", "nvidia.com/gpu")]["allocated"] == 0
    assert pools[("azure", "whole", "nvidia.com/gpu")]["total"] == 1
    assert pools[("gcp", "shared", "nvidia.com/gpu")] == {
        "cluster": "gcp",
        "pool": "shared",
        "resource": "nvidia.com/gpu",
        "allocated": 0,
        "total": 12,  # three zones' nodes, one L4 each shared by four MPS clients
        "nodes": 3,
    }
    clusters = {(c["cluster"], c["resource"]): (c["allocated"], c["total"]) for c in document["clusters"]}
    assert clusters == {
        ("azure", SHARED): (9, 20),
        ("azure", "nvidia.com/gpu"): (0, 1),
        ("gcp", "nvidia.com/gpu"): (0, 12),
        ("aws", "nvidia.com/gpu"): (0, 56),
        ("aws", SHARED): (1, 4),
    }
    assert document["errors"] == []

    text = applied.run("inspect", str(applied.fleet), "--cluster", "azure", "-d")
    assert text.exit_code == 0
    assert "5 / 10" in text.stdout and "ml/train" in text.stdout and "9 / 20" in text.stdout
    assert "gcp" not in text.stdout


def test_inspect_without_a_fleet_reads_every_context(applied: KubeWorld):
    result = applied.run("inspect", "--json")
    assert result.exit_code == 0, result.output
    clusters = {(c["cluster"], c["resource"]): c["total"] for c in json.loads(result.stdout)["clusters"]}
    assert clusters == {
        ("azure", SHARED): 20,
        ("azure", "nvidia.com/gpu"): 1,
        ("gcp", "nvidia.com/gpu"): 12,
        ("aws", "nvidia.com/gpu"): 56,
        ("aws", SHARED): 4,
    }
    pools = {(p["cluster"], p["pool"]) for p in json.loads(result.stdout)["pools"]}
    assert pools == {
        ("azure", "t4"),
        ("azure", "whole"),
        ("gcp", "shared"),
        ("aws", "mig"),
        ("aws", "shared"),
    }


def test_inspect_reports_an_unreachable_cluster_and_shows_the_others(applied: KubeWorld):
    closed = applied.with_closed_context("aws")
    result = applied.run("inspect", str(applied.fleet), "--json", "--kubeconfig", str(closed))
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    [error] = document["errors"]
    assert error["cluster"] == "aws"
    assert error["message"].startswith("aws: the Kubernetes API (context aws) is unreachable: ")
    assert {c["cluster"] for c in document["clusters"]} == {"azure", "gcp"}
    assert "error: aws: the Kubernetes API (context aws) is unreachable" in result.stderr


def test_quantities_read_as_kubernetes_writes_them_however_often_they_repeat():
    cases = {"10": 10, " 4 ": 4, "500m": 0.5, "1k": 1000, "2M": 2 * 10**6, "1Ki": 1024, "16Gi": 16 * 2**30}
    cases |= {"1.5": 1.5, "junk": 0, "": 0}
    for _ in range(2):  # the second time from the cache: the same answers
        assert {text: quantity(text) for text in cases} == cases
    assert quantity(8) == 8  # a number where the API sent one
