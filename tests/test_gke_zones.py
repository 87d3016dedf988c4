"""GKE node counts are the pool's total, as on every other cloud: on a regional cluster the tool
sends total autoscaling limits and spreads a fixed count over the pool's zones, and pools made
either way (per-zone or total limits, as gcloud makes them) read back as the whole pool's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from kubernetes import client, config

from provisioner.cli import main
from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from provisioner.pools import Scaling
from provisioner.sandbox.server import Sandbox, SandboxSettings

FLEET = """\
clusters:
  - name: gcp
    cloud: gke
    project: zones-project
    location: us-central1
    cluster: regional
    pools:
      - {name: auto, instanceType: g2-standard-8, nodes: {min: 1, max: 4}}
      - {name: fixed, instanceType: g2-standard-8, nodes: {count: 3}}
      - name: two
        instanceType: a2-highgpu-1g
        gpu: {mig: 1g.5gb}
        zones: [us-central1-a, us-central1-c]
        nodes: {count: 4}
"""
PARENT = "/v1/projects/zones-project/locations/us-central1/clusters/regional"


class Regional:
    def __init__(self, tmp_path: Path):
        self.fleet = tmp_path / "fleet.yaml"
        self.fleet.write_text(FLEET, encoding="utf-8")
        self.compiled = compile_file(self.fleet)
        self.sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings()).start(
            [c.target for c in self.compiled.clusters]
        )
        self.url = self.sandbox.endpoints["gke"] + PARENT
        self.ref = self.compiled.clusters[0].target.ref

    def run(self, *args: str) -> str:
        env = {"PROVISIONER_SANDBOX": str(self.sandbox.directory), "PROVISIONER_LOCK_DIR": ""}
        result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    def api_pool(self, name: str) -> dict:
        return requests.get(f"{self.url}/nodePools/{name}", timeout=10).json()

    def nodes(self, pool: str) -> list[str]:
        api = client.CoreV1Api(config.new_client_from_config(str(self.sandbox.kubeconfig), context="gcp"))
        found = api.list_node(label_selector=f"cloud.google.com/gke-nodepool={pool}").items
        return sorted(n.metadata.labels["topology.kubernetes.io/zone"] for n in found)


@pytest.fixture
def regional(tmp_path: Path) -> Iterator[Regional]:
    world = Regional(tmp_path)
    try:
        yield world
    finally:
        world.sandbox.stop()


def test_a_regional_pool_counts_its_nodes_in_total_in_the_api_the_nodes_and_the_catalog(regional: Regional):
    regional.run("apply", str(regional.fleet), "--auto-approve")

    auto = regional.api_pool("auto")
    assert auto["autoscaling"]["totalMinNodeCount"] == 1 and auto["autoscaling"]["totalMaxNodeCount"] == 4
    assert "minNodeCount" not in auto["autoscaling"] and "maxNodeCount" not in auto["autoscaling"]
    assert auto["locations"] == ["us-central1-a", "us-central1-b", "us-central1-c"]  # the cluster's
    fixed, two = regional.api_pool("fixed"), regional.api_pool("two")
    assert fixed["initialNodeCount"] == 1  # per zone: 3 in all
    assert (two["initialNodeCount"], two["locations"]) == (2, ["us-central1-a", "us-central1-c"])

    assert regional.nodes("fixed") == ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert regional.nodes("two") == ["us-central1-a", "us-central1-a", "us-central1-c", "us-central1-c"]

    verified = json.loads(regional.run("verify", str(regional.fleet), "--json"))
    assert {p["pool"]: p["nodes"] for p in verified["pools"]} == {"auto": 3, "fixed": 3, "two": 4}

    regional.run("sync", str(regional.fleet))
    rows = {r["pool"]: r for r in json.loads(regional.run("catalog", "ls", "--json"))}
    assert (rows["auto"]["min_nodes"], rows["auto"]["max_nodes"]) == (1, 4)
    assert (rows["fixed"]["min_nodes"], rows["fixed"]["max_nodes"]) == (3, 3)
    assert rows["two"]["max_nodes"] == 4 and rows["two"]["slices_per_node"] == 7

    plan = json.loads(regional.run("plan", str(regional.fleet), "--json"))
    assert plan["changes"] == []  # what the cloud holds is what the fleet says: no perpetual diff


def test_pools_made_with_per_zone_or_total_limits_read_back_as_the_whole_pools(regional: Regional):
    made = {
        # gcloud container node-pools create --enable-autoscaling --min-nodes 1 --max-nodes 2
        "perzone": {"minNodeCount": 1, "maxNodeCount": 2},
        # gcloud ... --total-min-nodes 0 --total-max-nodes 4 (the TrueFoundry guide's)
        "total": {"totalMinNodeCount": 0, "totalMaxNodeCount": 4},
    }
    for name, limits in made.items():
        body = {
            "nodePool": {
                "name": name,
                "config": {
                    "machineType": "g2-standard-8",
                    "accelerators": [{"acceleratorCount": "1", "acceleratorType": "nvidia-l4"}],
                },
                "initialNodeCount": 1 if name == "perzone" else 0,
                "autoscaling": {"enabled": True, **limits},
            }
        }
        assert requests.post(f"{regional.url}/nodePools", json=body, timeout=10).status_code == 200
    listed = {p.name: p for p in connect("gke", regional.sandbox.directory).list_pools(regional.ref)}
    assert listed["perzone"].scaling == Scaling(3, 6, autoscaling=True)  # 1..2 in each of 3 zones
    assert listed["total"].scaling == Scaling(0, 4, autoscaling=True)
    assert listed["perzone"].zones == ("us-central1-a", "us-central1-b", "us-central1-c")
    assert regional.nodes("perzone") == ["us-central1-a", "us-central1-b", "us-central1-c"]


def test_the_emulator_refuses_per_zone_and_total_limits_together_and_zones_outside_the_region(
    regional: Regional,
):
    pool = {"name": "bad", "config": {"machineType": "e2-standard-4"}}
    both = {**pool, "autoscaling": {"enabled": True, "maxNodeCount": 2, "totalMaxNodeCount": 4}}
    answer = requests.post(f"{regional.url}/nodePools", json={"nodePool": both}, timeout=10)
    assert answer.status_code == 400 and "total limits" in answer.json()["error"]["message"]
    elsewhere = {**pool, "locations": ["europe-west4-a"]}
    answer = requests.post(f"{regional.url}/nodePools", json={"nodePool": elsewhere}, timeout=10)
    assert answer.status_code == 400 and "us-central1" in answer.json()["error"]["message"]


def test_gke_taints_gpu_nodes_only_while_the_cluster_has_a_non_gpu_pool(regional: Regional):
    """GKE's own GPU taint (nvidia.com/gpu=present:NoSchedule) comes and goes with non-GPU pools."""
    body = {
        "nodePool": {
            "name": "untainted",
            "config": {
                "machineType": "g2-standard-8",
                "accelerators": [{"acceleratorCount": "1", "acceleratorType": "nvidia-l4"}],
            },
            "initialNodeCount": 1,
        }
    }
    assert requests.post(f"{regional.url}/nodePools", json=body, timeout=10).status_code == 200
    api = client.CoreV1Api(config.new_client_from_config(str(regional.sandbox.kubeconfig), context="gcp"))

    def taints() -> set[str]:
        nodes = api.list_node(label_selector="cloud.google.com/gke-nodepool=untainted").items
        return {t.key for n in nodes for t in (n.spec.taints or [])}

    assert taints() == {"nvidia.com/gpu"}  # the cluster's default-pool has no GPU
    assert requests.delete(f"{regional.url}/nodePools/default-pool", timeout=10).status_code == 200
    assert taints() == set()


@pytest.mark.parametrize(
    ("low", "high", "per_zone"), [(1, 4, 1), (3, 12, 1), (4, 5, 1), (4, 9, 2), (0, 2, 0)]
)
def test_an_autoscaled_pool_starts_at_the_fewest_nodes_per_zone_that_reach_min_within_max(
    regional: Regional, low: int, high: int, per_zone: int
):
    from provisioner.pools import PoolState

    driver = connect("gke", regional.sandbox.directory)
    state = PoolState("auto2", "g2-standard-8", 1, None, None, False, None, Scaling(low, high, True), (), ())
    driver.create_pool(regional.ref, state)
    created = regional.api_pool("auto2")
    assert created.get("initialNodeCount", 0) == per_zone  # in each of the cluster's three zones
    assert (
        created["autoscaling"]["totalMinNodeCount"] if low else 0,
        created["autoscaling"]["totalMaxNodeCount"],
    ) == (low, high)
