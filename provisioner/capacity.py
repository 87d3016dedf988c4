"""What a pool offers: GPU model, MIG profile, sharing, and the slices each node gives.

Two sides need the same arithmetic: the compiler, for the pool a fleet file asks for (NodeSetup),
and `sync`, for the pool as the cloud holds it (`capacity`), read back through nvidia.py's readers
from the observed pool and the hardware data alone, so that it works as well for pools no fleet
file describes (`sync --discover`). It is its own module, not part of nvidia.py or compile.py,
because it is neither a convention nor a rule: it is what the catalog records and the tables show,
and `sharing_text` is the one spelling of a pool's sharing they all print.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner import hardware
from provisioner.hardware import Gpu, MigProfile
from provisioner.nvidia import read_mig, read_sharing
from provisioner.pools import PoolState


@dataclass(frozen=True)
class Capacity:
    gpu_model: str | None  # None: not a GPU instance type the hardware data knows
    gpus_per_node: int
    mig_profile: str | None
    sharing: str  # exclusive | time-slicing | mps
    replicas: int | None  # None exactly when exclusive
    slices_per_node: int
    memory_per_slice_gb: float | None


def capacity(cloud: str, state: PoolState) -> Capacity:
    profile = hardware.load().clouds[cloud]
    machine = hardware.load().instance_type(cloud, state.instance_type)
    if machine is None:
        return Capacity(None, state.gpus_per_node, None, "exclusive", None, 0, None)
    mig = read_mig(profile, machine.gpu, state)
    sharing, replicas = read_sharing(profile, state)
    return Capacity(
        gpu_model=machine.gpu.name,
        gpus_per_node=state.gpus_per_node,
        mig_profile=mig.name if mig else None,
        sharing=sharing,
        replicas=replicas,
        slices_per_node=state.gpus_per_node * slices_per_gpu(mig, replicas),
        memory_per_slice_gb=memory_per_slice_gb(machine.gpu, mig, replicas),
    )


def slices_per_gpu(mig: MigProfile | None, replicas: int | None) -> int:
    """MIG instances per GPU (where partitioned) x clients per GPU or instance (where shared)."""
    return (mig.instances if mig else 1) * (replicas or 1)


def memory_per_slice_gb(gpu: Gpu, mig: MigProfile | None, replicas: int | None) -> float:
    """Memory one slice gets: isolated under MIG, a nominal share under time-slicing/MPS."""
    device = mig.memory_gb if mig else gpu.memory_gb
    return round(device / (replicas or 1), 2)


def sharing_text(mode: str, clients: int | None) -> str:
    """Sharing as every table and the plan spell it, `time-slicing x4`; "" where GPUs are not shared."""
    return "" if clients is None else f"{mode} x{clients}"
