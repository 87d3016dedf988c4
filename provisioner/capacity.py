"""What a pool offers: GPU model, MIG profile, sharing, and the slices each node gives.

Two sides need the same arithmetic: the compiler, for the pool a fleet file asks for (NodeSetup),
and `sync`, for the pool as the cloud holds it (`capacity`), read back through nvidia.py's readers
from the observed pool and the hardware data alone, so that it works as well for pools no fleet
file describes (`sync --discover`). It is its own module, not part of nvidia.py or compile.py,
because it is neither a convention nor a rule: it is what the catalog records and the tables show,
and `sharing_text` is the one spelling of a pool's sharing they all print.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provisioner import hardware
from provisioner.hardware import CloudProfile, Gpu, MigProfile
from provisioner.nvidia import (
    GPU_RESOURCE,
    dra_device_class,
    marks,
    read_allocation,
    read_isolation,
    read_mig,
    read_sharing,
)
from provisioner.pools import PoolState

# What a slice isolates from the other slices of its GPU, weakest first (placement compares them):
# time-slicing nothing, MPS compute (each client's share of the SMs), a memory scheduler what its
# label says, a MIG instance or a whole GPU everything (the hardware partitions it).
ISOLATION_LEVELS = ("none", "memory", "compute", "hardware")
# Where a scheduler shares GPU memory (ACK cGPU), a slice is one GiB: this many GB.
GIB_IN_GB = round(2**30 / 10**9, 2)
SHARING_ISOLATION = {"time-slicing": "none", "mps": "compute", "exclusive": "hardware"}


@dataclass(frozen=True)
class Capacity:
    gpu_model: str | None  # None: not a GPU instance type the hardware data knows
    gpus_per_node: int
    mig_profile: str | None
    sharing: str  # exclusive | time-slicing | mps | memory
    replicas: int | None  # clients per GPU (or MIG instance); None when exclusive or memory-shared
    slices_per_node: int  # in slice_unit
    memory_per_slice_gb: float | None
    isolation: str = "hardware"  # one of ISOLATION_LEVELS
    slice_unit: str = "slice"  # slice, or GiB where a scheduler shares GPU memory
    resource: str = GPU_RESOURCE  # what the nodes advertise and pods request, counted in slice_unit
    allocation_mode: str = "device-plugin"  # or "dra": `resource` is the DeviceClass pods' claims name


def capacity(cloud: str, state: PoolState) -> Capacity:
    profile = hardware.load().clouds[cloud]
    gpu = _gpu_of(profile, state)
    if gpu is None:
        return Capacity(None, state.gpus_per_node, None, "exclusive", None, 0, None)
    sharing, replicas = read_sharing(profile, state)
    if sharing == "memory":
        assert profile.scheduler is not None
        isolation = read_isolation(profile, state) or "none"
        return Capacity(
            gpu_model=gpu.name,
            gpus_per_node=state.gpus_per_node,
            mig_profile=None,
            sharing=sharing,
            replicas=None,
            slices_per_node=state.gpus_per_node * profile.scheduler.gib_per_gpu.get(gpu.key, 0),
            memory_per_slice_gb=GIB_IN_GB,
            isolation=isolation,
            slice_unit="GiB",
            resource=marks(profile, None, sharing, None, isolation=isolation).resource,
        )
    mig = read_mig(profile, gpu, state)
    allocation = read_allocation(profile, state)
    return Capacity(
        gpu_model=gpu.name,
        gpus_per_node=state.gpus_per_node,
        mig_profile=mig.name if mig else None,
        sharing=sharing,
        replicas=replicas,
        slices_per_node=state.gpus_per_node * slices_per_gpu(mig, replicas),
        memory_per_slice_gb=memory_per_slice_gb(gpu, mig, replicas),
        isolation=SHARING_ISOLATION[sharing],
        resource=marks(profile, mig, sharing, replicas, allocation=allocation).resource,  # the writer's own
        allocation_mode=allocation,
    )


def _gpu_of(profile: CloudProfile, state: PoolState) -> Gpu | None:
    """The pool's GPU: its instance type's, or for an edge pool the model its label names."""
    machine = hardware.load().instance_type(profile.key, state.instance_type)
    if machine is not None:
        return machine.gpu
    if state.edge and profile.edge_labels is not None:
        return hardware.load().gpus.get(state.label_map.get(profile.edge_labels["model"], ""))
    return None


def slices_per_gpu(mig: MigProfile | None, replicas: int | None) -> int:
    """MIG instances per GPU (where partitioned) x clients per GPU or instance (where shared)."""
    return (mig.instances if mig else 1) * (replicas or 1)


def memory_per_slice_gb(gpu: Gpu, mig: MigProfile | None, replicas: int | None) -> float:
    """Memory one slice gets: isolated under MIG, a nominal share under time-slicing/MPS."""
    device = mig.memory_gb if mig else gpu.memory_gb
    return round(device / (replicas or 1), 2)


def sharing_text(mode: str, clients: int | None, isolation: str | None = None) -> str:
    """Sharing as every table and the plan spell it, `time-slicing x4`, or for memory sharing
    `memory (isolating memory)`; "" where GPUs are not shared."""
    if mode == "memory":
        return f"memory (isolating {isolation or 'none'})"
    return "" if clients is None else f"{mode} x{clients}"


def resource_of(row: Mapping[str, Any]) -> str:
    """The resource a catalog pool's nodes advertise its slices as, and its pods ask for."""
    cloud = hardware.load().clouds[row["cloud"]]
    if row.get("allocation_mode") == "dra":  # the DeviceClass: MIG devices or whole GPUs
        return dra_device_class(bool(row.get("mig")))
    return marks(cloud, None, row["sharing"], row["replicas"], isolation=row["isolation"]).resource
