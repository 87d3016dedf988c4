"""Each seeded cluster's Kubernetes version, set by `sandbox serve --kubernetes-version`, as the
clouds' own tools (gcloud, the aws CLI) and kubectl read it, and as each driver reads it from its
cloud's API, against one `sandbox serve` process."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from provisioner.clusters import KubernetesVersion
from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from tests.clis.conftest import PROVISIONER, Served, ok
from tests.conftest import ROOT

FLEET = """\
clusters:
  - name: azure
    cloud: aks
    subscription: 55555555-5555-5555-5555-555555555555
    resourceGroup: versions
    cluster: versions-aks
    pools: []
  - name: gcp
    cloud: gke
    project: versions-project
    location: us-central1
    cluster: versions-gke
    pools: []
  - name: aws
    cloud: eks
    region: us-east-2
    cluster: versions-eks
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0def5678]
    pools: []
  - name: alibaba
    cloud: ack
    region: cn-beijing
    clusterId: c0000000000000000000000000000beef
    vswitches: [vsw-versions1]
    pools: []
"""
# Every cluster 1.34 (each cloud's own patch of it), but aws 1.33.2 and alibaba 1.36.3.
SERVE_ARGS = ["--kubernetes-version", "1.34", "--kubernetes-version", "aws=1.33.2"]
SERVE_ARGS += ["--kubernetes-version", "alibaba=1.36.3"]
GKE = ["--project", "versions-project", "--region", "us-central1"]


def test_gcloud_describes_the_gke_clusters_version(served: Served):
    cluster = json.loads(
        ok(served.gcloud("container", "clusters", "describe", "versions-gke", *GKE, "--format", "json"))
    )
    assert (cluster["currentMasterVersion"], cluster["currentNodeVersion"]) == (
        "1.34.1-gke.1000000",  # 1.34 without a patch: GKE's .1 in the sandbox
        "1.34.1-gke.1000000",
    )


def test_the_aws_cli_describes_the_eks_cluster_and_its_node_group_at_its_version(served: Served):
    cluster = json.loads(ok(served.aws("us-east-2", "eks", "describe-cluster", "--name", "versions-eks")))
    assert cluster["cluster"]["version"] == "1.33"  # EKS writes major.minor
    system = json.loads(
        ok(
            served.aws(
                "us-east-2",
                "eks",
                "describe-nodegroup",
                "--cluster-name",
                "versions-eks",
                "--nodegroup-name",
                "system",
            )
        )
    )
    assert system["nodegroup"]["version"] == "1.33"  # made at its cluster's version


@pytest.mark.parametrize(
    ("context", "minor", "git_version"),
    [
        ("azure", "34", "v1.34.0"),
        ("gcp", "34", "v1.34.1"),
        ("aws", "33", "v1.33.2"),
        ("alibaba", "36", "v1.36.3"),
    ],
)
def test_kubectl_reads_each_clusters_version_from_its_api_server(
    served: Served, context: str, minor: str, git_version: str
):
    server = json.loads(ok(served.kubectl(context, "version", "--output", "json")))["serverVersion"]
    assert (server["major"], server["minor"], server["gitVersion"]) == ("1", minor, git_version)


def test_each_driver_reads_its_clusters_version_from_its_clouds_api(served: Served):
    read = {
        compiled.target.name: connect(compiled.target.cloud, served.directory).kubernetes_version(
            compiled.target.ref
        )
        for compiled in compile_file(served.fleet).clusters
    }
    assert {name: version.text for name, version in read.items()} == {
        "azure": "1.34.0",
        "gcp": "1.34.1-gke.1000000",
        "aws": "1.33",
        "alibaba": "1.36.3-aliyun.1",
    }
    assert sorted(read, key=read.__getitem__) == ["aws", "azure", "gcp", "alibaba"]
    assert read["gcp"] == read["azure"] == KubernetesVersion(1, 34)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kubernetes-version", "1.x"], "'1.x' is not a Kubernetes version: give X.Y or X.Y.Z"),
        (["--kubernetes-version", "gcp=v1.34"], "'v1.34' is not a Kubernetes version: give X.Y or X.Y.Z"),
        (["--kubernetes-version", "=1.34"], "'=1.34' names no cluster before '='"),
        (
            ["--kubernetes-version", "gcp=1.34", "--kubernetes-version", "gcp=1.35"],
            "cluster gcp's version is given twice",
        ),
        (
            ["--kubernetes-version", "gke=1.34"],
            "gke: no seeded cluster has that name (the fleet's: azure, gcp, aws, alibaba)",
        ),
    ],
)
def test_a_bad_version_is_refused_before_anything_is_served(served: Served, args: list[str], message: str):
    command = [*PROVISIONER, "sandbox", "serve", "--dir", str(served.directory.parent / "refused")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*command, "--seed", str(served.fleet), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for --kubernetes-version: {message}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (served.directory.parent / "refused" / "endpoints.json").exists()
