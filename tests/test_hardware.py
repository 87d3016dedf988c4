"""The hardware data agrees with ../shared/FACTS.md, row for row (the tables are copied here)."""

from __future__ import annotations

import pytest

from provisioner import hardware

HW = hardware.load()

# FACTS.md "MIG profiles per GPU": profile x instances per GPU.
FACTS_MIG = {
    "A100 40GB": "1g.5gb x7, 1g.10gb x4, 2g.10gb x3, 3g.20gb x2, 4g.20gb x1, 7g.40gb x1",
    "A100 80GB": "1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1",
    "H100 80GB": "1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1",
    "H100 NVL 94GB": "1g.12gb x7, 1g.24gb x4, 2g.24gb x3, 3g.47gb x2, 4g.47gb x1, 7g.94gb x1",
    "H200 141GB": "1g.18gb x7, 1g.35gb x4, 2g.35gb x3, 3g.71gb x2, 4g.71gb x1, 7g.141gb x1",
    "B200": "1g.23gb x7, 1g.45gb x4, 2g.45gb x3, 3g.90gb x2, 4g.90gb x1, 7g.180gb x1",
    "A30 24GB": "1g.6gb x4, 2g.12gb x2, 4g.24gb x1",
}
NOT_MIG = ["T4 16GB", "L4 24GB", "A10G 24GB", "V100 16GB", "L40S 48GB", "A10 24GB", "L20 48GB", "V100 32GB"]

