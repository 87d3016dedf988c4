"""A pool switched from the device plugin to DRA, planned and applied on each cloud through the real
SDKs and the emulators: in place where the switch is a node label (AKS, EKS), a new pool where the
cloud's driver installation must go off too (GKE: accelerator settings cannot change in place)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.sandbox.server import SandboxSettings
from tests.worlds import World

SPARE = {
    "aks": "{name: spare, instanceType: Standard_NC4as_T4_v3, nodes: {count: 1}}",
    "gke": "{name: spare, instanceType: g2-standard-8, nodes: {count: 3}}",
    "eks": "{name: spare, instanceType: g5.xlarge, nodes: {count: 1}}",
}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path, SandboxSettings(op_seconds=0.05))
    yield made
    made.sandbox.stop()


def to_dra(pools: dict[str, str]) -> dict[str, str]:
    return {
        cloud: text.replace(SPARE[cloud], SPARE[cloud].replace("nodes:", "gpu: {allocation: dra}, nodes:"))
        for cloud, text in pools.items()
    }


def test_switching_a_pool_to_dra_plans_per_cloud_and_converges(world: World):
    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    world.edit(to_dra)
    plan = world.plan_json()
    changes = {(c["cluster"], c["pool"]): c for c in plan["changes"]}
    assert {key: c["action"] for key, c in changes.items()} == {
        ("azure", "spare"): "update",
        ("gcp", "spare"): "replace",
        ("aws", "spare"): "update",
    }
    gke = {f["field"]: f for f in changes[("gcp", "spare")]["fields"]}
    assert gke["cloud_installs_driver"] == {
        "field": "cloud_installs_driver",
        "before": True,
        "after": False,
        "forces_replacement": True,
    }
    assert gke["labels"]["after"] == {
        "gke-no-default-nvidia-gpu-device-plugin": "true",
        "provisioner.io/pool": "spare",
    }
    aks = {f["field"]: f for f in changes[("azure", "spare")]["fields"]}
    assert aks["labels"]["after"] == {
        "nvidia.com/gpu.deploy.device-plugin": "false",
        "provisioner.io/pool": "spare",
    }
    assert not aks["labels"]["forces_replacement"]

    assert changes[("gcp", "spare")]["order"] == "create-first"
    # GKE's new pool is drained into only once its nodes publish their devices: the user installs
    # the DRA driver from render's values first, as docs/dra.md says.
    out = world.fleet.parent / "rendered"
    assert world.run("render", str(world.fleet), "--out-dir", str(out)).exit_code == 0
    values = str(out / "gcp" / "dra-driver-values.yaml")
    directory = str(world.sandbox.directory)
    installed = world.run(
        "sandbox", "install-dra-driver", "--dir", directory, "--cluster", "gcp", "-f", values
    )
    assert installed.exit_code == 0, installed.output
    applied = world.run("apply", str(world.fleet), "--auto-approve")
    assert applied.exit_code == 0, applied.output
    assert world.run("plan", str(world.fleet), "--detailed-exitcode").exit_code == 0  # no perpetual diff
    listed = world.run("pools", str(world.fleet), "--json")
    assert listed.exit_code == 0, listed.output
    clusters = json.loads(listed.stdout)
    modes = {(c["cluster"], p["pool"]): p["allocation_mode"] for c in clusters for p in c["pools"]}
    assert modes[("gcp", "spare")] == modes[("azure", "spare")] == modes[("aws", "spare")] == "dra"
    assert modes[("gcp", "mig")] == "device-plugin"


def test_plan_refuses_a_dra_pool_on_a_cluster_older_than_1_34_read_from_the_cloud(tmp_path: Path):
    made = World(tmp_path, SandboxSettings(op_seconds=0.05, kubernetes_versions={"gcp": "1.33"}))
    try:
        made.edit(to_dra)
        result = made.run("plan", str(made.fleet), "--json")
        assert result.exit_code == 1, result.output
        plan = json.loads(result.stdout)
        assert plan["errors"] == [
            "gcp: pool spare not planned: the cluster runs Kubernetes 1.33.1-gke.1000000 (GKE API); "
            "allocation: dra needs 1.34 or later (resource.k8s.io/v1, GA in 1.34: KEP-4381): upgrade "
            "the cluster, or use allocation: device-plugin"
        ]
        planned = {(c["cluster"], c["pool"]) for c in plan["changes"]}
        assert ("gcp", "spare") not in planned and ("gcp", "mig") in planned  # the rest still plans
        assert ("azure", "spare") in planned and ("aws", "spare") in planned  # 1.35: planned
    finally:
        made.sandbox.stop()
