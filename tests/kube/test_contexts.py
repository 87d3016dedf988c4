"""Which kubeconfig context reaches each fleet cluster: the fleet's kubeContext, else the one the
cloud's CLI writes (hardware/clouds.yaml), read by the real kubernetes client from real files."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from provisioner.errors import KubeUnreachable
from provisioner.fleet import load
from provisioner.kube.contexts import KubeAccess

FLEET = """\
clusters:
  - name: azure
    cloud: aks
    subscription: 22222222-2222-2222-2222-222222222222
    resourceGroup: rg
    cluster: ml-aks
  - name: gcp
    cloud: gke
    project: my-project
    location: europe-west4
    cluster: ml-gke
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: ml
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
  - name: named
    cloud: aks
    subscription: 22222222-2222-2222-2222-222222222222
    resourceGroup: rg
    cluster: other
    kubeContext: my-admin-context
"""


def _kubeconfig(path: Path, contexts: list[str]) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": "u"}} for name in contexts],
        "current-context": contexts[0],
    }
    with path.open("w", encoding="utf-8") as out:
        YAML(typ="safe", pure=True).dump(document, out)
    return path


@pytest.fixture
def clusters(tmp_path: Path) -> dict:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    return {c.name: c for c in load(fleet).clusters}


def test_each_cloud_finds_the_context_its_cli_writes(tmp_path: Path, clusters: dict):
    config = _kubeconfig(
        tmp_path / "config",
        [
            "ml-aks",
            "gke_my-project_europe-west4_ml-gke",
            "arn:aws:eks:us-east-1:123456789012:cluster/ml",  # the same name in another region
            "arn:aws:eks:us-west-2:123456789012:cluster/ml",
            "my-admin-context",
        ],
    )
    access = KubeAccess(kubeconfig=config)
    assert {name: access.context_for(c) for name, c in clusters.items()} == {
        "azure": "ml-aks",  # az aks get-credentials
        "gcp": "gke_my-project_europe-west4_ml-gke",  # gcloud container clusters get-credentials
        "aws": "arn:aws:eks:us-west-2:123456789012:cluster/ml",  # aws eks update-kubeconfig
        "named": "my-admin-context",  # the fleet's kubeContext wins
    }


def test_kubeconfig_env_lists_several_files_as_kubectl_merges_them(
    tmp_path: Path, clusters: dict, monkeypatch: pytest.MonkeyPatch
):
    one = _kubeconfig(tmp_path / "one", ["ml-aks"])
    two = _kubeconfig(tmp_path / "two", ["arn:aws:eks:us-west-2:123456789012:cluster/ml"])
    monkeypatch.setenv("KUBECONFIG", f"{one}:{two}")
    access = KubeAccess()
    assert access.contexts() == ["ml-aks", "arn:aws:eks:us-west-2:123456789012:cluster/ml"]
    assert access.context_for(clusters["aws"]) == "arn:aws:eks:us-west-2:123456789012:cluster/ml"


def test_two_matching_eks_contexts_ask_for_kube_context(tmp_path: Path, clusters: dict):
    config = _kubeconfig(
        tmp_path / "config",
        ["arn:aws:eks:us-west-2:111111111111:cluster/ml", "arn:aws:eks:us-west-2:222222222222:cluster/ml"],
    )
    with pytest.raises(KubeUnreachable) as caught:
        KubeAccess(kubeconfig=config).context_for(clusters["aws"])
    assert str(caught.value) == (
        f"aws: 2 contexts match (arn:aws:eks:us-west-2:111111111111:cluster/ml, "
        f"arn:aws:eks:us-west-2:222222222222:cluster/ml) in {config} matches "
        "arn:aws*:eks:us-west-2:*:cluster/ml; name its context with kubeContext in the fleet"
    )


def test_a_context_missing_from_the_kubeconfig_names_the_cluster(tmp_path: Path, clusters: dict):
    config = _kubeconfig(tmp_path / "config", ["something-else"])
    with pytest.raises(KubeUnreachable) as caught:
        KubeAccess(kubeconfig=config).for_cluster(clusters["azure"])
    assert str(caught.value).startswith(f"azure: no usable context 'ml-aks' in {config}: ")
    with pytest.raises(KubeUnreachable) as caught:
        KubeAccess(kubeconfig=tmp_path / "absent").contexts()
    assert str(caught.value).startswith(f"cannot read the kubeconfig {tmp_path / 'absent'}: ")
