"""NVIDIA's conventions for partitioning and sharing GPUs, written and read back side by side.

Where a cloud does not partition or share GPUs itself, NVIDIA's GPU Operator does, steered by
node labels: mig-parted's `nvidia.com/mig.config=all-<profile>` and the device plugin's
`nvidia.com/device-plugin.config=<key>`, whose key must name a config in the ConfigMap `render`
prints. Where the cloud does it itself (AKS gpuInstanceProfile, GKE gpu_partition_size and
gpu_sharing_config), a pool field carries it, spelled as hardware/clouds.yaml says; where the
cloud's own scheduler shares GPU memory (ACK cGPU), its node-pool label does, also as data.

The compiler writes these marks (`marks`); `capacity` reads them back from a pool as the cloud
holds it (`read_mig`, `read_sharing`), also for pools no fleet file describes. Writer and readers
live in this one module so that neither can change without the other in sight: a label the tool
writes but cannot read back would make `sync` record a shared pool as whole GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provisioner import hardware
from provisioner.fleet import Sharing
from provisioner.hardware import CloudProfile, Gpu, MigProfile
from provisioner.pools import NativeSharing, PoolState

DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_PREFIX = "all-"  # mig-parted's default configs name every-GPU-alike layouts all-<profile>
# On a DRA pool the sharing lives in each claim's opaque config, not on the node: this label keeps
# the pool's intent on the cloud, so that sync reads a shared DRA pool back as shared.
DRA_SHARING_LABEL = "gpu.provisioner.io/dra-sharing"
# The labels the tool derives from a pool's gpu field: a user's own value would silently fight it.
TOOL_LABELS = {
    DEVICE_PLUGIN_LABEL: "gpu.sharing",
    MIG_CONFIG_LABEL: "gpu.mig",
    DRA_SHARING_LABEL: "gpu.sharing",
}

GPU_RESOURCE = "nvidia.com/gpu"
# The device plugin renames shared GPUs (renameByDefault) so a pod cannot mistake a share for a
# whole GPU; GKE's own sharing keeps nvidia.com/gpu.
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"

# "single" serves MIG and whole GPUs alike (NVIDIA/k8s-device-plugin#233); the device plugin's
# config and the GPU Operator's mig.strategy must agree on it.
MIG_STRATEGY = "single"
DEFAULT_CONFIG_KEY = "default"  # the ConfigMap key a node without the device-plugin label gets
_CONFIG_KEY_PREFIX = {"time-slicing": "time-sliced", "mps": "mps"}
_DEVICE_PLUGIN_SECTION = {"time-slicing": "timeSlicing", "mps": "mps"}


def default_device_plugin_config() -> dict[str, Any]:
    return {"version": "v1", "flags": {"migStrategy": MIG_STRATEGY}}


@dataclass(frozen=True)
class DevicePluginConfig:
    """One key of the device-plugin ConfigMap, and the node label value that selects it."""

    mode: Sharing
    replicas: int

    @property
    def key(self) -> str:
        return f"{_CONFIG_KEY_PREFIX[self.mode]}-{self.replicas}"

    @classmethod
    def from_key(cls, key: str) -> DevicePluginConfig | None:
        """The config a node label's key names, where it is one this tool writes."""
        prefix, _, replicas = key.rpartition("-")
        modes = {p: mode for mode, p in _CONFIG_KEY_PREFIX.items()}
        if prefix not in modes or not replicas.isdigit():
            return None
        return cls(modes[prefix], int(replicas))  # type: ignore[arg-type]

    def document(self) -> dict[str, Any]:
        """The config under its key in the ConfigMap: the default's flags plus this sharing."""
        section = {
            "renameByDefault": True,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": GPU_RESOURCE, "replicas": self.replicas}],
        }
        return {**default_device_plugin_config(), "sharing": {_DEVICE_PLUGIN_SECTION[self.mode]: section}}


@dataclass(frozen=True)
class Marks:
    """What tells a pool's nodes their MIG profile and sharing: the cloud's own pool fields where
    it has them, NVIDIA's node labels elsewhere."""

    mig_setting: str | None = None  # the cloud's MIG pool field value (MIG1g, 1g.5gb)
    native_sharing: NativeSharing | None = None  # the cloud's sharing pool field
    device_plugin: DevicePluginConfig | None = None  # the ConfigMap config the label selects
    labels: dict[str, str] = field(default_factory=dict)  # the NVIDIA labels, in this order
    memory_resource: str | None = None  # what pods request where a scheduler shares GPU memory
    device_class: str | None = None  # on a DRA pool: the DeviceClass its pods' claims name

    @property
    def resource(self) -> str:
        """What pods request: the device plugin renames the GPUs it shares; a memory scheduler
        (ACK cGPU) takes GiB under its own name; a DRA pool's pods claim a DeviceClass's devices."""
        if self.device_class is not None:
            return self.device_class
        if self.memory_resource is not None:
            return self.memory_resource
        return SHARED_GPU_RESOURCE if self.device_plugin else GPU_RESOURCE


