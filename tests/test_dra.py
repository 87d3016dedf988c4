"""DRA pools (gpu.allocation: dra): each refusal with its message, what a pool becomes on each cloud
(the device plugin switched off by its labels, GKE's driver installation too), what sync reads back,
and the DRA driver's values and DeviceClasses `render` gives, checked against the Kubernetes
schemas of each version they target."""

from __future__ import annotations

import kubernetes_validate
import pytest
from ruamel.yaml import YAML

from provisioner import render
from provisioner.capacity import capacity
from provisioner.clusters import KubernetesVersion
from provisioner.compile import compile_file, desired_state
from tests.conftest import EXAMPLES, HEADERS
from tests.test_rules import problems
from tests.test_rules_ack import ACK_HEADER

HEADERS_WITH_ACK = {**HEADERS, "ack": ACK_HEADER}
A100_AKS, T4_AKS, L4_GKE, A100_GKE = (
    "Standard_NC24ads_A100_v4",
    "Standard_NC4as_T4_v3",
    "g2-standard-24",
    "a2-highgpu-1g",
)

# (cloud, one pool as flow YAML, the problems). Pools start on line 8 (AKS, GKE, ACK) or 9 (EKS).
REFUSALS = {
    "gke's own mig": (
        "gke",
        f"{{name: p, instanceType: {A100_GKE}, gpu: {{mig: 1g.5gb, allocation: dra}}, nodes: {{count: 1}}}}",
        [
            "8: clusters[gcp-ml].pools[p].gpu.mig: MIG with allocation: dra on GKE: GKE-managed "
            'multi-instance GPUs, time-sharing and MPS cannot be used with DRA (GKE "Set up DRA", '
            "Limitations); a DRA pool on GKE takes whole GPUs"
        ],
    ),
    "gke's own time-sharing": (
        "gke",
        f"{{name: p, instanceType: {L4_GKE}, gpu: {{sharing: time-slicing, replicas: 4, allocation: dra, "
        "draFeatureGates: [TimeSlicingSettings]}, nodes: {count: 1}}",
        [
            "8: clusters[gcp-ml].pools[p].gpu.sharing: time-slicing with allocation: dra on GKE: "
            'GKE-managed multi-instance GPUs, time-sharing and MPS cannot be used with DRA (GKE "Set '
            'up DRA", Limitations); a DRA pool on GKE takes whole GPUs'
        ],
    ),
    "gke's own mps": (
        "gke",
        f"{{name: p, instanceType: {L4_GKE}, gpu: {{sharing: mps, replicas: 4, allocation: dra, "
        "draFeatureGates: [MPSSupport]}, nodes: {count: 1}}",
        [
            "8: clusters[gcp-ml].pools[p].gpu.sharing: mps with allocation: dra on GKE: "
            'GKE-managed multi-instance GPUs, time-sharing and MPS cannot be used with DRA (GKE "Set '
            'up DRA", Limitations); a DRA pool on GKE takes whole GPUs'
        ],
    ),
    "time-slicing without opting in to its alpha gate": (
        "aks",
        f"{{name: p, instanceType: {T4_AKS}, gpu: {{sharing: time-slicing, replicas: 4, allocation: dra}}, "
        "nodes: {count: 1}}",
        [
            "8: clusters[azure-ml].pools[p].gpu.draFeatureGates: time-slicing under DRA needs the "
            "NVIDIA DRA driver's alpha feature gate TimeSlicingSettings "
            "(pkg/featuregates/featuregates.go; off by default): opt in with "
            "draFeatureGates: [TimeSlicingSettings], or use allocation: device-plugin"
        ],
    ),
    "mps without its gate": (
        "eks",
        "{name: p, instanceType: g5.12xlarge, gpu: {sharing: mps, replicas: 4, allocation: dra}, "
        "nodes: {count: 1}}",
        [
            "9: clusters[aws-ml].pools[p].gpu.draFeatureGates: mps under DRA needs the NVIDIA DRA "
            "driver's alpha feature gate MPSSupport (pkg/featuregates/featuregates.go; off by "
            "default): opt in with draFeatureGates: [MPSSupport], or use allocation: device-plugin"
        ],
    ),
    "a gate the tool does not turn on": (
        "aks",
        f"{{name: p, instanceType: {T4_AKS}, gpu: {{allocation: dra, draFeatureGates: [DynamicMIG]}}, "
        "nodes: {count: 1}}",
        [
            "8: clusters[azure-ml].pools[p].gpu.draFeatureGates[0]: 'DynamicMIG' is not a DRA driver "
            "feature gate a pool's sharing turns on; one of: MPSSupport, TimeSlicingSettings"
        ],
    ),
    "gates without dra": (
        "aks",
        f"{{name: p, instanceType: {T4_AKS}, gpu: {{draFeatureGates: [MPSSupport]}}, nodes: {{count: 1}}}}",
        ["8: clusters[azure-ml].pools[p].gpu: draFeatureGates applies only with allocation: dra"],
    ),
    "time-slicing a mig device under dra": (
        "aks",
        f"{{name: p, instanceType: {A100_AKS}, gpu: {{mig: 1g.10gb, sharing: time-slicing, replicas: 2, "
        "allocation: dra, draFeatureGates: [TimeSlicingSettings]}, nodes: {count: 1}}",
        [
            "8: clusters[azure-ml].pools[p].gpu.sharing: time-slicing with gpu.mig under DRA: the DRA "
            "driver's time-slicing has no effect on MIG devices (its mig.md); use mps, or drop gpu.mig"
        ],
    ),
    "more mps clients than cuda mps serves": (
        "eks",
        "{name: p, instanceType: g5.12xlarge, gpu: {sharing: mps, replicas: 64, allocation: dra, "
        "draFeatureGates: [MPSSupport]}, nodes: {count: 1}}",
        ["9: clusters[aws-ml].pools[p].gpu.replicas: 64 clients per GPU for mps under DRA; from 2 to 48"],
    ),
    "ack's memory sharing is its scheduler's, which dra switches off": (
        "ack",
        "{name: p, instanceType: ecs.gn7i-c8g1.2xlarge, gpu: {sharing: memory, isolation: memory, "
        "allocation: dra}, nodes: {count: 1}}",
        [
            "8: clusters[ali-ml].pools[p].gpu.sharing: memory with allocation: dra on ACK: memory "
            "sharing is ACK's GPU scheduler's, which a DRA pool switches off; use sharing: "
            "time-slicing or mps with allocation: dra, or allocation: device-plugin"
        ],
    ),
    "ack edge pools": (
        "ack",
        "{name: p, edge: true, gpu: {model: T4, count: 1, allocation: dra}}",
        [
            "8: clusters[ali-ml].pools[p].gpu.allocation: allocation: dra on ACK: ACK's DRA "
            "documentation covers ACK managed clusters' cloud node pools, not edge pools"
        ],
    ),
    "the device plugin's off switch is the tool's": (
        "eks",
        "{name: p, instanceType: g5.12xlarge, gpu: {allocation: dra}, nodes: {count: 1}, "
        "labels: {nvidia.com/gpu.deploy.device-plugin: 'true'}}",
        [
            '9: clusters[aws-ml].pools[p].labels["nvidia.com/gpu.deploy.device-plugin"]: '
            "nvidia.com/gpu.deploy.device-plugin is set by provisioner from gpu.allocation; remove it "
            "from labels"
        ],
    ),
    "an allocation the tool does not know": (
        "aks",
        f"{{name: p, instanceType: {T4_AKS}, gpu: {{allocation: cdi}}, nodes: {{count: 1}}}}",
        ["8: clusters[azure-ml].pools[p].gpu.allocation: 'cdi' is not allowed; one of: device-plugin, dra"],
    ),
}


