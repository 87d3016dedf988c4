"""`provisioner sandbox serve` by hand, as DESIGN.md says, in real processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import EXAMPLES

PROVISIONER = [sys.executable, "-m", "provisioner"]


def test_serve_seeds_the_fleet_and_commands_reach_it_through_the_sandbox_option(tmp_path: Path):
    directory = tmp_path / "sandbox"
    server = subprocess.Popen(
        [*PROVISIONER, "sandbox", "serve", "--dir", str(directory), "--seed", str(EXAMPLES / "fleet.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        endpoints_file = directory / "endpoints.json"
        deadline = time.monotonic() + 30
        while not endpoints_file.exists():
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "endpoints.json never appeared"
            time.sleep(0.1)
        endpoints = json.loads(endpoints_file.read_text())
        assert sorted(endpoints) == ["ack", "aks", "eks", "gke", "kube"]
        assert all(url.startswith("http://127.0.0.1:") for url in endpoints.values())
        kubeconfig = (directory / "kubeconfig").read_text()
        for name in ("azure-ml", "gcp-ml", "aws-ml"):  # a context per seeded cluster, at its own prefix
            assert f"server: {endpoints['kube']}/clusters/{name}\n" in kubeconfig
            assert f"  name: {name}\n" in kubeconfig

        listed = subprocess.run(
            [*PROVISIONER, "pools", str(EXAMPLES / "fleet.yaml"), "--json"],
            env={"PROVISIONER_SANDBOX": str(directory), "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        )
        clusters = {c["cluster"]: c for c in json.loads(listed.stdout)}
        assert sorted(clusters) == ["aws-ml", "azure-ml", "gcp-ml"]
        for cluster in clusters.values():
            assert cluster["error"] is None
            assert [(p["pool"], p["owned"]) for p in cluster["pools"]] in (
                [("system", False)],
                [("default-pool", False)],
            )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)
    assert server.returncode == 0
    assert not (directory / "endpoints.json").exists()  # a stopped sandbox leaves no stale addresses
    assert not (directory / "kubeconfig").exists()
    output = server.stdout.read()
    assert f"wrote {directory / 'kubeconfig'}: one context per seeded cluster" in output


def test_commands_without_a_running_sandbox_say_how_to_start_one(tmp_path: Path):
    result = subprocess.run(
        [*PROVISIONER, "--sandbox", str(tmp_path), "pools", str(EXAMPLES / "fleet.yaml")],
        check=False,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "provisioner sandbox serve --dir" in result.stderr
    assert "Traceback" not in result.stderr
