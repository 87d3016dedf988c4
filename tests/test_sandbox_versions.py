"""The Kubernetes version each seeded cluster runs, as the sandbox is told it in Python (tests,
benches): every cloud spells one release its own way, and a bad setting is refused before
anything is served."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.clusters import ClusterRef, Target
from provisioner.sandbox.server import Sandbox, SandboxSettings

TARGETS = [
    Target("azure", ClusterRef("aks", "66666666-6666-6666-6666-666666666666", "versions", "v-aks")),
    Target("gcp", ClusterRef("gke", "versions-project", "europe-west4", "v-gke")),
    Target("alibaba", ClusterRef("ack", "", "cn-shanghai", "c000000000000000000000000000face0")),
]


def test_a_patch_given_is_kept_and_one_left_out_is_each_clouds_own(tmp_path: Path):
    settings = SandboxSettings(kubernetes_version="1.36", kubernetes_versions={"gcp": "1.34.7"})
    sandbox = Sandbox(tmp_path, settings).start(TARGETS)
    try:
        assert {name: seeded.kubernetes_version for name, seeded in sandbox.seeded.items()} == {
            "azure": "1.36.0",
            "gcp": "1.34.7",
            "alibaba": "1.36.1",
        }
        aks = sandbox.emulators["aks"].backend(TARGETS[0].ref.account, "versions")  # type: ignore[attr-defined]
        gke = sandbox.emulators["gke"].backend("versions-project", "europe-west4")  # type: ignore[attr-defined]
        ack = sandbox.emulators["ack"].backend("", "cn-shanghai")  # type: ignore[attr-defined]
        assert aks.get_cluster("v-aks")["currentKubernetesVersion"] == "1.36.0"
        assert gke.master_version("v-gke") == "1.34.7-gke.1000000"
        assert ack.get_cluster(TARGETS[2].ref.name).current_version == "1.36.1-aliyun.1"
    finally:
        sandbox.stop()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (SandboxSettings(kubernetes_version="1.x"), "'1.x' is not a Kubernetes version"),
        (SandboxSettings(kubernetes_versions={"gcp": "latest"}), "'latest' is not a Kubernetes version"),
        (
            SandboxSettings(kubernetes_versions={"aws": "1.34"}),
            "a Kubernetes version is set for aws, which is no seeded cluster (seeded: alibaba, azure, gcp)",
        ),
    ],
)
def test_a_bad_setting_is_refused_before_anything_is_served(
    tmp_path: Path, settings: SandboxSettings, message: str
):
    sandbox = Sandbox(tmp_path, settings)
    with pytest.raises(ValueError) as caught:
        sandbox.start(TARGETS)
    assert message in str(caught.value)
    assert sandbox.servers == {} and not (tmp_path / "endpoints.json").exists()
