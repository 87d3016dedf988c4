"""What a GPU node advertises to Kubernetes, given its hardware, its labels and the ConfigMaps in
its cluster: the GPU stack each cloud runs, as its vendor documents it.

These are the sandbox's own tables, each with its source, independent of the tool's hardware data
(tests/test_sandbox_independence.py compares the two), so a wrong fact on either side fails a test.
The point of the rules is the failure users meet: a node whose label names a device-plugin config
the ConfigMap lacks advertises whole GPUs, silently, and `verify` must catch exactly that.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from provisioner.sandbox.kube.migmanager import MigReport

# MIG profiles per GPU: profile -> (instances on one GPU, GPU-instance profile ID). NVIDIA MIG user
# guide, "Supported MIG Profiles" (docs.nvidia.com/datacenter/tesla/mig-user-guide/
# supported-mig-profiles.html); the RTX PRO 6000 from GoogleCloudPlatform/container-engine-
# accelerators partition_gpu/partition_gpu.go (GI IDs) and pkg/gpu/nvidia/mig/mig.go (instances).
_MIG_80GB = {
    "1g.10gb": (7, 19),
    "1g.20gb": (4, 15),
    "2g.20gb": (3, 14),
    "3g.40gb": (2, 9),
    "4g.40gb": (1, 5),
    "7g.80gb": (1, 0),
}
MIG_PROFILES: dict[str, dict[str, tuple[int, int]]] = {
    "A100-40GB": {
        "1g.5gb": (7, 19),
        "1g.10gb": (4, 15),
        "2g.10gb": (3, 14),
        "3g.20gb": (2, 9),
        "4g.20gb": (1, 5),
        "7g.40gb": (1, 0),
    },
    "A100-80GB": _MIG_80GB,
    "H100-80GB": _MIG_80GB,
    "H100-NVL-94GB": {
        "1g.12gb": (7, 19),
        "1g.24gb": (4, 15),
        "2g.24gb": (3, 14),
        "3g.47gb": (2, 9),
        "4g.47gb": (1, 5),
        "7g.94gb": (1, 0),
    },
    "H200-141GB": {
        "1g.18gb": (7, 19),
        "1g.35gb": (4, 15),
        "2g.35gb": (3, 14),
        "3g.71gb": (2, 9),
        "4g.71gb": (1, 5),
        "7g.141gb": (1, 0),
    },
    "B200": {
        "1g.23gb": (7, 19),
        "1g.45gb": (4, 15),
        "2g.45gb": (3, 14),
        "3g.90gb": (2, 9),
        "4g.90gb": (1, 5),
        "7g.180gb": (1, 0),
    },
    "A30-24GB": {"1g.6gb": (4, 14), "2g.12gb": (2, 5), "4g.24gb": (1, 0)},
    "RTX-PRO-6000-96GB": {"1g.24gb": (4, 14), "2g.48gb": (2, 5), "4g.96gb": (1, 0)},
}

# nvidia.com/gpu.product as GPU feature discovery writes it: the NVML device name (what
# `nvidia-smi -L` prints) with spaces replaced by hyphens (NVIDIA k8s-device-plugin, GFD labels in
# its README). The SXM form where a GPU comes in both; PCIE_PRODUCTS names the exceptions.
PRODUCTS = {
    "A100-40GB": "NVIDIA-A100-SXM4-40GB",
    "A100-80GB": "NVIDIA-A100-SXM4-80GB",
    "H100-80GB": "NVIDIA-H100-80GB-HBM3",
    "H100-NVL-94GB": "NVIDIA-H100-NVL",
    "H200-141GB": "NVIDIA-H200",
    "B200": "NVIDIA-B200",
    "A30-24GB": "NVIDIA-A30",
    "RTX-PRO-6000-96GB": "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
    "T4-16GB": "Tesla-T4",
    "L4-24GB": "NVIDIA-L4",
    "A10G-24GB": "NVIDIA-A10G",
    "L40S-48GB": "NVIDIA-L40S",
    "V100-16GB": "Tesla-V100-SXM2-16GB",
    "V100-32GB": "Tesla-V100-SXM2-32GB",
    "A10-24GB": "NVIDIA-A10",
    "L20-48GB": "NVIDIA-L20",
}
# The NC A100 v4 sizes carry PCIe A100s (Azure "NC A100 v4-series" size page).
PCIE_PRODUCTS = {
    "Standard_NC24ads_A100_v4": "NVIDIA-A100-80GB-PCIe",
    "Standard_NC48ads_A100_v4": "NVIDIA-A100-80GB-PCIe",
    "Standard_NC96ads_A100_v4": "NVIDIA-A100-80GB-PCIe",
}

# GiB of GPU memory ACK's shared-GPU device plugin advertises per GPU (aliyun.com/gpu-mem is per
# node: this times the GPUs). T4 15: the seed document's `kubectl inspect cgpu` output (0/15 on a
# one-T4 node); V100 16GB 16: the seed's edge example (ALIYUN_COM_GPU_MEM_DEV=16). The others are
# DERIVED, unverified: floor(nominal GB x 10^9 / 2^30), the open-source gpushare device plugin's
# floor of NVML's total (AliyunContainerService/gpushare-device-plugin pkg/gpu/nvidia/nvidia.go).
ACK_GIB_PER_GPU = {
    "T4-16GB": 15,
    "V100-16GB": 16,
    "V100-32GB": 29,
    "A10-24GB": 22,
    "A30-24GB": 22,
    "L20-48GB": 44,
    "A100-40GB": 37,
}


@dataclass(frozen=True)
class Hardware:
    """The GPUs of one node, as its instance type carries them."""

    gpu: str  # a key of PRODUCTS
    count: int
    product: str  # nvidia.com/gpu.product, unshared and whole

    @classmethod
    def of(cls, gpu: str, count: int, instance_type: str = "") -> Hardware:
        return cls(gpu, count, PCIE_PRODUCTS.get(instance_type, PRODUCTS[gpu]))


@dataclass
class Advertised:
    """What a node shows: its extended resources (capacity = allocatable) and the labels the GPU
    stack's own agents (GPU feature discovery, the MIG manager) write on it; and the GPUs' MIG
    state as NVML reports it to whatever else reads the GPUs (the DRA kubelet plugin, dra.py):
    MIG mode on, and the profile its GPUs are partitioned into (None: no partitions)."""

    resources: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    mig_mode: bool = False
    mig_profile: str | None = None

    def partitioned(self, gpu: str, profile: str | None) -> Advertised:
        """This, with the GPUs in MIG mode and partitioned into `profile`, where the GPU has it."""
        if profile and mig_instances(gpu, profile) is not None:
            self.mig_mode, self.mig_profile = True, profile
        return self


def mig_instances(gpu: str, profile: str) -> int | None:
    """MIG instances of `profile` on one `gpu`; None where the GPU has no such profile. GKE's
    variants (1g.24gb+gfx, 1g.24gb-me) take their base profile's slots."""
    base = profile.split("+", 1)[0].removesuffix("-me")
    found = MIG_PROFILES.get(gpu, {}).get(base)
    return found[0] if found else None