@pytest.mark.parametrize("name", REFUSALS)
def test_refusal(name, fleet_file):
    cloud, pool, expected = REFUSALS[name]
    assert problems(fleet_file(HEADERS_WITH_ACK[cloud] + f"      - {pool}\n")) == expected


def example() -> dict[str, dict[str, object]]:
    compiled = compile_file(EXAMPLES / "dra.yaml")
    return {c.name: {p.pool.name: p for p in c.pools} for c in compiled.clusters} | {"_": compiled}


def test_each_cloud_switches_its_device_plugin_off_and_sync_reads_the_pool_back_as_dra():
    pools = example()
    expected_labels = {
        ("azure-dra", "a100dra"): {"nvidia.com/gpu.deploy.device-plugin": "false"},
        ("gcp-dra", "l4-dra"): {"gke-no-default-nvidia-gpu-device-plugin": "true"},
        ("aws-dra", "p4de-dra"): {
            "nvidia.com/gpu.deploy.device-plugin": "false",
            "nvidia.com/mig.config": "all-2g.20gb",  # the MIG manager still partitions
        },
        ("ali-dra", "a10-dra"): {"ack.node.gpu.schedule": "disabled"},
        ("aws-dra", "g5-dra-ts"): {
            "nvidia.com/gpu.deploy.device-plugin": "false",
            "gpu.provisioner.io/dra-sharing": "time-sliced-4",
        },
    }
    for (cluster, name), labels in expected_labels.items():
        compiled = pools[cluster][name]
        state = desired_state(compiled)
        assert state.label_map == {**labels, "provisioner.io/pool": name}, (cluster, name)
        assert "nvidia.com/device-plugin.config" not in state.label_map  # no device-plugin config
        offers = capacity(compiled.cloud.key, state)
        assert offers.allocation_mode == "dra"
        assert (offers.sharing, offers.replicas, offers.mig_profile) == (
            compiled.setup.sharing,
            compiled.setup.replicas,
            compiled.setup.mig.name if compiled.setup.mig else None,
        )
        assert offers.resource == ("mig.nvidia.com" if compiled.setup.mig else "gpu.nvidia.com")
    gke = desired_state(pools["gcp-dra"]["l4-dra"])
    assert gke.cloud_installs_driver is False and gke.sharing is None and gke.mig_setting is None
    aks = desired_state(pools["azure-dra"]["a100dra"])
    assert aks.mig_setting == "MIG1g" and aks.cloud_installs_driver is None  # AKS partitions it


