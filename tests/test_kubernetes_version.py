"""A cluster's Kubernetes version, read from each cloud's own form of it."""

from __future__ import annotations

import pytest

from provisioner.clusters import KubernetesVersion


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("1.35.0", (1, 35)),  # AKS currentKubernetesVersion
        ("1.35.1-gke.1234000", (1, 35)),  # GKE currentMasterVersion
        ("1.35", (1, 35)),  # EKS cluster.version
        ("1.35.1-aliyun.1", (1, 35)),  # ACK current_version
        ("v1.34.2", (1, 34)),  # Kubernetes' own gitVersion
        ("v1.33.4-eks-3d9b43a", (1, 33)),  # an EKS API server's gitVersion
        ("1.9.11", (1, 9)),
    ],
)
def test_each_clouds_form_reads_as_its_release_and_keeps_the_text(text: str, release: tuple[int, int]):
    version = KubernetesVersion.parse(text)
    assert (version.major, version.minor, version.text) == (*release, text)
    assert str(version) == f"{release[0]}.{release[1]}"


def test_versions_order_by_release_numbers_not_by_text():
    assert KubernetesVersion.parse("1.9.0") < KubernetesVersion.parse("1.10.0")  # not as strings
    assert KubernetesVersion.parse("1.33.9") < KubernetesVersion(1, 34) <= KubernetesVersion.parse("1.34.0")
    # The same release read from two clouds is equal: features go by major.minor, not patch or build.
    assert KubernetesVersion.parse("1.35.1-gke.1234000") == KubernetesVersion.parse("1.35")
    assert max(KubernetesVersion.parse(t) for t in ("1.34", "1.36.0", "1.35.2")).text == "1.36.0"


@pytest.mark.parametrize("text", ["", "1", "one.35", "1.035", "1.35x", "1.35.x", "1.35-", "1..35", "latest"])
def test_anything_else_is_refused_naming_the_text_and_the_form(text: str):
    with pytest.raises(ValueError, match="is not a Kubernetes version") as caught:
        KubernetesVersion.parse(text)
    assert repr(text) in str(caught.value) and "major.minor" in str(caught.value)