def profile_by_gi(gpu: str, gi: int) -> str | None:
    return next((name for name, (_, id_) in MIG_PROFILES.get(gpu, {}).items() if id_ == gi), None)


# --- NVIDIA GPU Operator + device plugin (AKS, EKS) -----------------------------------------------
#
# Sources: NVIDIA k8s-device-plugin README ("Shared Access to GPUs": timeSlicing / mps sections,
# renameByDefault -> <resource>.shared, replicas per device; GFD labels nvidia.com/gpu.replicas,
# nvidia.com/gpu.product with -SHARED, nvidia.com/gpu.sharing-strategy; MPS is not supported on MIG
# devices); its MIG support doc (strategy single: nvidia.com/gpu counts MIG devices, gpu.product
# gains -MIG-<profile>, gpu.count the MIG devices); GPU Operator docs "Time-Slicing GPUs in
# Kubernetes" (the ConfigMap, the node label nvidia.com/device-plugin.config naming its key, the
# default key) and "GPU Operator with MIG" (the MIG manager applies nvidia.com/mig.config and
# reports nvidia.com/mig.config.state = success | failed; configs all-<profile>, all-disabled).
# A label naming a key the ConfigMap lacks is silently ignored: the plugin runs unshared
# (NVIDIA/gpu-operator issues 1144, 412; k8s-device-plugin 364, 732).
# The operator labels each GPU node nvidia.com/gpu.present=true and sets each operand's deploy
# label, nvidia.com/gpu.deploy.<operand>, to "true" only where it is missing or empty, keeping any
# other value (gpu-operator controllers/state_manager.go addGPUStateLabels, L469-492); the device
# plugin's DaemonSet selects nvidia.com/gpu.deploy.device-plugin: "true" (assets/state-device-
# plugin/0500_daemonset.yaml L19-20). So a node labelled "false" runs no device plugin: no
# nvidia.com/gpu (how a DRA pool's nodes leave their GPUs to the DRA driver on AKS and EKS).

