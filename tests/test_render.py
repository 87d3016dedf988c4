"""Rendered manifests: valid Kubernetes objects, and every pool's label names a key that exists."""

from __future__ import annotations

import kubernetes_validate
import pytest
from conftest import EXAMPLES
from ruamel.yaml import YAML

from provisioner.render import CONFIG_MAP, DEVICE_PLUGIN_FILE, GPU_OPERATOR_FILE, render_fleet
from provisioner.sharing import DEVICE_PLUGIN_LABEL, compile_file

KUBERNETES_VERSION = "1.31"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


def load_yaml(text: str):
    return YAML(typ="safe").load(text)


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_renders_valid_kubernetes_objects(example):
    compiled = compile_file(example)
    for cluster in render_fleet(compiled):
        if DEVICE_PLUGIN_FILE in cluster.files:
            config_map = load_yaml(cluster.files[DEVICE_PLUGIN_FILE])
            kubernetes_validate.validate(config_map, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_device_plugin_label_names_a_key_with_the_same_replicas(example):
    """The classic trap: a label naming a key the ConfigMap lacks turns sharing off silently."""
    compiled = compile_file(example)
    rendered = {r.name: r for r in render_fleet(compiled)}
    for cluster in compiled.clusters:
        for compiled_pool in cluster.pools:
            setup = compiled_pool.setup
            key = setup.labels.get(DEVICE_PLUGIN_LABEL)
            if key is None:
                continue
            data = load_yaml(rendered[cluster.name].files[DEVICE_PLUGIN_FILE])["data"]
            assert key in data, f"{compiled_pool.pool.name}: {key} missing from the ConfigMap"
            config = load_yaml(data[key])
            [section] = config["sharing"].values()
            assert section["resources"][0]["replicas"] == setup.replicas


def test_configmap_holds_a_default_and_one_key_per_distinct_config():
    compiled = compile_file(EXAMPLES / "fleet.yaml")
    [aws] = list(render_fleet(compiled, "aws-ml"))
    data = load_yaml(aws.files[DEVICE_PLUGIN_FILE])["data"]
    assert sorted(data) == ["default", "time-sliced-10"]
    assert load_yaml(data["default"]) == {"version": "v1", "flags": {"migStrategy": "single"}}


def test_gpu_operator_values_point_at_the_configmap_and_fit_the_cloud():
    compiled = compile_file(EXAMPLES / "fleet.yaml")
    rendered = {r.name: r for r in render_fleet(compiled)}
    aks = load_yaml(rendered["azure-ml"].files[GPU_OPERATOR_FILE])
    eks = load_yaml(rendered["aws-ml"].files[GPU_OPERATOR_FILE])
    for values in (aks, eks):
        assert values["devicePlugin"]["config"] == {"name": CONFIG_MAP, "create": False, "default": "default"}
        assert values["mig"] == {"strategy": "single"}
        assert values["driver"] == {"enabled": False}  # both node images ship the driver
    assert aks["migManager"] == {"enabled": False}  # AKS partitions at pool creation itself
    assert eks["migManager"] == {"enabled": True}  # EKS MIG comes from the mig.config label


def test_gke_needs_nothing_installed():
    compiled = compile_file(EXAMPLES / "fleet.yaml")
    [gcp] = render_fleet(compiled, "gcp-ml")
    assert gcp.files == {}
    assert "GKE" in gcp.note
