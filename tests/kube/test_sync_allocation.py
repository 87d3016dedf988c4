"""sync learns allocation from each cluster's Kubernetes API: nodes seen, slices advertised and
allocated per pool, in the pool's own unit; an API that does not answer keeps the figures, stale."""

from __future__ import annotations

import json

from tests.kube.conftest import KubeWorld
from tests.kube.test_inspect import _pod


def _catalog(world: KubeWorld) -> dict[tuple[str, str], dict]:
    listed = world.run("catalog", "ls", "--json")
    assert listed.exit_code == 0, listed.output
    return {(r["cluster"], r["pool"]): r for r in json.loads(listed.stdout)}


def _figures(row: dict) -> tuple:
    return row["k8s_nodes"], row["slices_advertised"], row["slices_allocated"], row["allocation_stale"]


def test_sync_records_what_nodes_advertise_and_pods_hold(applied: KubeWorld):
    first, second = applied.node_names("azure", "kubernetes.azure.com/agentpool=t4")
    azure = applied.core("azure")
    azure.create_namespaced_pod("ml", _pod("train", first, limits=3))
    azure.create_namespaced_pod("ml", _pod("serve", second, requests=2, limits=2))

    synced = applied.run("sync", str(applied.fleet))
    assert synced.exit_code == 0, synced.output
    rows = _catalog(applied)
    assert _figures(rows[("azure", "t4")]) == (2, 20, 5, False)  # 2 nodes x 1 T4 x 10 replicas
    assert _figures(rows[("azure", "whole")]) == (1, 1, 0, False)
    assert _figures(rows[("gcp", "shared")]) == (3, 12, 0, False)  # regional: a node in each of 3 zones
    assert _figures(rows[("gcp", "empty")]) == (0, 0, 0, False)
    assert _figures(rows[("aws", "mig")]) == (1, 56, 0, False)  # 8 A100s x 7 x 1g.5gb
    assert rows[("azure", "t4")]["allocation_at"] is not None
    inspected = applied.run("catalog", "inspect", "--json")
    capacity = {(r["cluster"], r["pool"]): r for r in json.loads(inspected.stdout)}
    t4 = capacity[("azure", "t4")]
    assert (t4["slices_allocated"], t4["slices_advertised"], t4["allocation_stale"]) == (5, 20, False)
    table = applied.run("catalog", "inspect").stdout
    t4_line = next(line for line in table.splitlines() if " t4 " in line)
    assert t4_line.rstrip(" │").endswith("5 / 20")


def test_an_unreachable_api_keeps_the_figures_marked_stale(applied: KubeWorld):
    (node,) = applied.node_names("aws", "eks.amazonaws.com/nodegroup=shared")
    applied.core("aws").create_namespaced_pod("default", _pod("infer", node, limits=1))
    assert applied.run("sync", str(applied.fleet)).exit_code == 0
    before = _catalog(applied)[("aws", "shared")]

    closed = applied.with_closed_context("aws")
    synced = applied.run("sync", str(applied.fleet), "--kubeconfig", str(closed))
    assert synced.exit_code == 0, synced.output  # the clouds were listed: the catalog is current
    assert "aws's allocation figures are kept, marked stale" in synced.stderr
    rows = _catalog(applied)
    assert _figures(rows[("aws", "shared")]) == (1, 4, 1, True)
    assert rows[("aws", "shared")]["allocation_at"] == before["allocation_at"]
    assert _figures(rows[("azure", "t4")])[3] is False  # the others were asked afresh