DEVICE_PLUGIN_NAMESPACE = "gpu-operator"
DEVICE_PLUGIN_CONFIG_MAP = "nvidia-device-plugin-configs"
DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"
DEFAULT_CONFIG_KEY = "default"  # devicePlugin.config.default, as the tool's rendered values set it
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_DISABLED = "all-disabled"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
DEPLOY_DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
# The operator's mig.strategy (chart default single) reaches the plugin as MIG_STRATEGY, which
# takes precedence over the config file's flags (device-plugin README, configuration options).
OPERATOR_MIG_STRATEGY = "single"
# What the MIG manager sets the operands' deploy labels to while it reconfigures (mig-parted
# pkg/mig/reconfigure/reconfigure.go maybeSetPaused, :581-586).
PAUSED_FOR_MIG_CHANGE = "paused-for-mig-change"
GPU = "nvidia.com/gpu"
SHARING_SECTIONS = {"timeSlicing": "time-slicing", "mps": "mps"}


def valid_mig_config(gpu: str, config: str) -> bool:
    """Whether the MIG manager's config file has `config` for `gpu` (all-disabled, all-<profile>)."""
    return config == MIG_DISABLED or (
        config.startswith("all-") and mig_instances(gpu, config[4:]) is not None
    )


def device_plugin(
    hardware: Hardware,
    labels: Mapping[str, str],
    config_map: Mapping[str, Any] | None,
    *,
    cloud_mig_profile: str | None,
    mig_manager: bool,
    mig: MigReport | None = None,
) -> Advertised:
    """The GPU Operator's view of one node. `cloud_mig_profile`: the profile the cloud partitioned
    the GPUs into itself (AKS); `mig_manager`: whether the operator's MIG manager partitions them
    from the node label instead (EKS), `mig` what it reports (migmanager.py; None: the label's
    config in place, or failed where it has none)."""
    out = Advertised()
    out.labels[GPU_PRESENT_LABEL] = "true"
    deploy = labels.get(DEPLOY_DEVICE_PLUGIN_LABEL) or "true"
    profile = cloud_mig_profile
    if mig_manager and MIG_CONFIG_LABEL in labels:
        wanted = labels[MIG_CONFIG_LABEL]
        if mig is None:
            valid = valid_mig_config(hardware.gpu, wanted)
            mig = MigReport("success" if valid else "failed", wanted if valid else None)
        out.labels[MIG_STATE_LABEL] = mig.state
        profile = mig.applied[4:] if mig.applied and mig.applied != MIG_DISABLED else None
        if mig.paused and deploy != "false":
            deploy = PAUSED_FOR_MIG_CHANGE
    out.labels[DEPLOY_DEVICE_PLUGIN_LABEL] = deploy
    instances = mig_instances(hardware.gpu, profile) if profile else None
    out.partitioned(hardware.gpu, profile)
    devices = hardware.count * (instances or 1)
    product = f"{hardware.product}-MIG-{profile}" if instances else hardware.product

    sharing = _sharing(config_map, labels.get(DEVICE_PLUGIN_LABEL, DEFAULT_CONFIG_KEY))
    if sharing is _BROKEN or (sharing is not None and sharing[0] == "mps" and instances):
        return out  # the plugin fails to start: the node advertises no GPUs at all
    strategy, replicas, resource = sharing or ("none", 1, GPU)
    if deploy == "true":
        out.resources[resource] = devices * replicas
    elif deploy == PAUSED_FOR_MIG_CHANGE:
        # A device plugin that registered and stopped: the kubelet reports its resource as 0.
        out.resources[resource] = 0
    out.labels.update(
        {
            "nvidia.com/gpu.count": str(devices),
            "nvidia.com/gpu.product": product + ("-SHARED" if replicas > 1 else ""),
            "nvidia.com/gpu.replicas": str(replicas),
            "nvidia.com/gpu.sharing-strategy": strategy,
            "nvidia.com/mig.capable": "true" if hardware.gpu in MIG_PROFILES else "false",
            "nvidia.com/mig.strategy": OPERATOR_MIG_STRATEGY,
        }
    )
    return out


