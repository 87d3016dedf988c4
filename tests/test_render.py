"""Rendered manifests: valid Kubernetes objects, every pool's label names a key that exists; the CronJob."""

from __future__ import annotations

import kubernetes_validate
import pytest
from conftest import EXAMPLES
from ruamel.yaml import YAML

from provisioner import hardware
from provisioner.compile import compile_file
from provisioner.nvidia import DEVICE_PLUGIN_LABEL
from provisioner.render import CONFIG_MAP, DEVICE_PLUGIN_FILE, GPU_OPERATOR_FILE, render_fleet

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


# Every leaf key the tool renders, as deployments/gpu-operator/values.yaml of NVIDIA/gpu-operator
# defines it at the pinned chart version (v26.7.0; hardware/clouds.yaml gpuOperatorChart). Checked
# against that file when the version was pinned; a new rendered key must be checked and added here.
CHART_VALUE_KEYS = {
    "mig.strategy",
    "devicePlugin.config.name",
    "devicePlugin.config.create",
    "devicePlugin.config.default",
    "operator.runtimeClass",
    "driver.enabled",
    "toolkit.enabled",
    "migManager.enabled",
    "daemonsets.tolerations",
    "node-feature-discovery.worker.tolerations",
}
CHART_VERSION = "v26.7.0"

TAINTED_EKS_POOLS = """\
- name: g5-batch
  instanceType: g5.xlarge
  gpu: {sharing: time-slicing, replicas: 4}
  nodes: {min: 0, max: 2}
  taints: ["batch=true:NoExecute", "dedicated=ml:NoSchedule"]
- name: g5-more
  instanceType: g5.2xlarge
  nodes: {min: 0, max: 2}
  taints: ["dedicated=other:NoSchedule"]
"""


def _leaf_keys(values: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        keys |= _leaf_keys(value, f"{path}.") if isinstance(value, dict) and value else {path}
    return keys


def _values(compiled, cluster: str) -> dict:
    [rendered] = render_fleet(compiled, cluster)
    return load_yaml(rendered.files[GPU_OPERATOR_FILE])


def test_operator_runtime_class_is_the_handler_each_clouds_nodes_have():
    """AKS GPU nodes have no `nvidia` handler (the chart's default): the operator's pods would not start."""
    compiled = compile_file(EXAMPLES / "fleet.yaml")
    assert _values(compiled, "azure-ml")["operator"] == {"runtimeClass": "nvidia-container-runtime"}
    assert _values(compiled, "aws-ml")["operator"] == {"runtimeClass": "nvidia"}


def test_aks_spot_and_user_taints_are_tolerated_by_the_gpu_stack():
    """The example's a100mig7 pool is Spot (AKS adds its taint) and carries dedicated=ml."""
    values = _values(compile_file(EXAMPLES / "fleet.yaml"), "azure-ml")
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    dedicated = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    spot = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Exists", "effect": "NoSchedule"}
    control_plane = {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Equal",
        "value": "",
        "effect": "NoSchedule",
    }
    assert values["daemonsets"] == {"tolerations": [gpu, dedicated, spot]}
    assert values["node-feature-discovery"] == {
        "worker": {"tolerations": [control_plane, gpu, dedicated, spot]}
    }


def test_every_taint_key_and_effect_is_tolerated_once(pool_file):
    compiled = compile_file(pool_file("eks", TAINTED_EKS_POOLS))
    [cluster] = compiled.clusters
    tolerations = _values(compiled, cluster.cluster.name)["daemonsets"]["tolerations"]
    assert [(t["key"], t["effect"]) for t in tolerations] == [
        ("nvidia.com/gpu", "NoSchedule"),
        ("batch", "NoExecute"),
        ("dedicated", "NoSchedule"),
    ]
    assert {t["operator"] for t in tolerations} == {"Exists"}


def test_pools_with_only_the_gpu_taint_keep_the_charts_tolerations():
    values = _values(compile_file(EXAMPLES / "fleet.yaml"), "aws-ml")
    assert "daemonsets" not in values and "node-feature-discovery" not in values


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_rendered_key_exists_in_the_pinned_chart(example, pool_file):
    fleets = [compile_file(example), compile_file(pool_file("eks", TAINTED_EKS_POOLS))]
    for compiled in fleets:
        for cluster in render_fleet(compiled):
            if GPU_OPERATOR_FILE in cluster.files:
                rendered = _leaf_keys(load_yaml(cluster.files[GPU_OPERATOR_FILE]))
                assert rendered <= CHART_VALUE_KEYS, rendered - CHART_VALUE_KEYS


def test_values_header_pins_the_chart_version():
    """H200 MIG configs (all-1g.18gb) exist only from v24.6.0: the values say which chart they are for."""
    [aws] = render_fleet(compile_file(EXAMPLES / "fleet.yaml"), "aws-ml")
    header = [line for line in aws.files[GPU_OPERATOR_FILE].splitlines() if line.startswith("#")]
    assert (
        "#   helm install gpu-operator nvidia/gpu-operator --version v26.7.0 -n gpu-operator "
        "--create-namespace -f <this file>"
    ) in header
    assert hardware.load().gpu_operator_chart.version == CHART_VERSION


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.name)
def test_plan_compares_the_very_config_map_render_prints(example):
    """Plan's document (rendered alone, its configs' YAML kept between clusters, parsed by the C
    parser) is the one `render` prints, cluster by cluster."""
    from provisioner.kube.configmap import desired_document

    compiled = compile_file(example)
    for cluster, rendered in zip(compiled.clusters, render_fleet(compiled), strict=True):
        text = rendered.files.get(DEVICE_PLUGIN_FILE)
        assert desired_document(cluster) == (None if text is None else load_yaml(text))


def test_to_yaml_tells_apart_values_that_compare_equal():
    """1, 1.0, True and "1" are equal or alike to Python, not to YAML: each is dumped as itself,
    however often and in whatever order they come."""
    from provisioner.render import to_yaml

    values = [1, 1.0, True, "1", None, [1], {"1": 1}]
    first = [to_yaml({"v": v}) for v in values]
    assert len(set(first)) == len(values)
    assert [to_yaml({"v": v}) for v in reversed(values)] == list(reversed(first))
    assert [load_yaml(text)["v"] for text in first] == values
