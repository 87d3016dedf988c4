"""kubectl reads the YAML provisioner writes for it as provisioner meant it. kubectl's YAML is
go-yaml v2, where `no`, `on`, `y` and `N` are booleans and `1e3` a float; a label value such as
`spot: "no"` written plain goes out as `false`, or kubectl refuses the object. Each
document is sent through `kubectl create --dry-run=client -o json` against the sandbox's
Kubernetes API, and every string must come back a string."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from provisioner.compile import compile_file
from provisioner.placement import Placement
from provisioner.podspec import merge
from provisioner.render import to_yaml
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.clis.conftest import installed

FLEET = """\
clusters:
  - {name: gcp, cloud: gke, project: kubectl-yaml, location: us-central1, cluster: c, pools: []}
"""
# Strings go-yaml v2 reads as another type where YAML 1.2 (ruamel's) reads a string.
AMBIGUOUS = {"spot": "no", "zone-a": "on", "short": "y", "upper": "N", "count": "1e3", "octal": "010"}
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  containers:
    - {name: main, image: busybox}
"""


def _placement() -> Placement:
    return Placement(
        cluster="gcp",
        cloud="gke",
        pool="l4",
        isolation="none",
        slice_memory_gb=24.0,
        slice_unit="slice",
        limits={"nvidia.com/gpu": 1},
        node_selector=AMBIGUOUS,
        tolerations=[{"key": "sharing", "operator": "Equal", "value": "off", "effect": "NoSchedule"}],
        pod_fields={},
        capacity_at_max=4,
        max_nodes=4,
        why="one L4",
        others=0,
        warnings=[],
    )


def _as_kubectl_reads(sandbox: Sandbox, text: str, tmp_path: Path) -> dict:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(text, encoding="utf-8")
    command = [installed("kubectl"), "--kubeconfig", str(sandbox.kubeconfig), "--context", "gcp"]
    command += ["create", "--dry-run=client", "-o", "json", "--validate=false", "-f", str(manifest)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_placed_pod_and_a_rendered_object_keep_their_strings_through_kubectl(tmp_path: Path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings()).start(
        [c.target for c in compile_file(fleet).clusters]
    )
    try:
        pod = _as_kubectl_reads(sandbox, merge(POD, _placement(), source="pod.yaml"), tmp_path)
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "labels": AMBIGUOUS}}
        rendered = _as_kubectl_reads(sandbox, to_yaml({**config_map, "data": AMBIGUOUS}), tmp_path)
    finally:
        sandbox.stop()
    assert pod["spec"]["nodeSelector"] == AMBIGUOUS
    assert pod["spec"]["tolerations"][0]["value"] == "off"
    assert rendered["metadata"]["labels"] == AMBIGUOUS
    assert rendered["data"] == AMBIGUOUS
