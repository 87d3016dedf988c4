"""`place --live`: free slices counted from each cluster's Kubernetes API now, through the same
counting as `sync`, end to end against the sandbox's clusters and the real kubernetes client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.kube.conftest import KubeWorld

SHARED = "nvidia.com/gpu.shared"
ASKED = ("place", "--gpu-memory", "5GB", "--cluster", "aws", "--pool", "shared")


def _pod(name: str, node: str) -> dict[str, Any]:
    spec = {
        "nodeName": node,
        "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": {SHARED: "1"}}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_live_reads_what_pods_hold_now_where_the_catalog_is_a_sync_old(applied: KubeWorld, tmp_path: Path):
    applied.catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    assert applied.run("sync", str(applied.fleet)).exit_code == 0
    synced = applied.run(*ASKED, "--json")
    assert synced.exit_code == 0, synced.output
    assert json.loads(synced.stdout)["capacity"] | {"allocation_at": None} == {
        "tier": "free",
        "free": 4,  # one g5.xlarge, time-sliced by 4
        "growable": 0,
        "nodes_left": 0,
        "at_max": 4,
        "allocation": "known",
        "allocation_at": None,
    }
    (node,) = applied.node_names("aws", "eks.amazonaws.com/nodegroup=shared")
    for number in range(4):
        applied.core("aws").create_namespaced_pod("ml", _pod(f"infer-{number}", node))

    assert json.loads(applied.run(*ASKED, "--json").stdout)["capacity"]["free"] == 4  # the sync's
    live = applied.run(*ASKED, "--live")
    assert live.exit_code == 1
    assert live.stderr.splitlines()[0] == (
        "error: no live pool in --cluster aws --pool shared can take 5GB of GPU memory "
        "now or after a scale-up"
    )
    assert "no slices free (by its Kubernetes API now) and it does not autoscale" in live.stderr
    assert "Traceback" not in live.output

    # Through the fleet's entry for the cluster, as verify reaches it: the same answer.
    with_fleet = applied.run(*ASKED, "--live", "--fleet", str(applied.fleet))
    assert with_fleet.exit_code == 1
    assert with_fleet.stderr.splitlines()[0] == live.stderr.splitlines()[0]


def test_a_cluster_that_does_not_answer_counts_as_unknown(applied: KubeWorld, tmp_path: Path):
    applied.catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    assert applied.run("sync", str(applied.fleet)).exit_code == 0
    closed = applied.with_closed_context("aws")
    result = applied.run(*ASKED, "--live", "--kubeconfig", str(closed), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["capacity"]["tier"] == "unknown"
    assert json.loads(result.stdout)["capacity"]["allocation"] == "stale"
    assert result.stderr.startswith("warning: aws: the Kubernetes API (context aws) is unreachable: ")
    assert result.stderr.rstrip().endswith("; aws's free slices count as unknown")


def test_live_options_need_live(applied: KubeWorld):
    result = applied.run(*ASKED, "--fleet", str(applied.fleet))
    assert result.exit_code == 1
    assert (
        result.stderr
        == "error: --fleet and --kubeconfig say how --live reaches the clusters; give --live too\n"
    )
