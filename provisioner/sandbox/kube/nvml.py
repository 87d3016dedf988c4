"""What NVML reports about each GPU, as NVIDIA's DRA kubelet plugin reads it (cmd/gpu-kubelet-plugin
nvlib.go: device.GetName, GetArchitectureAsString, GetBrandAsString, GetCudaComputeCapability,
GetMemoryInfo; SystemGetDriverVersion, SystemGetCudaDriverVersion), keyed as rules.PRODUCTS is.

Sources, per column:
- name: the NVML device name (`nvidia-smi -L`); GPU feature discovery writes it with spaces as
  hyphens as nvidia.com/gpu.product (rules.PRODUCTS; tests/test_sandbox_independence.py checks the
  two agree). "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "NVIDIA B200", "NVIDIA L40S":
  kubernetes-sigs/dra-driver-nvidia-gpu hack/ci/mock-nvml/common.sh (mock_nvml_expected_name).
- architecture and compute capability: NVIDIA "CUDA GPUs - Compute Capability"
  (developer.nvidia.com/cuda-gpus), named as go-nvlib device.go GetArchitectureAsString does.
- memory (MiB): NVIDIA/go-nvml pkg/nvml/mock/shared/gpus (A100 40960 and 81920, H100 81920);
  the others DERIVED, unverified: the nominal GB x 1024.
- brand: go-nvlib GetBrandAsString ("Nvidia" for BRAND_NVIDIA, "Tesla" for BRAND_TESLA); INFERRED
  from the product names (the Tesla-named GPUs report BRAND_TESLA).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    name: str
    architecture: str
    compute_capability: str
    memory_mib: int
    brand: str = "Nvidia"


GPUS: dict[str, Gpu] = {
    "A100-40GB": Gpu("NVIDIA A100-SXM4-40GB", "Ampere", "8.0", 40960),
    "A100-80GB": Gpu("NVIDIA A100-SXM4-80GB", "Ampere", "8.0", 81920),
    "H100-80GB": Gpu("NVIDIA H100 80GB HBM3", "Hopper", "9.0", 81920),
    "H100-NVL-94GB": Gpu("NVIDIA H100 NVL", "Hopper", "9.0", 94 * 1024),
    "H200-141GB": Gpu("NVIDIA H200", "Hopper", "9.0", 141 * 1024),
    "B200": Gpu("NVIDIA B200", "Blackwell", "10.0", 180 * 1024),
    "A30-24GB": Gpu("NVIDIA A30", "Ampere", "8.0", 24 * 1024),
    "RTX-PRO-6000-96GB": Gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition", "Blackwell", "12.0", 96 * 1024),
    "T4-16GB": Gpu("Tesla T4", "Turing", "7.5", 16 * 1024, "Tesla"),
    "L4-24GB": Gpu("NVIDIA L4", "Ada Lovelace", "8.9", 24 * 1024),
    "A10G-24GB": Gpu("NVIDIA A10G", "Ampere", "8.6", 24 * 1024),
    "L40S-48GB": Gpu("NVIDIA L40S", "Ada Lovelace", "8.9", 48 * 1024),
    "V100-16GB": Gpu("Tesla V100-SXM2-16GB", "Volta", "7.0", 16 * 1024, "Tesla"),
    "V100-32GB": Gpu("Tesla V100-SXM2-32GB", "Volta", "7.0", 32 * 1024, "Tesla"),
    "A10-24GB": Gpu("NVIDIA A10", "Ampere", "8.6", 24 * 1024),
    "L20-48GB": Gpu("NVIDIA L20", "Ada Lovelace", "8.9", 48 * 1024),
}
# The PCIe form where rules.PCIE_PRODUCTS names one (Azure's NC A100 v4 sizes).
PCIE_NAMES = {"NVIDIA-A100-80GB-PCIe": "NVIDIA A100 80GB PCIe"}

# MIG GPU-instance memory (MemorySizeMB, in MiB) per profile: go-nvml's mocks for the A100s and the
# H100 (shared/gpus a100.go, h100.go); elsewhere DERIVED from the profile's name (<n>gb x 1024).
MIG_MEMORY_MIB: dict[str, dict[str, int]] = {
    "A100-40GB": {
        "1g.5gb": 4864,
        "1g.10gb": 9856,
        "2g.10gb": 9856,
        "3g.20gb": 19968,
        "4g.20gb": 19968,
        "7g.40gb": 40192,
    },
    "A100-80GB": {
        "1g.10gb": 9856,
        "1g.20gb": 19968,
        "2g.20gb": 19968,
        "3g.40gb": 40192,
        "4g.40gb": 40192,
        "7g.80gb": 80384,
    },
    "H100-80GB": {
        "1g.10gb": 10240,
        "1g.20gb": 20480,
        "2g.20gb": 20480,
        "3g.40gb": 40960,
        "4g.40gb": 40960,
        "7g.80gb": 81920,
    },
}

# The host driver the sandbox's GPU nodes run: a sandbox choice, above the DRA driver's minimum
# (565; dra-driver-nvidia-gpu site/content/docs/prerequisites.md L17-20).
DRIVER_VERSION = "570.158.01"
CUDA_DRIVER_VERSION = "12.8"


def mig_memory_mib(gpu: str, profile: str) -> int:
    known = MIG_MEMORY_MIB.get(gpu, {}).get(profile)
    if known is not None:
        return known
    size = profile.split(".", 1)[1].split("+", 1)[0].removesuffix("-me").removesuffix("gb")
    return int(size) * 1024
