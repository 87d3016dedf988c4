"""`pools` shows each pool's MIG profile and sharing as `catalog` does: one reading (capacity())
whether the cloud holds them in a pool field (GKE) or a node label (AKS and EKS sharing, EKS MIG)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from provisioner.sandbox.server import SandboxSettings
from tests.worlds import World

# (cluster, pool) -> (GPU model, MIG profile, sharing, replicas): the pools tests/worlds.py holds.
EXPECTED = {
    ("azure", "mig"): ("A100 80GB", "1g.10gb", "exclusive", None),  # gpuInstanceProfile MIG1g
    ("azure", "shared"): ("T4 16GB", None, "time-slicing", 4),  # a label
    ("azure", "spare"): ("T4 16GB", None, "exclusive", None),
    ("gcp", "mig"): ("A100 40GB", "1g.5gb", "exclusive", None),  # gpu_partition_size
    ("gcp", "shared"): ("L4 24GB", None, "mps", 4),  # gpu_sharing_config
    ("gcp", "spare"): ("L4 24GB", None, "exclusive", None),
    ("aws", "mig"): ("A100 40GB", "1g.5gb", "exclusive", None),  # the nvidia.com/mig.config label
    ("aws", "shared"): ("A10G 24GB", None, "time-slicing", 4),  # a label
    ("aws", "spare"): ("A10G 24GB", None, "exclusive", None),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    made = World(tmp_path_factory.mktemp("pools"), SandboxSettings(op_seconds=0.05))
    applied = made.run("apply", str(made.fleet), "--auto-approve")
    assert applied.exit_code == 0, applied.output
    yield made
    made.sandbox.stop()


def test_pools_json_reads_mig_and_sharing_from_fields_and_labels_alike(world: World):
    result = world.run("pools", str(world.fleet), "--json")
    assert result.exit_code == 0, result.output
    read = {
        (cluster["cluster"], pool["pool"]): (pool["gpu"], pool["mig"], pool["sharing"], pool["replicas"])
        for cluster in json.loads(result.stdout)
        for pool in cluster["pools"]
        if pool["owned"]
    }
    assert read == EXPECTED


def test_pools_table_shows_mig_and_sharing_for_label_driven_pools(world: World):
    result = world.run("pools", str(world.fleet))
    assert result.exit_code == 0, result.output
    rows = {
        (cells[0], cells[1]): (cells[4], cells[5])
        for line in result.stdout.splitlines()
        if len(cells := [c.strip() for c in line.strip("│┃ ").split("│")]) == 9
    }
    shown = {key: rows[key] for key in EXPECTED}
    assert shown == {
        ("azure", "mig"): ("1g.10gb", ""),
        ("azure", "shared"): ("", "time-slicing x4"),
        ("azure", "spare"): ("", ""),
        ("gcp", "mig"): ("1g.5gb", ""),
        ("gcp", "shared"): ("", "mps x4"),
        ("gcp", "spare"): ("", ""),
        ("aws", "mig"): ("1g.5gb", ""),
        ("aws", "shared"): ("", "time-slicing x4"),
        ("aws", "spare"): ("", ""),
    }


def test_pools_json_spells_each_pool_as_the_catalog_does(world: World):
    """One spelling of a pool: every key `catalog ls --json` and `pools --json` share holds the
    same value in both, after a sync of the same clusters."""
    synced = world.run("sync", str(world.fleet))
    assert synced.exit_code == 0, synced.output
    cataloged = world.run("catalog", "ls", "--json")
    listed = world.run("pools", str(world.fleet), "--json")
    assert (cataloged.exit_code, listed.exit_code) == (0, 0), cataloged.output + listed.output
    in_catalog = {(p["cluster"], p["pool"]): p for p in json.loads(cataloged.stdout)}
    in_pools = {(c["cluster"], p["pool"]): p for c in json.loads(listed.stdout) for p in c["pools"]}
    assert in_catalog.keys() == in_pools.keys()
    for key, row in in_catalog.items():
        shared = row.keys() & in_pools[key].keys()
        assert shared >= {"gpu", "mig", "sharing", "replicas", "slices_per_node", "labels", "taints"}
        assert {k: row[k] for k in shared} == {k: in_pools[key][k] for k in shared}, key
    assert in_pools[("gcp", "shared")]["sharing"] == "mps"
    assert in_pools[("gcp", "shared")]["replicas"] == 4
