"""The GKE emulator's state and rules: node pools per cluster and their operations.

Values use the API's enum names (NO_SCHEDULE, TIME_SHARING); `responses` turns them into the
REST wire format. The rules are this module's own tables, each with its source, and import
nothing of the tool's hardware data: the emulator is an oracle independent of the tool, so a
wrong fact in the tool's data fails a test instead of passing both the compiler and the emulator.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, replace
from typing import Any

from provisioner.sandbox.engine import ClusterBusy, ClusterState, Engine, Operation, UnknownCluster
from provisioner.sandbox.gke.exceptions import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from provisioner.sandbox.versions import VersionFormat

# Node pool names: RFC 1035 labels (NodePool.name, container v1 API reference); the 40-character
# limit is gcloud's own check, unconfirmed in the API reference.
POOL_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
POOL_NAME_RULE = (
    "lowercase letters, digits and hyphens, starting with a letter, not ending with a hyphen, 1-40 characters"
)
# NodeTaint.Effect, GPUSharingConfig.GPUSharingStrategy (google/container/v1/cluster_service.proto).
TAINT_EFFECTS = ("NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE")
SHARING_STRATEGIES = ("TIME_SHARING", "MPS")
# GPUSharingConfig.max_shared_clients_per_gpu: GKE time-sharing and MPS docs (timesharing-gpus,
# nvidia-mps-gpus): 2 to 48 clients per GPU.
MAX_SHARED_CLIENTS = (2, 48)
# Node-pool fields UpdateNodePool changes (UpdateNodePoolRequest: labels, taints,
# resource_labels, disk_size_gb; googleapis/python-container#506); autoscaling and size have their
# own calls; anything else on a pool is fixed at creation.
UPDATABLE = ("labels", "taints", "resource_labels", "disk_size_gb", "locations")
# A regional cluster's default node locations: three zones of its region (GKE "Regional
# clusters": "By default, GKE replicates each node pool across three zones of the control
# plane's region"); the emulator takes the region's -a, -b and -c. A zonal cluster's: its zone.
REGIONAL_ZONES = ("a", "b", "c")
# How a cluster's version reads (Cluster.currentMasterVersion, "The current software version of
# the master endpoint"): 1.X.Y-gke.N, as UpdateMasterRequest.master_version's aliases spell an
# explicit version (container v1 reference); a cluster asked for 1.X runs a patch of it, here .1.
KUBERNETES_VERSIONS = VersionFormat("{major}.{minor}.{patch}-gke.1000000", default_patch=1)
# Machine type -> (the accelerator type it takes, the accelerator counts it takes). GPU machine
# types carry their GPUs, so the count is the machine's; N1 machines take T4s in 1, 2 or 4 (up to
# 48 vCPUs for 1-2 T4s, 96 for 4). Compute Engine "GPU machine types"
# (cloud.google.com/compute/docs/gpus: A2 Standard and Ultra, A3 High, Mega and Ultra, A4, G2,
# G4; N1 + T4). Left out: other N1 shapes and the older GPUs N1 also takes (P4, P100, V100).
GPU_MACHINE_TYPES: dict[str, tuple[str, tuple[int, ...]]] = {
    "a2-highgpu-1g": ("nvidia-tesla-a100", (1,)),
    "a2-highgpu-2g": ("nvidia-tesla-a100", (2,)),
    "a2-highgpu-4g": ("nvidia-tesla-a100", (4,)),
    "a2-highgpu-8g": ("nvidia-tesla-a100", (8,)),
    "a2-megagpu-16g": ("nvidia-tesla-a100", (16,)),
    "a2-ultragpu-1g": ("nvidia-a100-80gb", (1,)),
    "a2-ultragpu-2g": ("nvidia-a100-80gb", (2,)),
    "a2-ultragpu-4g": ("nvidia-a100-80gb", (4,)),
    "a2-ultragpu-8g": ("nvidia-a100-80gb", (8,)),
    "a3-highgpu-1g": ("nvidia-h100-80gb", (1,)),
    "a3-highgpu-2g": ("nvidia-h100-80gb", (2,)),
    "a3-highgpu-4g": ("nvidia-h100-80gb", (4,)),
    "a3-highgpu-8g": ("nvidia-h100-80gb", (8,)),
    "a3-megagpu-8g": ("nvidia-h100-mega-80gb", (8,)),
    "a3-ultragpu-8g": ("nvidia-h200-141gb", (8,)),
    "a4-highgpu-8g": ("nvidia-b200", (8,)),
    "g2-standard-4": ("nvidia-l4", (1,)),
    "g2-standard-8": ("nvidia-l4", (1,)),
    "g2-standard-12": ("nvidia-l4", (1,)),
    "g2-standard-16": ("nvidia-l4", (1,)),
    "g2-standard-32": ("nvidia-l4", (1,)),
    "g2-standard-24": ("nvidia-l4", (2,)),
    "g2-standard-48": ("nvidia-l4", (4,)),
    "g2-standard-96": ("nvidia-l4", (8,)),
    "g4-standard-48": ("nvidia-rtx-pro-6000", (1,)),
    "g4-standard-96": ("nvidia-rtx-pro-6000", (2,)),
    "g4-standard-192": ("nvidia-rtx-pro-6000", (4,)),
    "g4-standard-384": ("nvidia-rtx-pro-6000", (8,)),
    "n1-standard-4": ("nvidia-tesla-t4", (1, 2, 4)),
    "n1-standard-8": ("nvidia-tesla-t4", (1, 2, 4)),
    "n1-standard-16": ("nvidia-tesla-t4", (1, 2, 4)),
    "n1-standard-32": ("nvidia-tesla-t4", (1, 2, 4)),
}
# gpuPartitionSize values a pool of each accelerator type can run: those GKE's partitioner knows
# for it (container-engine-accelerators partition_gpu/partition_gpu.go, by its per-GPU comments)
# that its device plugin also accepts (pkg/gpu/nvidia/mig/mig.go gpuPartitionSizeMaxCount, which
# lacks 4g.20gb and 4g.40gb: the plugin fails at start on them). Both key on the size name alone,
# so the A3 Mega H100s take the H100 80GB sizes. The emulator's own table, not the tool's data.
_H100_80GB_SIZES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb")
PARTITION_SIZES: dict[str, tuple[str, ...]] = {
    "nvidia-tesla-a100": ("1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"),
    "nvidia-a100-80gb": ("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"),
    "nvidia-h100-80gb": _H100_80GB_SIZES,
    "nvidia-h100-mega-80gb": _H100_80GB_SIZES,
    "nvidia-h200-141gb": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "nvidia-b200": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    "nvidia-rtx-pro-6000": (
        "1g.24gb",
        "1g.24gb+me",
        "1g.24gb+gfx",
        "1g.24gb+me.all",
        "1g.24gb-me",
        "2g.48gb",
        "2g.48gb+gfx",
        "2g.48gb+me.all",
        "2g.48gb-me",
        "4g.96gb",
        "4g.96gb+gfx",
    ),
}


@dataclass(frozen=True)
class Accelerator:
    type: str
    count: int
    partition_size: str = ""
    sharing_strategy: str = ""  # "" (none), TIME_SHARING or MPS
    max_shared_clients: int = 0
    driver_version: str = ""  # "" (none), INSTALLATION_DISABLED, DEFAULT, LATEST


@dataclass(frozen=True)
class Autoscaling:
    """NodePoolAutoscaling: per-zone limits (min/max_node_count) or the whole pool's
    (total_min/total_max_node_count), never both ("Cannot be used with total limits")."""

    enabled: bool = False
    min_nodes: int = 0  # per zone
    max_nodes: int = 0
    total_min_nodes: int = 0
    total_max_nodes: int = 0
    location_policy: str = ""  # "" (unset), BALANCED or ANY

    @property
    def total_limits(self) -> bool:
        return bool(self.total_min_nodes or self.total_max_nodes)


@dataclass(frozen=True)
class NodePool:
    name: str
    machine_type: str
    node_count: int = 0  # nodes in each of its zones: initialNodeCount; setSize changes it
    locations: tuple[str, ...] = ()  # its zones; () at creation: the cluster's
    disk_size_gb: int = 0  # 0: GKE's default, filled in at creation
    spot: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    resource_labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)
    accelerators: tuple[Accelerator, ...] = ()
    autoscaling: Autoscaling = Autoscaling()
    status: str = "PROVISIONING"


DEFAULT_DISK_SIZE_GB = 100
# NodeConfig.diskSizeGb (container v1 API reference): "The smallest allowed disk size is 12 GB"
# (15 GB from GKE 1.36.3-gke.1480000); 0 asks for the default.
MIN_DISK_SIZE_GB = 12


class GkeBackend:
    """The clusters of one project in one location (region or zone): GKE's resource path puts the
    project and the location above a cluster, as moto keys by account and region."""

    def __init__(self, engine: Engine, project: str, location: str):
        self.engine = engine
        self.location_path = f"projects/{project}/locations/{location}"
        self.node_locations: dict[str, tuple[str, ...]] = {}  # cluster -> its node locations
        self.master_versions: dict[str, str] = {}  # cluster -> its currentMasterVersion

    def cluster_key(self, cluster: str) -> str:
        """The cluster's resource name, as its pools' and operations' names begin."""
        return f"{self.location_path}/clusters/{cluster}"

    def add_cluster(
        self,
        cluster: str,
        locations: tuple[str, ...] = (),
        master_version: str = KUBERNETES_VERSIONS.default,
    ) -> str:
        """A cluster whose pools run in `locations` unless they name theirs (default: a regional
        cluster's three zones, a zonal cluster's own zone), at `master_version`."""
        key = self.cluster_key(cluster)
        self.engine.add_cluster(key)
        self.node_locations[cluster] = locations or self.default_locations()
        self.master_versions[cluster] = master_version
        return key

    @property
    def location(self) -> str:
        return self.location_path.rsplit("/", 1)[1]

    @property
    def region(self) -> str:
        zonal = self.location.count("-") == 2  # us-central1-a is a zone, us-central1 a region
        return self.location.rsplit("-", 1)[0] if zonal else self.location

    def default_locations(self) -> tuple[str, ...]:
        if self.region == self.location:
            return tuple(f"{self.region}-{zone}" for zone in REGIONAL_ZONES)
        return (self.location,)

    def cluster(self, cluster: str) -> ClusterState:
        """The cluster's state as the engine holds it (tests set what the cloud would change)."""
        return self.engine.cluster(self.cluster_key(cluster))

    def seed_system_pool(self, cluster: str) -> None:
        """A pool the tool did not create, as every real cluster has."""
        pool = NodePool(
            "default-pool",
            "e2-standard-4",
            node_count=3,  # gcloud's default --num-nodes, per zone
            locations=self.node_locations.get(cluster, self.default_locations()),
            disk_size_gb=100,
            status="RUNNING",
        )
        self._pools(cluster)[pool.name] = pool

    def clusters(self) -> list[str]:
        """The resource names of this location's clusters."""
        prefix = f"{self.location_path}/clusters/"
        return [key for key in self.engine.clusters() if key.startswith(prefix)]

    # Reads

    def list_pools(self, cluster: str) -> list[NodePool]:
        with self.engine.lock:
            return list(self._pools(cluster).values())

    def get_pool(self, cluster: str, name: str) -> NodePool:
        with self.engine.lock:
            return self._pool(cluster, name)

    def master_version(self, cluster: str) -> str:
        self._pools(cluster)  # NotFound for an unknown cluster
        return self.master_versions.get(cluster, KUBERNETES_VERSIONS.default)

    def cluster_locations(self, cluster: str) -> tuple[str, ...]:
        self._pools(cluster)  # NotFound for an unknown cluster
        return self.node_locations.get(cluster, self.default_locations())

    def get_operation(self, operation_id: str) -> Operation:
        operation = self.engine.operation(operation_id)
        if operation is None or not operation.cluster.startswith(self.location_path + "/"):
            raise NotFound(f"Not found: {self.location_path}/operations/{operation_id}.")
        return operation

    # Operations

    def create_pool(self, cluster: str, pool: NodePool) -> Operation:
        with self.engine.lock:
            pools = self._pools(cluster)
            self._check_new_pool(pool)
            if pool.name in pools:
                raise AlreadyExists(f"Already exists: {self.cluster_key(cluster)}/nodePools/{pool.name}.")
            creating = replace(
                pool,
                disk_size_gb=pool.disk_size_gb or DEFAULT_DISK_SIZE_GB,
                locations=pool.locations or self.cluster_locations(cluster),
                status="PROVISIONING",
            )
            return self._begin(
                cluster,
                "create",
                pool.name,
                start=lambda: pools.__setitem__(pool.name, creating),
                finish=lambda: pools.__setitem__(pool.name, replace(pools[pool.name], status="RUNNING")),
            )

    def update_pool(self, cluster: str, name: str, changes: dict[str, Any]) -> Operation:
        """UpdateNodePool: `changes` holds the given UPDATABLE fields; others are refused."""
        with self.engine.lock:
            current = self._pool(cluster, name)
            fixed = sorted(set(changes) - set(UPDATABLE))
            if fixed:
                raise InvalidArgument(f"Node pool field(s) {', '.join(fixed)} cannot be updated.")
            updated = replace(current, **changes)
            self._check_disk(updated.disk_size_gb)
            self._check_taints(updated.taints)
            self._check_locations(updated.locations)
            return self._change(cluster, name, "update", updated)

    def set_autoscaling(self, cluster: str, name: str, autoscaling: Autoscaling) -> Operation:
        with self.engine.lock:
            self._check_autoscaling(autoscaling)
            return self._change(
                cluster, name, "update", replace(self._pool(cluster, name), autoscaling=autoscaling)
            )

    def set_size(self, cluster: str, name: str, node_count: int) -> Operation:
        with self.engine.lock:
            if node_count < 0:
                raise InvalidArgument("nodeCount must be >= 0.")
            return self._change(
                cluster, name, "update", replace(self._pool(cluster, name), node_count=node_count)
            )

    def autoscale_pool(self, cluster: str, name: str, node_count: int) -> None:
        """The cluster autoscaler resized the pool's instance groups: `node_count` nodes in each
        zone, no node-pool operation (it resizes the groups itself)."""
        with self.engine.lock:
            pools = self._pools(cluster)
            pools[name] = replace(self._pool(cluster, name), node_count=node_count)

    def delete_pool(self, cluster: str, name: str) -> Operation:
        with self.engine.lock:
            pools = self._pools(cluster)
            stopping = replace(self._pool(cluster, name), status="STOPPING")
            return self._begin(
                cluster,
                "delete",
                name,
                start=lambda: pools.__setitem__(name, stopping),
                finish=lambda: pools.pop(name, None),
            )

    # Rules

    def _check_new_pool(self, pool: NodePool) -> None:
        if not POOL_NAME.match(pool.name):
            raise InvalidArgument(f"Invalid node pool name {pool.name!r}: {POOL_NAME_RULE}.")
        if pool.node_count < 0:
            raise InvalidArgument("initialNodeCount must be >= 0.")
        self._check_disk(pool.disk_size_gb)
        self._check_taints(pool.taints)
        self._check_autoscaling(pool.autoscaling)
        if pool.locations:
            self._check_locations(pool.locations)
        if len(pool.accelerators) > 1:
            raise InvalidArgument("At most one accelerator config is supported.")
        for accelerator in pool.accelerators:
            self._check_accelerator(pool.machine_type, accelerator)

    def _check_accelerator(self, machine_type: str, accelerator: Accelerator) -> None:
        if machine_type not in GPU_MACHINE_TYPES:
            raise InvalidArgument(f"Accelerator {accelerator.type} cannot be attached to {machine_type}.")
        takes, counts = GPU_MACHINE_TYPES[machine_type]
        if accelerator.type != takes:
            raise InvalidArgument(f"Machine type {machine_type} takes {takes}, not {accelerator.type}.")
        if accelerator.count not in counts:
            allowed = ", ".join(str(c) for c in counts)
            raise InvalidArgument(
                f"Machine type {machine_type} takes {allowed} {accelerator.type}, not {accelerator.count}."
            )
        if accelerator.partition_size:
            sizes = PARTITION_SIZES.get(accelerator.type, ())
            if accelerator.partition_size not in sizes:
                raise InvalidArgument(
                    f"GPU partition size {accelerator.partition_size} is not supported for "
                    f"{accelerator.type}; supported: {', '.join(sizes) or 'none'}."
                )
        if accelerator.sharing_strategy:
            if accelerator.sharing_strategy not in SHARING_STRATEGIES:
                raise InvalidArgument(f"Unknown gpuSharingStrategy {accelerator.sharing_strategy}.")
            low, high = MAX_SHARED_CLIENTS
            if not low <= accelerator.max_shared_clients <= high:
                raise InvalidArgument(f"maxSharedClientsPerGpu must be between {low} and {high}.")

    @staticmethod
    def _check_disk(size_gb: int) -> None:
        if size_gb and size_gb < MIN_DISK_SIZE_GB:
            raise InvalidArgument(
                f"Disk size {size_gb} GB is too small: the smallest allowed is {MIN_DISK_SIZE_GB} GB."
            )

    @staticmethod
    def _check_taints(taints: tuple[tuple[str, str, str], ...]) -> None:
        seen = set()
        for key, _, effect in taints:
            if effect not in TAINT_EFFECTS:
                raise InvalidArgument(f"Invalid taint effect {effect!r} for key {key}.")
            if (key, effect) in seen:
                raise InvalidArgument(f"Found more than one taint with key {key} and effect {effect}.")
            seen.add((key, effect))

    def _check_locations(self, locations: tuple[str, ...]) -> None:
        """NodePool.locations: zones of the cluster's region ("Nodes must be in the region of
        their regional cluster or in the same region as their cluster's zone")."""
        if not locations:
            raise InvalidArgument("locations must name at least one zone.")
        for zone in locations:
            if not re.fullmatch(rf"{re.escape(self.region)}-[a-z]", zone):
                raise InvalidArgument(
                    f"Location {zone!r} is not a zone of the cluster's region {self.region}"
                )
        if len(set(locations)) != len(locations):
            raise InvalidArgument("locations must not repeat a zone.")

    @staticmethod
    def _check_autoscaling(autoscaling: Autoscaling) -> None:
        if not autoscaling.enabled:
            return
        per_zone = bool(autoscaling.min_nodes or autoscaling.max_nodes)
        if per_zone and autoscaling.total_limits:
            raise InvalidArgument("Per zone limits cannot be used with total limits.")
        if autoscaling.total_limits:
            if not 0 <= autoscaling.total_min_nodes <= autoscaling.total_max_nodes:
                raise InvalidArgument("Autoscaling needs 0 <= totalMinNodeCount <= totalMaxNodeCount.")
        elif not 0 <= autoscaling.min_nodes <= autoscaling.max_nodes:
            raise InvalidArgument("Autoscaling needs 0 <= minNodeCount <= maxNodeCount.")
        if autoscaling.location_policy not in ("", "BALANCED", "ANY"):
            raise InvalidArgument(f"Invalid locationPolicy {autoscaling.location_policy!r}.")

    # State

    def _pools(self, cluster: str) -> dict[str, NodePool]:
        try:
            return self.engine.cluster(self.cluster_key(cluster)).pools  # type: ignore[return-value]
        except UnknownCluster:
            raise NotFound(f"Not found: {self.cluster_key(cluster)}.") from None

    def _pool(self, cluster: str, name: str) -> NodePool:
        try:
            return copy.copy(self._pools(cluster)[name])
        except KeyError:
            raise NotFound(f"Not found: {self.cluster_key(cluster)}/nodePools/{name}.") from None

    def _change(self, cluster: str, name: str, kind: str, updated: NodePool) -> Operation:
        pools = self._pools(cluster)
        reconciling = replace(pools[name], status="RECONCILING")
        return self._begin(
            cluster,
            kind,
            name,
            start=lambda: pools.__setitem__(name, reconciling),
            finish=lambda: pools.__setitem__(name, replace(updated, status="RUNNING")),
        )

    def _begin(self, cluster: str, kind: Any, pool: str, start: Any, finish: Any) -> Operation:
        try:
            return self.engine.begin(self.cluster_key(cluster), kind, pool, finish=finish, start=start)
        except ClusterBusy as busy:
            raise FailedPrecondition(
                f"Cluster is running incompatible operation {busy.running.id}."
            ) from None