# FACTS.md "Instance types and their GPUs": (cloud, instance type, GPU, GPUs per node).
FACTS_INSTANCES = [
    ("aks", "Standard_NC24ads_A100_v4", "A100 80GB", 1),
    ("aks", "Standard_NC48ads_A100_v4", "A100 80GB", 2),
    ("aks", "Standard_NC96ads_A100_v4", "A100 80GB", 4),
    ("aks", "Standard_ND96asr_v4", "A100 40GB", 8),
    ("aks", "Standard_ND96amsr_A100_v4", "A100 80GB", 8),
    ("aks", "Standard_NC40ads_H100_v5", "H100 NVL 94GB", 1),
    ("aks", "Standard_NC80adis_H100_v5", "H100 NVL 94GB", 2),
    ("aks", "Standard_ND96isr_H100_v5", "H100 80GB", 8),
    ("aks", "Standard_ND96isr_H200_v5", "H200 141GB", 8),
    ("aks", "Standard_NC4as_T4_v3", "T4 16GB", 1),
    ("aks", "Standard_NC8as_T4_v3", "T4 16GB", 1),
    ("aks", "Standard_NC16as_T4_v3", "T4 16GB", 1),
    ("aks", "Standard_NC64as_T4_v3", "T4 16GB", 4),
    *[("gke", f"a2-highgpu-{n}g", "A100 40GB", n) for n in (1, 2, 4, 8)],
    ("gke", "a2-megagpu-16g", "A100 40GB", 16),
    *[("gke", f"a2-ultragpu-{n}g", "A100 80GB", n) for n in (1, 2, 4, 8)],
    *[("gke", f"a3-highgpu-{n}g", "H100 80GB", n) for n in (1, 2, 4, 8)],
    ("gke", "a3-ultragpu-8g", "H200 141GB", 8),
    ("gke", "a4-highgpu-8g", "B200", 8),
    *[("gke", f"g2-standard-{v}", "L4 24GB", 1) for v in (4, 8, 12, 16, 32)],
    ("gke", "g2-standard-24", "L4 24GB", 2),
    ("gke", "g2-standard-48", "L4 24GB", 4),
    ("gke", "g2-standard-96", "L4 24GB", 8),
    ("eks", "p4d.24xlarge", "A100 40GB", 8),
    ("eks", "p4de.24xlarge", "A100 80GB", 8),
    ("eks", "p5.48xlarge", "H100 80GB", 8),
    ("eks", "p5e.48xlarge", "H200 141GB", 8),
    ("eks", "p5en.48xlarge", "H200 141GB", 8),
    *[
        ("eks", f"g5.{size}", "A10G 24GB", 1)
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
    ],
    ("eks", "g5.12xlarge", "A10G 24GB", 4),
    ("eks", "g5.24xlarge", "A10G 24GB", 4),
    ("eks", "g5.48xlarge", "A10G 24GB", 8),
]
# Alibaba Cloud ECS "GPU-accelerated compute-optimized instance families" (GPU column, model and
# count); gn7 / ebmgn7 named A100 by ACK's MIG guide (instance_types.yaml says more).
ACK_INSTANCES = [
    *[("ack", f"ecs.gn6i-{size}", "T4 16GB", 1) for size in ("c4g1.xlarge", "c8g1.2xlarge", "c16g1.4xlarge")],
    *[("ack", f"ecs.gn6i-{size}", "T4 16GB", 1) for size in ("c24g1.6xlarge", "c40g1.10xlarge")],
    ("ack", "ecs.gn6i-c24g1.12xlarge", "T4 16GB", 2),
    ("ack", "ecs.gn6i-c24g1.24xlarge", "T4 16GB", 4),
    ("ack", "ecs.ebmgn6i.24xlarge", "T4 16GB", 4),
    *[
        ("ack", f"ecs.gn7i-{size}", "A10 24GB", 1)
        for size in ("c8g1.2xlarge", "c16g1.4xlarge", "c32g1.8xlarge", "c48g1.12xlarge", "c56g1.14xlarge")
    ],
    ("ack", "ecs.gn7i-c32g1.16xlarge", "A10 24GB", 2),
    ("ack", "ecs.gn7i-c32g1.32xlarge", "A10 24GB", 4),
    ("ack", "ecs.gn7i-2x.8xlarge", "A10 24GB", 2),
    ("ack", "ecs.gn7i-4x.8xlarge", "A10 24GB", 4),
    ("ack", "ecs.gn7i-4x.16xlarge", "A10 24GB", 4),
    ("ack", "ecs.gn7i-8x.16xlarge", "A10 24GB", 8),
    ("ack", "ecs.gn7i-8x.32xlarge", "A10 24GB", 8),
    ("ack", "ecs.ebmgn7i.32xlarge", "A10 24GB", 4),
    *[
        ("ack", f"ecs.gn7s-{size}", "A30 24GB", 1)
        for size in ("c8g1.2xlarge", "c16g1.4xlarge", "c32g1.8xlarge", "c48g1.12xlarge", "c56g1.14xlarge")
    ],
    ("ack", "ecs.gn7s-c32g1.16xlarge", "A30 24GB", 2),
    ("ack", "ecs.gn7s-c32g1.32xlarge", "A30 24GB", 4),
    ("ack", "ecs.gn8is.2xlarge", "L20 48GB", 1),
    ("ack", "ecs.gn8is.4xlarge", "L20 48GB", 1),
    ("ack", "ecs.gn8is-2x.8xlarge", "L20 48GB", 2),
    ("ack", "ecs.gn8is-4x.16xlarge", "L20 48GB", 4),
    ("ack", "ecs.gn8is-8x.32xlarge", "L20 48GB", 8),
    ("ack", "ecs.ebmgn8is.32xlarge", "L20 48GB", 8),
    ("ack", "ecs.ebmgn8ia.64xlarge", "L20 48GB", 4),
    ("ack", "ecs.gn7-c12g1.3xlarge", "A100 40GB", 1),
    ("ack", "ecs.gn7-c13g1.13xlarge", "A100 40GB", 4),
    ("ack", "ecs.gn7-c13g1.26xlarge", "A100 40GB", 8),
    ("ack", "ecs.ebmgn7.26xlarge", "A100 40GB", 8),
    ("ack", "ecs.gn6v-c8g1.2xlarge", "V100 16GB", 1),
    ("ack", "ecs.gn6v-c8g1.4xlarge", "V100 16GB", 2),
    ("ack", "ecs.gn6v-c8g1.8xlarge", "V100 16GB", 4),
    ("ack", "ecs.gn6v-c8g1.16xlarge", "V100 16GB", 8),
    ("ack", "ecs.gn6v-c10g1.20xlarge", "V100 16GB", 8),
    ("ack", "ecs.gn6e-c12g1.3xlarge", "V100 32GB", 1),
    ("ack", "ecs.gn6e-c12g1.6xlarge", "V100 32GB", 2),
    ("ack", "ecs.gn6e-c12g1.12xlarge", "V100 32GB", 4),
    ("ack", "ecs.gn6e-c12g1.24xlarge", "V100 32GB", 8),
]
# Beyond FACTS.md, from the primary sources instance_types.yaml names: AWS "Specifications for
# Amazon EC2 accelerated computing instances" (Accelerators column); GoogleCloudPlatform/
# cluster-toolkit pkg/config/hardware.go (rtx-6000-N, h100-mega-80gb-8).
SOURCED_INSTANCES = [
    ("eks", "p5.4xlarge", "H100 80GB", 1),
    ("eks", "p6-b200.48xlarge", "B200", 8),
    *[
        ("eks", f"g4dn.{size}", "T4 16GB", 1)
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
    ],
    ("eks", "g4dn.12xlarge", "T4 16GB", 4),
    ("eks", "g4dn.metal", "T4 16GB", 8),
    *[
        ("eks", f"g6.{size}", "L4 24GB", 1)
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
    ],
    ("eks", "g6.12xlarge", "L4 24GB", 4),
    ("eks", "g6.24xlarge", "L4 24GB", 4),
    ("eks", "g6.48xlarge", "L4 24GB", 8),
    *[
        ("eks", f"g6e.{size}", "L40S 48GB", 1)
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
    ],
    ("eks", "g6e.12xlarge", "L40S 48GB", 4),
    ("eks", "g6e.24xlarge", "L40S 48GB", 4),
    ("eks", "g6e.48xlarge", "L40S 48GB", 8),
    ("gke", "a3-megagpu-8g", "H100 80GB", 8),
    ("gke", "g4-standard-48", "RTX PRO 6000 96GB", 1),
    ("gke", "g4-standard-96", "RTX PRO 6000 96GB", 2),
    ("gke", "g4-standard-192", "RTX PRO 6000 96GB", 4),
    ("gke", "g4-standard-384", "RTX PRO 6000 96GB", 8),
    *ACK_INSTANCES,
]