def marks(
    cloud: CloudProfile,
    mig: MigProfile | None,
    sharing: Sharing,
    replicas: int | None,
    *,
    isolation: str | None = None,
    placement: str | None = None,
    allocation: str = "device-plugin",
) -> Marks:
    """How `cloud` is told to partition every GPU into `mig` and share it as `sharing`, and, with
    allocation dra, to keep its device plugin off the pool's nodes.

    Inverse: `read_mig`, `read_sharing` and `read_allocation`."""
    native = device_plugin = None
    labels: dict[str, str] = {}
    if allocation == "dra" and cloud.dra is not None:
        labels |= cloud.dra.device_plugin_off
        if sharing != "exclusive":
            labels[DRA_SHARING_LABEL] = DevicePluginConfig(sharing, replicas or 0).key
        return Marks(_mark_mig(cloud, mig, labels), labels=labels, device_class=dra_device_class(mig))
    if cloud.scheduler is not None:  # the cloud's own scheduler: its label says, exclusive included
        scheduler = cloud.scheduler
        shared = sharing == "memory"
        labels[scheduler.label] = scheduler.isolation[isolation or "none"] if shared else scheduler.exclusive
        if shared and placement is not None:
            labels[scheduler.placement_label] = placement
        return Marks(labels=labels, memory_resource=scheduler.resource if shared else None)
    if sharing != "exclusive" and cloud.sharing_via == "pool-field":
        native = NativeSharing(cloud.sharing_modes[sharing].strategy or sharing, replicas or 0)
    elif sharing != "exclusive":
        device_plugin = DevicePluginConfig(sharing, replicas or 0)
        labels[DEVICE_PLUGIN_LABEL] = device_plugin.key
    return Marks(_mark_mig(cloud, mig, labels), native, device_plugin, labels)


def _mark_mig(cloud: CloudProfile, mig: MigProfile | None, labels: dict[str, str]) -> str | None:
    """The cloud's MIG pool-field value for `mig`, or (where the MIG manager partitions) its label
    added to `labels`; the same on device-plugin and DRA pools, since the partitions come first."""
    if mig and cloud.mig_via == "pool-field":
        return cloud.mig_setting(mig)
    if mig:
        labels[MIG_CONFIG_LABEL] = MIG_CONFIG_PREFIX + mig.name
    return None


def dra_device_class(mig: MigProfile | bool | None) -> str:
    """The DeviceClass of NVIDIA's DRA driver chart whose devices a DRA pool's claims ask for:
    MIG devices (a claim's CEL then picks the profile), or whole GPUs."""
    return hardware.load().dra_driver.device_classes["mig" if mig else "gpu"]


def mig_device_class(profile: str) -> str:
    """The DeviceClass `render` gives for one MIG profile's devices (mig-1g.10gb.nvidia.com)."""
    return f"mig-{profile}.{hardware.load().dra_driver.driver.removeprefix('gpu.')}"


def read_allocation(cloud: CloudProfile, state: PoolState) -> str:
    """ "dra" where `state` carries the labels that keep the device plugin off its nodes, as
    `marks` wrote them for a DRA pool; else "device-plugin"."""
    rules = cloud.dra
    if rules is None:
        return "device-plugin"
    labels = state.label_map
    off = all(labels.get(key) == value for key, value in rules.device_plugin_off.items())
    return "dra" if off else "device-plugin"


def read_mig(cloud: CloudProfile, gpu: Gpu, state: PoolState) -> MigProfile | None:
    """The MIG profile `state`'s GPUs are partitioned into, as `marks` wrote it; None: whole GPUs,
    or a layout this tool does not write."""
    if cloud.mig_via == "operator-label":
        value = state.label_map.get(MIG_CONFIG_LABEL, "")
        return (
            gpu.mig.get(value.removeprefix(MIG_CONFIG_PREFIX))
            if value.startswith(MIG_CONFIG_PREFIX)
            else None
        )
    if state.mig_setting is None:
        return None
    if cloud.mig_values:  # the field names a GPU-instance profile ID (AKS MIG1g = GI 19)
        gi = cloud.mig_values.get(state.mig_setting)
        return next((p for p in gpu.mig.values() if p.gi == gi), None)
    return gpu.mig.get(state.mig_setting)


def read_isolation(cloud: CloudProfile, state: PoolState) -> str | None:
    """With a memory scheduler, the isolation level its label names, as `marks` wrote it; None
    where GPUs are whole (or the label holds a value this tool does not write)."""
    if cloud.scheduler is None:
        return None
    return cloud.scheduler.mode_of(state.label_map.get(cloud.scheduler.label, ""))


def read_sharing(cloud: CloudProfile, state: PoolState) -> tuple[Sharing, int | None]:
    """How `state`'s GPUs are shared and with how many clients each, as `marks` wrote it;
    ("exclusive", None) where they are not, or by a config this tool does not write. Memory
    sharing has no client count: ("memory", None)."""
    if read_allocation(cloud, state) == "dra":
        config = DevicePluginConfig.from_key(state.label_map.get(DRA_SHARING_LABEL, ""))
        return (config.mode, config.replicas) if config else ("exclusive", None)
    if cloud.scheduler is not None:
        return ("memory", None) if read_isolation(cloud, state) is not None else ("exclusive", None)
    if cloud.sharing_via == "pool-field":
        if state.sharing is None:
            return "exclusive", None
        strategy = state.sharing.strategy
        mode = next(m for m, spec in cloud.sharing_modes.items() if (spec.strategy or m) == strategy)
        return mode, state.sharing.clients_per_gpu  # type: ignore[return-value]
    config = DevicePluginConfig.from_key(state.label_map.get(DEVICE_PLUGIN_LABEL, ""))
    return (config.mode, config.replicas) if config else ("exclusive", None)