_BROKEN = ("broken", 0, "")


def _sharing(config_map: Mapping[str, Any] | None, key: str) -> tuple[str, int, str] | None:
    """(strategy, replicas, resource name) of the config under `key`; None: no sharing (no such
    ConfigMap or key, or a config without a sharing section); _BROKEN: a config the plugin
    refuses."""
    text = ((config_map or {}).get("data") or {}).get(key)
    return None if text is None else _sharing_of(text)


@functools.lru_cache(maxsize=256)
def _sharing_of(text: str) -> tuple[str, int, str] | None:
    """_sharing of one config's text, parsed once per text rather than once per node and list
    (an API server stores nodes; the sandbox computes them at every request)."""
    try:
        config = YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return _BROKEN
    if not isinstance(config, dict):
        return _BROKEN
    sections = [(name, body) for name, body in (config.get("sharing") or {}).items() if body]
    if not sections:
        return None
    if len(sections) > 1 or sections[0][0] not in SHARING_SECTIONS:
        return _BROKEN  # timeSlicing and mps together, or an unknown section
    name, section = sections[0]
    entry = next((r for r in section.get("resources") or [] if r.get("name") == GPU), None)
    replicas = entry.get("replicas") if entry else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        return _BROKEN
    renamed = entry.get("rename") or (f"{GPU}.shared" if section.get("renameByDefault") else GPU)
    return SHARING_SECTIONS[name], replicas, renamed


# --- GKE ---------------------------------------------------------------------------------------
#
# GKE partitions and shares GPUs itself, from the node pool's accelerator config, and its own
# device plugin advertises nvidia.com/gpu = GPUs x partitions per GPU x clients per partition
# (cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi, timesharing-gpus, nvidia-mps-gpus).
# No ConfigMap steers it, and no node label but one: GKE's device plugin does not run on a node
# labelled gke-no-default-nvidia-gpu-device-plugin=true (GKE "Prepare GKE infrastructure for DRA
# workloads", docs.cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra), which then
# advertises no nvidia.com/gpu: its GPUs are the DRA driver's.

GKE_NO_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"


def gke(
    hardware: Hardware, partition_size: str, max_shared_clients: int, labels: Mapping[str, str] | None = None
) -> Advertised:
    partitions = (mig_instances(hardware.gpu, partition_size) or 1) if partition_size else 1
    out = Advertised().partitioned(hardware.gpu, partition_size)
    if (labels or {}).get(GKE_NO_DEVICE_PLUGIN_LABEL) != "true":
        out.resources[GPU] = hardware.count * partitions * max(max_shared_clients, 1)
    return out


# --- ACK ---------------------------------------------------------------------------------------
#
# The node label ack.node.gpu.schedule picks the node's one GPU scheduling mode (ACK "Labels for
# enabling GPU scheduling policies", alibabacloud.com/help doc-detail/191140): share, cgpu and
# core_mem advertise aliyun.com/gpu-mem (GiB) and aliyun.com/gpu-count, core_mem also
# aliyun.com/gpu-core.percentage (100 per GPU); enabling one mode sets the other modes' resources
# to 0; default (or no label) advertises whole GPUs as nvidia.com/gpu; disabled turns ACK's GPU
# scheduling off on the node: its device plugin reports nothing, neither nvidia.com/gpu nor
# aliyun.com/* (ACK "Schedule GPUs using DRA": the label for a DRA node pool).

ACK_MODE_LABEL = "ack.node.gpu.schedule"
ACK_SHARED_MODES = {"share": False, "cgpu": False, "core_mem": True}  # mode -> compute isolated
ACK_DISABLED = "disabled"


def ack(hardware: Hardware, labels: Mapping[str, str]) -> Advertised:
    mode = labels.get(ACK_MODE_LABEL, "default")
    if mode == ACK_DISABLED:
        return Advertised()
    if mode not in ACK_SHARED_MODES:
        return Advertised({GPU: hardware.count})
    resources = {
        GPU: 0,
        "aliyun.com/gpu-mem": ACK_GIB_PER_GPU.get(hardware.gpu, 0) * hardware.count,
        "aliyun.com/gpu-count": hardware.count,
    }
    if ACK_SHARED_MODES[mode]:
        resources["aliyun.com/gpu-core.percentage"] = 100 * hardware.count
    return Advertised(resources)