# FACTS.md GKE: accelerator type names of the MIG-capable GPUs.
FACTS_GKE_ACCELERATORS = {
    "a2-highgpu-1g": "nvidia-tesla-a100",
    "a2-ultragpu-1g": "nvidia-a100-80gb",
    "a3-highgpu-1g": "nvidia-h100-80gb",
    "a3-ultragpu-8g": "nvidia-h200-141gb",
    "a4-highgpu-8g": "nvidia-b200",
    "a3-megagpu-8g": "nvidia-h100-mega-80gb",  # cluster-toolkit pkg/config/machine_mappings.json
    "g4-standard-48": "nvidia-rtx-pro-6000",  # cluster-toolkit pkg/config/machine_mappings.json
    "g2-standard-4": "nvidia-l4",
    "n1-standard-4": "nvidia-tesla-t4",
}


def _gpu_named(name: str) -> hardware.Gpu:
    return next(g for g in HW.gpus.values() if g.name == name)


@pytest.mark.parametrize("gpu", FACTS_MIG)
def test_mig_profiles_match_facts(gpu):
    listed = ", ".join(f"{p.name} x{p.instances}" for p in _gpu_named(gpu).mig.values())
    assert listed == FACTS_MIG[gpu]


@pytest.mark.parametrize("gpu", NOT_MIG)
def test_not_mig_capable(gpu):
    assert not _gpu_named(gpu).mig_capable


