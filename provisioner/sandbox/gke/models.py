"""The GKE emulator's state and rules: node pools per cluster and their operations.

Values use the API's enum names (NO_SCHEDULE, TIME_SHARING); `responses` turns them into the
REST wire format. What it rejects, it rejects as GKE does (FACTS.md, hardware/clouds.yaml).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from provisioner import hardware
from provisioner.sandbox.engine import ClusterBusy, Engine, Operation, UnknownCluster
from provisioner.sandbox.wire import ApiError

TAINT_EFFECTS = ("NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE")
SHARING_STRATEGIES = ("TIME_SHARING", "MPS")
MAX_SHARED_CLIENTS = (2, 48)
# Node-pool fields UpdateNodePool changes; anything else on a pool is fixed at creation.
UPDATABLE = ("labels", "taints", "resource_labels", "disk_size_gb")
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
    enabled: bool = False
    min_nodes: int = 0
    max_nodes: int = 0


@dataclass(frozen=True)
class NodePool:
    name: str
    machine_type: str
    node_count: int = 0  # initialNodeCount; setSize changes it
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


def cluster_key(project: str, location: str, cluster: str) -> str:
    return f"projects/{project}/locations/{location}/clusters/{cluster}"


class GkeBackend:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._rules = hardware.load().clouds["gke"]

    def add_cluster(self, project: str, location: str, cluster: str) -> str:
        key = cluster_key(project, location, cluster)
        self.engine.add_cluster(key)
        return key

    def seed_system_pool(self, key: str) -> None:
        """A pool the tool did not create, as every real cluster has."""
        pool = NodePool("default-pool", "e2-standard-4", node_count=3, disk_size_gb=100, status="RUNNING")
        self._pools(key)[pool.name] = pool

    def clusters(self, project: str, location: str) -> list[str]:
        prefix = f"projects/{project}/locations/"
        return [
            key
            for key in self.engine.clusters()
            if key.startswith(prefix) and (location == "-" or key.startswith(f"{prefix}{location}/"))
        ]

    # Reads

    def list_pools(self, key: str) -> list[NodePool]:
        with self.engine.lock:
            return list(self._pools(key).values())

    def get_pool(self, key: str, name: str) -> NodePool:
        with self.engine.lock:
            return self._pool(key, name)

    def get_operation(self, location_path: str, operation_id: str) -> Operation:
        operation = self.engine.operation(operation_id)
        if operation is None or not operation.cluster.startswith(location_path + "/"):
            raise ApiError(404, "NOT_FOUND", f"Not found: {location_path}/operations/{operation_id}.")
        return operation

    # Operations

    def create_pool(self, key: str, pool: NodePool) -> Operation:
        with self.engine.lock:
            pools = self._pools(key)
            self._check_new_pool(pool)
            if pool.name in pools:
                raise ApiError(409, "ALREADY_EXISTS", f"Already exists: {key}/nodePools/{pool.name}.")
            creating = replace(
                pool, disk_size_gb=pool.disk_size_gb or DEFAULT_DISK_SIZE_GB, status="PROVISIONING"
            )
            return self._begin(
                key,
                "create",
                pool.name,
                start=lambda: pools.__setitem__(pool.name, creating),
                finish=lambda: pools.__setitem__(pool.name, replace(pools[pool.name], status="RUNNING")),
            )

    def update_pool(self, key: str, name: str, changes: dict[str, Any]) -> Operation:
        """UpdateNodePool: `changes` holds the given UPDATABLE fields; others are refused."""
        with self.engine.lock:
            current = self._pool(key, name)
            fixed = sorted(set(changes) - set(UPDATABLE))
            if fixed:
                raise ApiError(
                    400, "INVALID_ARGUMENT", f"Node pool field(s) {', '.join(fixed)} cannot be updated."
                )
            updated = replace(current, **changes)
            self._check_disk(updated.disk_size_gb)
            self._check_taints(updated.taints)
            return self._change(key, name, "update", updated)

    def set_autoscaling(self, key: str, name: str, autoscaling: Autoscaling) -> Operation:
        with self.engine.lock:
            self._check_autoscaling(autoscaling)
            return self._change(key, name, "update", replace(self._pool(key, name), autoscaling=autoscaling))

    def set_size(self, key: str, name: str, node_count: int) -> Operation:
        with self.engine.lock:
            if node_count < 0:
                raise ApiError(400, "INVALID_ARGUMENT", "nodeCount must be >= 0.")
            return self._change(key, name, "update", replace(self._pool(key, name), node_count=node_count))

    def delete_pool(self, key: str, name: str) -> Operation:
        with self.engine.lock:
            pools = self._pools(key)
            stopping = replace(self._pool(key, name), status="STOPPING")
            return self._begin(
                key,
                "delete",
                name,
                start=lambda: pools.__setitem__(name, stopping),
                finish=lambda: pools.pop(name, None),
            )

    # Rules

    def _check_new_pool(self, pool: NodePool) -> None:
        if not self._rules.pool_name_pattern.match(pool.name):
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"Invalid node pool name {pool.name!r}: {self._rules.pool_name_rule}.",
            )
        if pool.node_count < 0:
            raise ApiError(400, "INVALID_ARGUMENT", "initialNodeCount must be >= 0.")
        self._check_disk(pool.disk_size_gb)
        self._check_taints(pool.taints)
        self._check_autoscaling(pool.autoscaling)
        if len(pool.accelerators) > 1:
            raise ApiError(400, "INVALID_ARGUMENT", "At most one accelerator config is supported.")
        for accelerator in pool.accelerators:
            self._check_accelerator(pool.machine_type, accelerator)

    def _check_accelerator(self, machine_type: str, accelerator: Accelerator) -> None:
        machine = hardware.load().instance_type("gke", machine_type)
        if machine is None:
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"Accelerator {accelerator.type} cannot be attached to {machine_type}.",
            )
        if accelerator.type != machine.accelerator:
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"Machine type {machine_type} takes {machine.accelerator}, not {accelerator.type}.",
            )
        counts = (machine.gpus,) if machine.gpus is not None else machine.gpu_choices
        if accelerator.count not in counts:
            allowed = ", ".join(str(c) for c in counts)
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"Machine type {machine_type} takes {allowed} {accelerator.type}, not {accelerator.count}.",
            )
        if accelerator.partition_size:
            sizes = PARTITION_SIZES.get(accelerator.type, ())
            if accelerator.partition_size not in sizes:
                raise ApiError(
                    400,
                    "INVALID_ARGUMENT",
                    f"GPU partition size {accelerator.partition_size} is not supported for "
                    f"{accelerator.type}; supported: {', '.join(sizes) or 'none'}.",
                )
        if accelerator.sharing_strategy:
            if accelerator.sharing_strategy not in SHARING_STRATEGIES:
                raise ApiError(
                    400, "INVALID_ARGUMENT", f"Unknown gpuSharingStrategy {accelerator.sharing_strategy}."
                )
            low, high = MAX_SHARED_CLIENTS
            if not low <= accelerator.max_shared_clients <= high:
                raise ApiError(
                    400, "INVALID_ARGUMENT", f"maxSharedClientsPerGpu must be between {low} and {high}."
                )

    @staticmethod
    def _check_disk(size_gb: int) -> None:
        if size_gb and size_gb < MIN_DISK_SIZE_GB:
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"Disk size {size_gb} GB is too small: the smallest allowed is {MIN_DISK_SIZE_GB} GB.",
            )

    @staticmethod
    def _check_taints(taints: tuple[tuple[str, str, str], ...]) -> None:
        seen = set()
        for key, _, effect in taints:
            if effect not in TAINT_EFFECTS:
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid taint effect {effect!r} for key {key}.")
            if (key, effect) in seen:
                raise ApiError(
                    400, "INVALID_ARGUMENT", f"Found more than one taint with key {key} and effect {effect}."
                )
            seen.add((key, effect))

    @staticmethod
    def _check_autoscaling(autoscaling: Autoscaling) -> None:
        if autoscaling.enabled and not 0 <= autoscaling.min_nodes <= autoscaling.max_nodes:
            raise ApiError(400, "INVALID_ARGUMENT", "Autoscaling needs 0 <= minNodeCount <= maxNodeCount.")

    # State

    def _pools(self, key: str) -> dict[str, NodePool]:
        try:
            return self.engine.cluster(key).pools  # type: ignore[return-value]
        except UnknownCluster:
            raise ApiError(404, "NOT_FOUND", f"Not found: {key}.") from None

    def _pool(self, key: str, name: str) -> NodePool:
        try:
            return copy.copy(self._pools(key)[name])
        except KeyError:
            raise ApiError(404, "NOT_FOUND", f"Not found: {key}/nodePools/{name}.") from None

    def _change(self, key: str, name: str, kind: str, updated: NodePool) -> Operation:
        pools = self._pools(key)
        reconciling = replace(pools[name], status="RECONCILING")
        return self._begin(
            key,
            kind,
            name,
            start=lambda: pools.__setitem__(name, reconciling),
            finish=lambda: pools.__setitem__(name, replace(updated, status="RUNNING")),
        )

    def _begin(self, key: str, kind: Any, pool: str, start: Any, finish: Any) -> Operation:
        try:
            return self.engine.begin(key, kind, pool, finish=finish, start=start)
        except ClusterBusy as busy:
            raise ApiError(
                400, "FAILED_PRECONDITION", f"Cluster is running incompatible operation {busy.running.id}."
            ) from None
