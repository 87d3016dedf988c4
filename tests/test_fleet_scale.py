"""A 3,000-cluster, 12,000-pool fleet written as a user writes it loads, as `validate` runs it:
past the old 4 MB limit, and with its shared pool blocks as aliases (merge keys)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from provisioner.compile import compile_file
from provisioner.fleet import load
from provisioner.quotas import quota_scope
from tests.conftest import ROOT
from tests.fleets import SCOPES, write_fleet


def validate(fleet: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVISIONER_")}
    env.update(PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "provisioner", "validate", str(fleet)],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("shared_blocks", [False, True], ids=["written-out", "merge-keys"])
def test_a_fleet_of_3000_clusters_validates(shared_blocks, tmp_path):
    fleet = write_fleet(tmp_path / "fleet.yaml", 3000, shared_blocks)
    if not shared_blocks:
        assert fleet.stat().st_size > 4 * 1024 * 1024  # what the old limit refused
    result = validate(fleet)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"✓ {fleet}: 3000 clusters, 12000 pools\n",
        "",
    )


def test_shared_blocks_are_the_same_fleet_as_written_out(tmp_path):
    written = load(write_fleet(tmp_path / "written.yaml", 60))
    shared = load(write_fleet(tmp_path / "shared.yaml", 60, shared_blocks=True))
    assert shared.clusters == written.clusters


def test_the_clusters_are_spread_evenly_over_the_quota_scopes(tmp_path):
    compiled = compile_file(write_fleet(tmp_path / "fleet.yaml", 90))
    scopes = Counter(quota_scope(cluster.target.ref) for cluster in compiled.clusters)
    assert len(scopes) == len(SCOPES) == 30
    assert set(scopes.values()) == {3}
    assert Counter(scope[0] for scope in scopes) == {"aks": 8, "gke": 8, "eks": 7, "ack": 7}
