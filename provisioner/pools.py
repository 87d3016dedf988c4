"""The cloud-neutral shapes that the compiler, the drivers, plan and sync share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
# Where a pool's last operation stands: finished, still running (create, update or delete in
# flight), or failed. Not part of equality: it says when to compare, not what.
PoolStatus = Literal["ready", "changing", "failed"]
TAINT_EFFECTS: tuple[TaintEffect, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, order=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


# Every GPU pool carries this taint, so only pods that ask for a GPU land there; GKE adds it by
# itself only when the cluster also has a non-GPU pool, so it is always set explicitly.
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


# The cloud tag (AKS tags, GKE resource labels, EKS node-group tags) on every pool the tool
# creates: a cloud-side marker, so it cannot drift with the Kubernetes labels users edit.
OWNER_TAG_KEY = "managed-by"
OWNER_TAG_VALUE = "provisioner"
# ACK marks its pools with a node-pool label instead (kubernetes_config.labels): ACK Edge pools
# have no ECS instances to carry a tag. The driver adds it and strips it from what it reads back,
# so the fleet's labels never see it; the compiler refuses it in a user's labels.
OWNER_LABEL_KEY = "provisioner.io/managed-by"
OWNER_LABEL_VALUE = "provisioner"

# A pool replaced create-first (provisioner/generations.py) is made beside the old one under a new
# cloud-side name; these cloud tags say which fleet pool it is and its generation, so the cloud
# itself holds a replacement's state. First-generation pools carry none: their cloud name is the
# fleet's. ACK has no tags on edge pools: its driver reads the fleet name from POOL_NODE_LABEL
# and keeps the generation in a node-pool label it strips on read, as its owner marker.
FLEET_POOL_TAG_KEY = "provisioner-pool"
GENERATION_TAG_KEY = "provisioner-generation"
GENERATION_LABEL_KEY = "provisioner.io/generation"
# The node label every pool's nodes carry with the fleet's pool name: the one selector that holds
# across generations (the cloud's own pool label names the cloud pool), so `place`'s pods and
# `verify` follow a pool through a replacement.
POOL_NODE_LABEL = "provisioner.io/pool"


@dataclass(frozen=True)
class Scaling:
    """Autoscaling bounds, or a fixed size (min == max, autoscaling off).

    Bounds with min == max are a fixed size, whatever the flag says: EKS has no autoscaling flag
    to read back, and an autoscaler that may not move is no autoscaler.
    """

    min: int
    max: int
    autoscaling: bool

    def __post_init__(self) -> None:
        if self.min == self.max:
            object.__setattr__(self, "autoscaling", False)

    @classmethod
    def fixed(cls, count: int) -> Scaling:
        return cls(count, count, autoscaling=False)


@dataclass(frozen=True)
class NativeSharing:
    """GPU sharing the cloud does itself (GKE gpu_sharing_config), as its API names the strategy."""

    strategy: str  # e.g. TIME_SHARING, MPS
    clients_per_gpu: int


@dataclass(frozen=True)
class NodeTemplate:
    """What the cluster autoscaler is told one new node of a pool will offer, for a pool it may
    have to start from zero: the GPU resources the node's GPU stack advertises (the autoscaler
    knows only the instance type's physical nvidia.com/gpu) and, where its hints carry them, the
    labels and taints the node starts with. The tool writes it as the cloud's tags (clouds.yaml
    `autoscaler.hints`)."""

    resources: tuple[tuple[str, int], ...]
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", tuple(sorted(dict(self.resources).items())))
        object.__setattr__(self, "labels", tuple(sorted(dict(self.labels).items())))
        object.__setattr__(self, "taints", tuple(sorted(set(self.taints))))


# The PoolState fields a plan compares, in the order it prints them.
POOL_FIELDS = (
    "instance_type",
    "gpus_per_node",
    "mig_setting",
    "sharing",
    "cloud_installs_driver",
    "spot",
    "disk_size_gb",
    "zones",
    "scaling",
    "labels",
    "taints",
    "edge",
    "autoscaler_hints",
)

# Fields a pool may leave unset (None) for the cloud to fill in (zones: the cluster's own;
# cloud_installs_driver: whatever the pool has, except on a DRA pool).
CLOUD_DEFAULT_FIELDS = frozenset({"disk_size_gb", "zones", "cloud_installs_driver"})


@dataclass(frozen=True)
class PoolState:
    """One node pool as the cloud holds it, in a cloud-neutral shape.

    The compiler produces the desired one, drivers return the observed ones, and plan and sync
    compare them. It is normalised so that a pool the cloud holds exactly as asked compares
    equal: labels and taints are sorted tuples, the labels and taints a cloud adds by itself are
    left out by the driver, and enums use the spellings here, whatever the SDK's.
    """

    name: str
    instance_type: str
    gpus_per_node: int
    mig_setting: str | None  # the cloud's own MIG field value (MIG1g, 1g.5gb); None where a label does it
    sharing: NativeSharing | None  # only where the cloud shares GPUs itself
    spot: bool
    disk_size_gb: int | None  # None: the cloud's default
    scaling: Scaling  # the whole pool's nodes, on every cloud (GKE's per-zone counts are the driver's)
    labels: tuple[tuple[str, str], ...]
    taints: tuple[Taint, ...]
    owned: bool = True  # False: a pool this tool did not create; never updated or deleted
    # True: the nodes are the user's own machines that join the pool (ACK Edge); None where the
    # cloud has no such pools.
    edge: bool | None = None
    # The zones the pool's nodes run in, sorted; None: the cloud's default (GKE: the cluster's
    # node locations) or a cloud where the pool names none (EKS subnets, ACK vSwitches decide).
    zones: tuple[str, ...] | None = None
    # What the pool's tags tell the cluster autoscaler of a node it has not started yet; None:
    # no hints (a pool that does not autoscale, or whose cloud's autoscaler knows its sharing).
    autoscaler_hints: NodeTemplate | None = None
    # Whether the cloud installs the NVIDIA driver on the pool's nodes, where a pool field says
    # (GKE gpu_driver_installation_config; a DRA pool there installs its own); None elsewhere.
    cloud_installs_driver: bool | None = None
    status: PoolStatus = field(default="ready", compare=False)
    nodes: int | None = field(default=None, compare=False)  # nodes now, where the cloud says
    cloud_id: str | None = field(default=None, compare=False)  # the cloud's own ID, where it has one (np-...)
    # The fleet pool this cloud pool is a generation of (None: `name` is the fleet's name, gen 1).
    fleet_name: str | None = field(default=None, compare=False)
    generation: int = field(default=1, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(sorted(dict(self.labels).items())))
        object.__setattr__(self, "taints", tuple(sorted(set(self.taints))))
        if self.zones is not None:
            object.__setattr__(self, "zones", tuple(sorted(set(self.zones))))

    @property
    def pool_name(self) -> str:
        """The fleet's name of the pool: the same across its generations."""
        return self.fleet_name or self.name

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    def differences(self, observed: PoolState) -> list[str]:
        """The fields in which `observed` differs from this desired state, in POOL_FIELDS order.

        A disk size desired as None ("the cloud's default") matches whatever size the cloud chose.
        """
        return [
            name
            for name in POOL_FIELDS
            if getattr(self, name) != getattr(observed, name)
            and not (name in CLOUD_DEFAULT_FIELDS and getattr(self, name) is None)
        ]
