"""kubectl reads the sandbox's kubeconfig under every fleet name, those YAML 1.1 reads as
booleans (`no`, `on`) too: kubectl's YAML is 1.1, so such a name is written quoted. So does it
read a user's kubeconfig after provisioner saved a refreshed credential into it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from provisioner.compile import compile_file
from provisioner.kube.contexts import KubeAccess
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.clis.conftest import installed

FLEET = """\
clusters:
{clusters}
"""
NAMES = ("no", "on", "yes", "off", "y")
# Names go-yaml v2 (kubectl's) reads as a boolean or a float where PyYAML's resolver sees a string.
SAVED_NAMES = ("y", "Y", "n", "N", "1e3", "no")


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


def test_kubectl_reads_a_kubeconfig_provisioner_saved_a_refreshed_credential_into(tmp_path: Path):
    """The client's loader saves a token it refreshed (a legacy auth provider) back into the
    user's file; names the user's tools wrote quoted must come back quoted."""
    path = tmp_path / "config"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": n, "cluster": {"server": "http://c.example"}} for n in SAVED_NAMES],
                "users": [{"name": n, "user": {"token": "old"}} for n in SAVED_NAMES],
                "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in SAVED_NAMES],
                "current-context": "y",
            }
        ),
        encoding="utf-8",
    )
    loader = KubeAccess(kubeconfig=path)._kubeconfig().loader("y")
    loader._user.value["token"] = "refreshed"
    loader._config_persister()
    assert "refreshed" in path.read_text(encoding="utf-8")  # saved, not left as it was
    command = [installed("kubectl"), "--kubeconfig", str(path), "config", "get-contexts", "-o", "name"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted(SAVED_NAMES)
