"""What each sharing mode compiles to on each cloud (FACTS.md), and the capacity it gives.

The conventions themselves (keys, documents, reading back) are tested in test_nvidia.py."""

from __future__ import annotations

import pytest

from provisioner.compile import compile_file
from provisioner.nvidia import DevicePluginConfig
from provisioner.pools import GPU_TAINT, POOL_NODE_LABEL, Taint


def setup_of(pool_file, cloud: str, pool: str):
    compiled = compile_file(pool_file(cloud, pool))
    [cluster] = compiled.clusters
    [only] = cluster.pools
    return only.setup


def test_aks_mig_is_the_gpu_instance_profile(pool_file):
    setup = setup_of(
        pool_file,
        "aks",
        """\
        - name: a100mig7
          instanceType: Standard_NC24ads_A100_v4
          gpu: {mig: 1g.10gb}
          nodes: {min: 1, max: 20}
          labels: {team: ml}
          taints: ["dedicated=ml:NoSchedule"]
        """,
    )
    assert setup.mig_setting == "MIG1g"
    # AKS partitions itself: no operator label
    assert dict(setup.labels) == {"team": "ml", POOL_NODE_LABEL: "a100mig7"}
    assert setup.taints == (GPU_TAINT, Taint("dedicated", "ml", "NoSchedule"))
    assert (setup.resource, setup.slices_per_node, setup.memory_per_slice_gb) == ("nvidia.com/gpu", 7, 10)
    assert setup.device_plugin is None and setup.native_sharing is None


def test_aks_time_slicing_is_a_device_plugin_label(pool_file):
    setup = setup_of(
        pool_file,
        "aks",
        """\
        - name: t4shared
          instanceType: Standard_NC64as_T4_v3
          gpu: {sharing: time-slicing, replicas: 10}
          nodes: {count: 2}
        """,
    )
    assert setup.labels == {"nvidia.com/device-plugin.config": "time-sliced-10", POOL_NODE_LABEL: "t4shared"}
    assert setup.device_plugin == DevicePluginConfig("time-slicing", 10)
    assert (setup.mig_setting, setup.native_sharing) == (None, None)
    assert setup.resource == "nvidia.com/gpu.shared"
    assert setup.slices_per_node == 4 * 10  # 4 T4s, 10 clients each
    assert setup.memory_per_slice_gb == 1.6


def test_gke_mig_and_sharing_are_pool_fields(pool_file):
    setup = setup_of(
        pool_file,
        "gke",
        """\
        - name: a100-mig-shared
          instanceType: a2-highgpu-2g
          gpu: {mig: 1g.5gb, sharing: time-slicing, replicas: 3}
          nodes: {min: 0, max: 8}
        """,
    )
    assert setup.mig_setting == "1g.5gb"
    assert (setup.native_sharing.strategy, setup.native_sharing.clients_per_gpu) == ("TIME_SHARING", 3)
    assert setup.device_plugin is None
    assert setup.labels == {
        POOL_NODE_LABEL: "a100-mig-shared"
    }  # GKE shares GPUs itself: no device-plugin label
    assert setup.instance_type.accelerator == "nvidia-tesla-a100"
    assert setup.slices_per_gpu == 21  # FACTS: 7 partitions x 3 clients
    assert setup.slices_per_node == 42
    assert setup.resource == "nvidia.com/gpu"
    assert setup.taints == (GPU_TAINT,)  # set explicitly: GKE adds it only beside a non-GPU pool


def test_gke_mps_on_mig_is_allowed(pool_file):
    setup = setup_of(
        pool_file,
        "gke",
        """\
        - name: h100-mps
          instanceType: a3-highgpu-8g
          gpu: {mig: 3g.40gb, sharing: mps, replicas: 4}
          nodes: {count: 1}
        """,
    )
    assert setup.native_sharing.strategy == "MPS"
    assert setup.slices_per_node == 8 * 2 * 4
    assert setup.memory_per_slice_gb == 10


def test_gke_n1_with_chosen_t4_count(pool_file):
    setup = setup_of(
        pool_file,
        "gke",
        """\
        - name: t4
          instanceType: n1-standard-16
          gpu: {count: 2}
          nodes: {count: 1}
        """,
    )
    assert (setup.gpus_per_node, setup.slices_per_node) == (2, 2)


def test_eks_mig_is_the_mig_manager_label(pool_file):
    setup = setup_of(
        pool_file,
        "eks",
        """\
        - name: p4d-mig
          instanceType: p4d.24xlarge
          gpu: {mig: 1g.5gb}
          nodes: {count: 1}
        """,
    )
    assert setup.labels == {"nvidia.com/mig.config": "all-1g.5gb", POOL_NODE_LABEL: "p4d-mig"}
    assert setup.mig_setting is None
    assert (setup.slices_per_node, setup.memory_per_slice_gb) == (56, 5)


def test_eks_mig_with_time_slicing_takes_both_labels(pool_file):
    setup = setup_of(
        pool_file,
        "eks",
        """\
        - name: p5
          instanceType: p5.48xlarge
          gpu: {mig: 2g.20gb, sharing: time-slicing, replicas: 2}
          nodes: {count: 1}
        """,
    )
    assert setup.labels == {
        "nvidia.com/mig.config": "all-2g.20gb",
        "nvidia.com/device-plugin.config": "time-sliced-2",
        POOL_NODE_LABEL: "p5",
    }
    assert setup.slices_per_node == 8 * 3 * 2


@pytest.mark.parametrize("cloud", ["aks", "eks"])
def test_mps_through_the_device_plugin(pool_file, cloud):
    instance = {"aks": "Standard_NC4as_T4_v3", "eks": "g5.xlarge"}[cloud]
    setup = setup_of(
        pool_file,
        cloud,
        f"""\
        - name: mps4
          instanceType: {instance}
          gpu: {{sharing: mps, replicas: 4}}
          nodes: {{count: 1}}
        """,
    )
    assert setup.labels == {"nvidia.com/device-plugin.config": "mps-4", POOL_NODE_LABEL: "mps4"}
    assert setup.device_plugin == DevicePluginConfig("mps", 4)
    assert (setup.resource, setup.slices_per_node) == ("nvidia.com/gpu.shared", 4)


def test_exclusive_pool_gets_the_gpu_taint_and_whole_gpus(pool_file):
    setup = setup_of(
        pool_file,
        "eks",
        """\
        - name: g5
          instanceType: g5.48xlarge
          nodes: {count: 1}
          taints: ["nvidia.com/gpu=present:NoSchedule"]
        """,
    )
    assert setup.taints == (GPU_TAINT,)  # the user's copy of the GPU taint is not doubled
    assert (setup.slices_per_node, setup.memory_per_slice_gb) == (8, 24)
    assert setup.labels == {POOL_NODE_LABEL: "g5"}  # the fleet pool's name, on every pool


def test_cluster_lists_each_distinct_device_plugin_config_once(pool_file):
    compiled = compile_file(
        pool_file(
            "eks",
            """\
            - name: a
              instanceType: g5.xlarge
              gpu: {sharing: time-slicing, replicas: 10}
              nodes: {count: 1}
            - name: b
              instanceType: g5.2xlarge
              gpu: {sharing: time-slicing, replicas: 10}
              nodes: {count: 1}
            - name: c
              instanceType: g5.4xlarge
              gpu: {sharing: mps, replicas: 4}
              nodes: {count: 1}
            """,
        )
    )
    keys = [config.key for config in compiled.clusters[0].device_plugin_configs]
    assert keys == ["mps-4", "time-sliced-10"]