@pytest.mark.parametrize(("cloud", "name", "gpu", "count"), FACTS_INSTANCES + SOURCED_INSTANCES)
def test_instance_types_match_facts(cloud, name, gpu, count):
    instance = HW.instance_type(cloud, name)
    assert instance is not None, f"{name} missing from {cloud}"
    assert (instance.gpu.name, instance.gpus) == (gpu, count)


def test_gke_n1_takes_a_chosen_number_of_t4s():
    instance = HW.instance_type("gke", "n1-standard-8")
    assert (instance.gpu.name, instance.gpus, instance.gpu_choices) == ("T4 16GB", None, (1, 2, 4))


@pytest.mark.parametrize(("name", "accelerator"), FACTS_GKE_ACCELERATORS.items())
def test_gke_accelerator_names(name, accelerator):
    assert HW.instance_type("gke", name).accelerator == accelerator


def test_every_gke_type_names_its_accelerator_and_no_other_cloud_does():
    for cloud, types in HW.instance_types.items():
        for instance in types.values():
            assert (instance.accelerator is not None) == (cloud == "gke"), instance.name


def test_aks_gpu_instance_profiles_are_the_gi_ids_agentbaker_partitions_into():
    aks = HW.clouds["aks"]
    assert dict(aks.mig_values) == {"MIG1g": 19, "MIG2g": 14, "MIG3g": 9, "MIG4g": 5, "MIG7g": 0}
    a100_80 = _gpu_named("A100 80GB")
    settings = {p.name: aks.mig_setting(p) for p in aks.mig_profiles(a100_80)}
    assert settings == {
        "1g.10gb": "MIG1g",
        "2g.20gb": "MIG2g",
        "3g.40gb": "MIG3g",
        "4g.40gb": "MIG4g",
        "7g.80gb": "MIG7g",
    }
    h200 = _gpu_named("H200 141GB")
    assert next(p.name for p in aks.mig_profiles(h200)) == "1g.18gb"  # FACTS: MIG1g is 1g.18gb on H200


def test_profile_names_parse_into_compute_and_memory():
    profile = _gpu_named("H200 141GB").mig["3g.71gb"]
    assert (profile.compute_slices, profile.memory_gb) == (3, 71)


def test_every_instance_type_is_transcribed_here_with_its_source():
    """A row added to instance_types.yaml without a sourced row in this file fails here."""
    listed = {(cloud, name) for cloud, name, _, _ in FACTS_INSTANCES + SOURCED_INSTANCES}
    n1 = {("gke", f"n1-standard-{n}") for n in (4, 8, 16, 32)}  # test_gke_n1_takes_a_chosen_number_of_t4s
    data = {(cloud, name) for cloud, types in HW.instance_types.items() for name in types}
    assert data - n1 == listed


def test_gke_rtx_pro_6000_partitions_as_gke_names_them():
    gke = HW.clouds["gke"]
    profiles = [(p.name, p.instances) for p in gke.mig_profiles(_gpu_named("RTX PRO 6000 96GB"))]
    assert profiles == [("1g.24gb", 4), ("2g.48gb", 2), ("4g.96gb", 1)]


def test_gke_partition_sizes_are_those_its_partitioner_and_device_plugin_both_know():
    """container-engine-accelerators: partition_gpu.go knows GI 15 only on H100, H200 and B200;
    pkg/gpu/nvidia/mig/mig.go knows no 4g.20gb or 4g.40gb (its device plugin fails on them)."""
    gke = HW.clouds["gke"]
    offered = {
        gpu: [p.name for p in gke.mig_profiles(_gpu_named(gpu))]
        for gpu in ("A100 40GB", "A100 80GB", "H100 80GB", "H200 141GB", "B200")
    }
    assert offered == {
        "A100 40GB": ["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"],
        "A100 80GB": ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"],
        "H100 80GB": ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb"],
        "H200 141GB": ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
        "B200": ["1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
    }
