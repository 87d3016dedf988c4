"""kubectl reads the sandbox's kubeconfig under every fleet name, those YAML 1.1 reads as
booleans (`no`, `on`) too: kubectl's YAML is 1.1, so such a name is written quoted."""

from __future__ import annotations

import subprocess

from provisioner.compile import compile_file
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.clis.conftest import installed

FLEET = """\
clusters:
{clusters}
"""
NAMES = ("no", "on", "yes", "off", "y")


def test_kubectl_reads_every_context_by_its_fleet_name(tmp_path):
    where = "cloud: gke, project: names-project, location: us-central1"
    clusters = "\n".join(
        f"  - {{name: '{name}', {where}, cluster: c-{index}, pools: []}}" for index, name in enumerate(NAMES)
    )
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET.format(clusters=clusters), encoding="utf-8")
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings()).start(
        [c.target for c in compile_file(fleet).clusters]
    )
    try:
        command = [
            installed("kubectl"),
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "config",
            "get-contexts",
            "-o",
            "name",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    finally:
        sandbox.stop()
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted(NAMES)