def test_a_device_plugin_pool_reads_back_as_one():
    compiled = compile_file(EXAMPLES / "mig.yaml")
    for cluster in compiled.clusters:
        for pool in cluster.pools:
            assert capacity(cluster.cloud.key, desired_state(pool)).allocation_mode == "device-plugin"


def documents(text: str) -> list[dict]:
    return [d for d in YAML(typ="safe").load_all(text) if d]


def test_the_driver_values_select_the_dra_pools_nodes_with_the_clouds_root_and_gates():
    compiled = example()["_"]
    values = {
        c.name: render.dra_driver_values(c)
        for c in compiled.clusters  # every example cluster has DRA
    }
    assert values["gcp-dra"]["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    assert values["azure-dra"]["nvidiaDriverRoot"] == "/"
    assert values["azure-dra"]["featureGates"] == {"TimeSlicingSettings": True}
    assert "featureGates" not in values["gcp-dra"]  # whole GPUs need no alpha gate
    for name, value in values.items():
        assert value["gpuResourcesEnabledOverride"] is True
        plugin = value["kubeletPlugin"]
        assert plugin["affinity"] is None  # Helm deletes the chart's NFD/Operator affinity
        cluster = compiled.cluster(name)
        assert plugin["nodeSelector"] == dict(cluster.cloud.dra.device_plugin_off)
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in plugin[
            "tolerations"
        ]


def test_the_kubelet_plugin_tolerates_the_dra_pools_taints(pool_file):
    path = pool_file(
        "eks",
        """\
        - name: p
          instanceType: g5.12xlarge
          gpu: {allocation: dra}
          nodes: {count: 1}
          taints: ["team=ml:NoExecute"]
        """,
    )
    [cluster] = compile_file(path).clusters
    tolerations = render.dra_driver_values(cluster)["kubeletPlugin"]["tolerations"]
    assert {"key": "team", "operator": "Exists", "effect": "NoExecute"} in tolerations


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
def test_device_classes_validate_for_the_version_they_target(version):
    compiled = example()["_"]
    cluster = compiled.cluster("azure-dra")
    parsed = KubernetesVersion.parse(version)
    rendered = render.render_cluster(cluster, parsed)
    [device_class] = documents(rendered.files[render.DRA_CLASSES_FILE])
    kubernetes_validate.validate(device_class, f"{version}.0", strict=True)
    assert device_class["metadata"]["name"] == "mig-1g.10gb.nvidia.com"
    expression = device_class["spec"]["selectors"][0]["cel"]["expression"]
    assert "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'" in expression
    mapped = device_class["spec"].get("extendedResourceName")
    assert mapped == ("nvidia.com/mig-1g.10gb" if parsed.at_least((1, 36)) else None)


def test_clusters_without_dra_pools_render_as_before():
    compiled = compile_file(EXAMPLES / "fleet.yaml")
    for cluster in compiled.clusters:
        files = render.render_cluster(cluster).files
        assert render.DRA_DRIVER_FILE not in files and render.DRA_CLASSES_FILE not in files


def test_versions_parse_each_clouds_spelling():
    for text in ("1.35.0", "1.35.1-gke.1000000", "1.35", "1.35.1-aliyun.1", "v1.35.2"):
        assert KubernetesVersion.parse(text) == KubernetesVersion(1, 35)
    assert KubernetesVersion.parse("1.33.4") < KubernetesVersion(1, 34)
    with pytest.raises(ValueError):
        KubernetesVersion.parse("latest")


def test_render_takes_the_clusters_version_for_the_extended_resource(tmp_path):
    from click.testing import CliRunner

    from provisioner.cli import main

    runner = CliRunner()
    fleet = str(EXAMPLES / "dra.yaml")
    newer = runner.invoke(main, ["render", fleet, "--cluster", "azure-dra", "--kubernetes-version", "1.36"])
    assert newer.exit_code == 0, newer.output
    assert "extendedResourceName: nvidia.com/mig-1g.10gb" in newer.stdout
    written = runner.invoke(main, ["render", fleet, "--out-dir", str(tmp_path)])
    assert written.exit_code == 0, written.output
    assert (tmp_path / "gcp-dra" / "dra-driver-values.yaml").is_file()
    assert not (tmp_path / "gcp-dra" / "dra-device-classes.yaml").exists()  # no MIG on GKE DRA
    assert "extendedResourceName:" not in (tmp_path / "azure-dra" / "dra-device-classes.yaml").read_text()
    bad = runner.invoke(main, ["render", fleet, "--kubernetes-version", "latest"])
    assert bad.exit_code == 1
    assert "--kubernetes-version: 'latest' is not a Kubernetes version" in bad.output


def test_an_ack_pool_switched_to_dra_is_an_update_of_its_scheduling_label(fleet_file):
    import dataclasses

    from provisioner.observe import Observation
    from provisioner.plan import diff_cluster

    pool = "{name: p, instanceType: ecs.gn7i-c8g1.2xlarge, gpu: {%s}, nodes: {count: 1}}"
    before = compile_file(fleet_file(ACK_HEADER + f"      - {pool % ''}\n")).clusters[0]
    after = compile_file(fleet_file(ACK_HEADER + f"      - {pool % 'allocation: dra'}\n")).clusters[0]
    observed = dataclasses.replace(desired_state(before.pools[0]), status="ready")
    plan = diff_cluster(after, Observation(after.target, (observed,)))
    [change] = plan.changes
    assert change.action.name == "update"
    [labels] = change.fields
    assert (labels.field, labels.before, labels.after) == (
        "labels",
        {"ack.node.gpu.schedule": "default", "provisioner.io/pool": "p"},
        {"ack.node.gpu.schedule": "disabled", "provisioner.io/pool": "p"},
    )


def test_a_gke_device_plugin_pool_whose_user_installs_the_driver_is_left_so(pool_file):
    import dataclasses

    from provisioner.observe import Observation
    from provisioner.plan import diff_cluster

    path = pool_file("gke", "- {name: p, instanceType: g2-standard-24, nodes: {count: 3}}\n")
    [cluster] = compile_file(path).clusters
    observed = dataclasses.replace(desired_state(cluster.pools[0]), cloud_installs_driver=False)
    assert diff_cluster(cluster, Observation(cluster.target, (observed,))).changes == ()
