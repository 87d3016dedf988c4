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
        assert all(url.startswith("http://127.0.0.1:") for cloud, url in endpoints.items() if cloud != "kube")
        assert endpoints["kube"].startswith("https://127.0.0.1:")  # as an API server, over TLS
        kubeconfig = json.loads((directory / "kubeconfig").read_text())  # JSON, which is YAML to kubectl
        servers = {c["name"]: c["cluster"]["server"] for c in kubeconfig["clusters"]}
        contexts = {c["name"]: c["context"] for c in kubeconfig["contexts"]}
        for name in ("azure-ml", "gcp-ml", "aws-ml"):  # a context per seeded cluster, at its own prefix
            assert servers[name] == f"{endpoints['kube']}/clusters/{name}"
            assert contexts[name] == {"cluster": name, "user": name}

        listed = subprocess.run(
            [*PROVISIONER, "pools", str(EXAMPLES / "fleet.yaml"), "--json"],
            env={"PROVISIONER_SANDBOX": str(directory), "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        )
        clusters = {c["cluster"]: c for c in json.loads(listed.stdout)}
        assert sorted(clusters) == ["ali-ml", "aws-ml", "azure-ml", "gcp-ml"]
        assert {name: c["error"] for name, c in clusters.items()} == dict.fromkeys(clusters)
        assert {name: [(p["pool"], p["owned"]) for p in c["pools"]] for name, c in clusters.items()} == {
            "ali-ml": [("default-nodepool", False)],
            "aws-ml": [("system", False)],
            "azure-ml": [("system", False)],
            "gcp-ml": [("default-pool", False)],
        }
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


TWO_ENTRIES_ONE_EKS_CLUSTER = """\
clusters:
  - name: team-a
    cloud: eks
    region: us-east-1
    cluster: ml-eks
    nodeRole: arn:aws:iam::111111111111:role/nodes
    subnets: [subnet-0abc1234]
    pools:
      - {name: g5-ts, instanceType: g5.xlarge, gpu: {sharing: mps, replicas: 4}, nodes: {min: 0, max: 2}}
  - name: team-b  # a copy-paste with another account's node role: the same cluster for the API
    cloud: eks
    region: us-east-1
    cluster: ml-eks
    nodeRole: arn:aws:iam::222222222222:role/nodes
    subnets: [subnet-0abc1234]
    pools: []
"""


def test_two_entries_for_one_eks_cluster_are_refused_by_validate_and_by_the_sandbox(tmp_path: Path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(TWO_ENTRIES_ONE_EKS_CLUSTER, encoding="utf-8")
    message = (
        f"{fleet}:13: clusters[team-b].cluster: 'ml-eks' is the same cluster as clusters[team-a] "
        "(EKS reaches a cluster by region and name in the credentials' account; a node role's account "
        "does not choose it); two entries would fight over its pools"
    )
    for command in (
        ["validate", str(fleet)],
        ["sandbox", "serve", "--dir", str(tmp_path / "s"), "--seed", str(fleet)],
    ):
        done = subprocess.run(
            [*PROVISIONER, *command], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 1, done
        assert message in done.stdout + done.stderr
        assert "Traceback" not in done.stderr
