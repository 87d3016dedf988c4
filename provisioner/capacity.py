"""What a pool offers, read back from the pool as the cloud holds it: GPU model, MIG profile,
sharing, and the slices each node gives. It reads only the observed pool and the hardware data,
so it works as well for pools no fleet file describes (`sync --discover`)."""

from __future__ import annotations

from dataclasses import dataclass

from provisioner import hardware
from provisioner.hardware import CloudProfile, Gpu, MigProfile
from provisioner.pools import PoolState
from provisioner.sharing import (
    DEVICE_PLUGIN_LABEL,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_PREFIX,
    DevicePluginConfig,
    memory_per_slice_gb,
    slices_per_gpu,
)


@dataclass(frozen=True)
class Capacity:
    gpu_model: str | None  # None: not a GPU instance type the hardware data knows
    gpus_per_node: int
    mig_profile: str | None
    sharing: str  # exclusive | time-slicing | mps
    replicas: int | None
    slices_per_node: int
    memory_per_slice_gb: float | None


def capacity(cloud: str, state: PoolState) -> Capacity:
    profile = hardware.load().clouds[cloud]
    machine = hardware.load().instance_type(cloud, state.instance_type)
    if machine is None:
        return Capacity(None, state.gpus_per_node, None, "exclusive", None, 0, None)
    mig = _mig(profile, machine.gpu, state)
    sharing, replicas = _sharing(profile, state)
    return Capacity(
        gpu_model=machine.gpu.name,
        gpus_per_node=state.gpus_per_node,
        mig_profile=mig.name if mig else None,
        sharing=sharing,
        replicas=replicas,
        slices_per_node=state.gpus_per_node * slices_per_gpu(mig, replicas),
        memory_per_slice_gb=memory_per_slice_gb(machine.gpu, mig, replicas),
    )


def _mig(profile: CloudProfile, gpu: Gpu, state: PoolState) -> MigProfile | None:
    if profile.mig_via == "operator-label":
        value = state.label_map.get(MIG_CONFIG_LABEL, "")
        return (
            gpu.mig.get(value.removeprefix(MIG_CONFIG_PREFIX))
            if value.startswith(MIG_CONFIG_PREFIX)
            else None
        )
    if state.mig_setting is None:
        return None
    if profile.mig_values:  # the field names a GPU-instance profile ID (AKS MIG1g = GI 19)
        gi = profile.mig_values.get(state.mig_setting)
        return next((p for p in gpu.mig.values() if p.gi == gi), None)
    return gpu.mig.get(state.mig_setting)


def _sharing(profile: CloudProfile, state: PoolState) -> tuple[str, int | None]:
    if profile.sharing_via == "pool-field":
        if state.sharing is None:
            return "exclusive", None
        mode = next(m for m, spec in profile.sharing_modes.items() if spec.strategy == state.sharing.strategy)
        return mode, state.sharing.clients_per_gpu
    config = DevicePluginConfig.from_key(state.label_map.get(DEVICE_PLUGIN_LABEL, ""))
    return (config.mode, config.replicas) if config else ("exclusive", None)
