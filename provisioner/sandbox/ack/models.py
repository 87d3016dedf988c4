"""The ACK emulator's state and rules: clusters, their node pools and the tasks that change them.

One AckBackend per account and region (moto's split); a cluster ID is unique across them, as ACK's
paths (`/clusters/{id}/...`) carry no region. The rules are this module's own tables, each with
its source: the SDK docstrings of alibabacloud-cs20151215 7.2.3 (the API reference's text) and
the ECS GPU instance-family doc. Nothing here reads the tool's hardware data, so a wrong fact in
the tool fails a test instead of passing twice.

Operations: ACK runs one operation per node pool at a time (other pools of the cluster may
change meanwhile). A pool's operation ends `engine.op_seconds` after it starts; its task
(DescribeTaskInfo) is `running` until then and `success` after.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from provisioner.sandbox.ack import exceptions as err
from provisioner.sandbox.engine import Engine
from provisioner.sandbox.versions import VersionFormat

# nodepool_info.name: "1 to 63 characters ... digits, Chinese characters, letters, and hyphens (-).
# It cannot start with a hyphen" (SDK ModifyClusterNodePoolRequestNodepoolInfo.name).
POOL_NAME = re.compile(r"^[0-9A-Za-z\u4e00-\u9fff][0-9A-Za-z\u4e00-\u9fff-]{0,62}$")
POOL_NAME_RULE = (
    "The name must be 1 to 63 characters in length and can contain digits, Chinese characters, "
    "letters, and hyphens (-). It cannot start with a hyphen (-)."
)
# nodepool_info.type (SDK CreateClusterNodePoolRequestNodepoolInfo.type); lingjun and hybrid pools
# are valid on ACK but not emulated.
POOL_TYPES = ("ess", "edge")
# ECS GPU instance types the emulator knows: ECS "GPU-accelerated compute-optimized instance
# families" (alibabacloud.com/help/en/ecs/user-guide/gpu-accelerated-compute-optimized-and-vgpu-
# accelerated-instance-families-1), plus the general-purpose g7 family of the seeded system pool
# (ECS "General-purpose instance families", g7).
INSTANCE_TYPES = frozenset(
    [f"ecs.gn6i-{s}" for s in ("c4g1.xlarge", "c8g1.2xlarge", "c16g1.4xlarge", "c24g1.6xlarge")]
    + [f"ecs.gn6i-{s}" for s in ("c40g1.10xlarge", "c24g1.12xlarge", "c24g1.24xlarge")]
    + ["ecs.ebmgn6i.24xlarge", "ecs.ebmgn7i.32xlarge", "ecs.ebmgn7.26xlarge", "ecs.ebmgn7e.32xlarge"]
    + [f"ecs.gn7i-c{s}" for s in ("8g1.2xlarge", "16g1.4xlarge", "32g1.8xlarge", "32g1.16xlarge")]
    + [f"ecs.gn7i-c{s}" for s in ("32g1.32xlarge", "48g1.12xlarge", "56g1.14xlarge")]
    + [f"ecs.gn7i-{s}" for s in ("2x.8xlarge", "4x.8xlarge", "4x.16xlarge", "8x.16xlarge", "8x.32xlarge")]
    + [f"ecs.gn7s-c{s}" for s in ("8g1.2xlarge", "16g1.4xlarge", "32g1.8xlarge", "32g1.16xlarge")]
    + [f"ecs.gn7s-c{s}" for s in ("32g1.32xlarge", "48g1.12xlarge", "56g1.14xlarge")]
    + [f"ecs.gn8is{s}" for s in (".2xlarge", ".4xlarge", "-2x.8xlarge", "-4x.16xlarge", "-8x.32xlarge")]
    + ["ecs.ebmgn8is.32xlarge", "ecs.ebmgn8ia.64xlarge"]
    + ["ecs.gn7-c12g1.3xlarge", "ecs.gn7-c13g1.13xlarge", "ecs.gn7-c13g1.26xlarge"]
    + [f"ecs.gn6v-c8g1.{s}" for s in ("2xlarge", "4xlarge", "8xlarge", "16xlarge")]
    + ["ecs.gn6v-c10g1.20xlarge"]
    + [f"ecs.gn6e-c12g1.{s}" for s in ("3xlarge", "6xlarge", "12xlarge", "24xlarge")]
    + [f"ecs.g7.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge")]
)
# scaling_group counts: instance_types 1 to 10, vswitch_ids 1 to 8 (SDK ScalingGroup docstrings).
MAX_INSTANCE_TYPES, MAX_VSWITCHES = 10, 8
VSWITCH_ID = re.compile(r"^vsw-[0-9a-z]+$")  # by example (vsw-bp1...); no documented charset
# auto_scaling: 0 <= min_instances <= max_instances <= 2000 (SDK AutoScaling docstrings).
MAX_INSTANCES = 2000
# system_disk_size: "Valid values: 20 to 2048" GiB; default max{40, image size} (SDK ScalingGroup).
SYSTEM_DISK_GIB = (20, 2048)
DEFAULT_SYSTEM_DISK_GIB = 40
SYSTEM_DISK_CATEGORIES = ("cloud_efficiency", "cloud_ssd", "cloud_essd", "cloud_auto", "cloud_essd_entry")
SPOT_STRATEGIES = ("NoSpot", "SpotWithPriceLimit", "SpotAsPriceGo")
CHARGE_TYPES = ("PrePaid", "PostPaid")
# auto_scaling.type: cpu (default), gpu, gpushare, spot; "cannot be modified after the node pool
# is created" (SDK CreateClusterNodePoolRequestAutoScaling.type).
SCALING_TYPES = ("cpu", "gpu", "gpushare", "spot")
# kubernetes_config.labels: up to 20; key unique, up to 64 characters; value may be empty, up to
# 128; neither may start with aliyun, acs:, https:// or http:// (SDK KubernetesConfig.labels).
MAX_LABELS, MAX_LABEL_KEY, MAX_LABEL_VALUE = 20, 64, 128
RESERVED_PREFIXES = ("aliyun", "acs:", "https://", "http://")
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")  # SDK models/_taint.py
# scaling_group.tags: key up to 128, unique, no aliyun / acs: prefix, no http(s):// (SDK ScalingGroup.tags).
MAX_TAG_KEY = 128
# Node pools per cluster: default quota 20 (ACK DescribeUserQuota, cluster_nodepool_quota).
POOL_QUOTA = 20

Label = tuple[str, str]
Taint = tuple[str, str, str]  # key, value, effect


@dataclass(frozen=True)
class AutoScaling:
    enable: bool = False
    min_instances: int = 0
    max_instances: int = 0
    type: str = "cpu"


@dataclass(frozen=True)
class NodePool:
    nodepool_id: str
    name: str
    type: str  # ess | edge
    region_id: str
    instance_types: tuple[str, ...] = ()
    vswitch_ids: tuple[str, ...] = ()
    desired_size: int = 0
    system_disk_size: int = DEFAULT_SYSTEM_DISK_GIB
    system_disk_category: str = "cloud_efficiency"
    spot_strategy: str = "NoSpot"
    instance_charge_type: str = "PostPaid"
    tags: tuple[Label, ...] = ()
    labels: tuple[Label, ...] = ()
    taints: tuple[Taint, ...] = ()
    runtime: str = "containerd"
    auto_scaling: AutoScaling = AutoScaling()
    is_default: bool = False
    scaled_size: int | None = None  # ECS nodes the cluster autoscaler keeps, where it runs
    state: str = "initial"  # initial, active, updating, scaling, deleting, failed
    created: str = ""  # nodepool_info.created, ISO 8601, set when the pool is created

    @property
    def total_nodes(self) -> int:
        """ECS nodes now: the autoscaler's minimum, or the desired size; edge nodes join by hand."""
        if self.type == "edge":
            return 0
        scaling = self.auto_scaling
        if not scaling.enable:
            return self.desired_size
        if self.scaled_size is None:
            return scaling.min_instances
        return max(scaling.min_instances, min(scaling.max_instances, self.scaled_size))


@dataclass
class Task:
    task_id: str
    cluster_id: str
    nodepool_id: str
    task_type: str  # nodepool_create, nodepool_update, nodepool_delete
    done_at: float
    state: str = "running"  # running, success, fail
    error: str = ""
    started_at: float = 0.0  # on the engine's clock, as done_at
    ended_at: float | None = None  # ... once it succeeded or failed


# A cluster's version as DescribeClusterDetail writes it (current_version, and init_version, its
# version at creation; the API reference's example: "1.32.1-aliyun.1"); a cluster asked for 1.X
# runs a patch of it, here .1.
KUBERNETES_VERSIONS = VersionFormat("{major}.{minor}.{patch}-aliyun.1", default_patch=1)


@dataclass
class Cluster:
    cluster_id: str
    name: str
    region_id: str
    current_version: str = KUBERNETES_VERSIONS.default
    pools: dict[str, NodePool] = field(default_factory=dict)  # nodepool_id -> pool
    # nodepool_id -> its running operation: the task, and what the pool becomes at its end (None: gone)
    pending: dict[str, tuple[Task, Callable[[], NodePool | None]]] = field(default_factory=dict)


class AckBackend:
    """The clusters of one account and region."""

    def __init__(self, engine: Engine, account: str, region: str, ids: Callable[[str], str]):
        self.engine = engine
        self.account = account
        self.region = region
        self.clusters: dict[str, Cluster] = {}
        self.tasks: dict[str, Task] = {}
        self._ids = ids

    def add_cluster(self, cluster_id: str, current_version: str = KUBERNETES_VERSIONS.default) -> Cluster:
        with self.engine.lock:
            return self.clusters.setdefault(
                cluster_id, Cluster(cluster_id, cluster_id, self.region, current_version)
            )

    def seed_system_pool(self, cluster_id: str) -> NodePool:
        """The default pool every ACK cluster is created with: ECS, no owner label, active."""
        pool = NodePool(
            nodepool_id=self._ids("np"),
            name="default-nodepool",
            type="ess",
            region_id=self.region,
            instance_types=("ecs.g7.xlarge",),
            vswitch_ids=("vsw-system0",),
            desired_size=2,
            system_disk_size=120,
            system_disk_category="cloud_essd",
            is_default=True,
            state="active",
            created=_now(),
        )
        self.clusters[cluster_id].pools[pool.nodepool_id] = pool
        return pool

    # Reads

    def get_cluster(self, cluster_id: str) -> Cluster:
        with self.engine.lock:
            return self._cluster(cluster_id)

    def list_pools(self, cluster_id: str, name: str | None = None) -> list[NodePool]:
        with self.engine.lock:
            pools = self._cluster(cluster_id).pools.values()
            return [p for p in pools if name is None or p.name == name]

    def get_pool(self, cluster_id: str, nodepool_id: str) -> NodePool:
        with self.engine.lock:
            return self._pool(self._cluster(cluster_id), nodepool_id)

    def task(self, task_id: str) -> Task | None:
        with self.engine.lock:
            self.settle()
            return self.tasks.get(task_id)

    # Operations

    def create_pool(self, cluster_id: str, pool: NodePool) -> Task:
        with self.engine.lock:
            cluster = self._cluster(cluster_id)
            check_pool(pool)
            if len(cluster.pools) >= POOL_QUOTA:
                raise err.QuotaExceededNodePool(
                    f"The number of node pools in cluster {cluster_id} has reached the quota of {POOL_QUOTA}."
                )
            if any(p.name == pool.name for p in cluster.pools.values()):
                raise err.ErrorNodePoolNameDuplicated(
                    f"A node pool named {pool.name} already exists in cluster {cluster_id}."
                )
            # An autoscaled pool given a desired size starts its scaling group there (within its
            # bounds), as a fixed one does: "the total number of nodes that the node pool should
            # maintain" (SDK ScalingGroup.desired_size); the autoscaler moves it from then on.
            started = pool.desired_size if pool.auto_scaling.enable and pool.desired_size else None
            created = replace(
                pool,
                nodepool_id=self._ids("np"),
                region_id=self.region,
                state="initial",
                created=_now(),
                scaled_size=started,
            )
            cluster.pools[created.nodepool_id] = created
            return self._begin(cluster, created.nodepool_id, "nodepool_create", lambda: replace(created))

    def modify_pool(self, cluster_id: str, nodepool_id: str, changes: dict[str, Any]) -> Task:
        """ModifyClusterNodePool: `changes` holds NodePool fields; the labels and taints given are
        the pool's whole new lists (the SDK always sends both)."""
        with self.engine.lock:
            cluster = self._cluster(cluster_id)
            current = self._pool(cluster, nodepool_id)
            self._check_idle(cluster, current)
            scaling = changes.get("auto_scaling")
            if scaling is not None and scaling.type != current.auto_scaling.type:
                raise err.InvalidParameter(
                    f"auto_scaling.type cannot be modified after the node pool is created "
                    f"({current.auto_scaling.type} -> {scaling.type})."
                )
            updated = replace(current, **changes)
            check_pool(updated)
            if updated.name != current.name and any(
                p.name == updated.name for p in cluster.pools.values() if p.nodepool_id != nodepool_id
            ):
                raise err.ErrorNodePoolNameDuplicated(
                    f"A node pool named {updated.name} already exists in cluster {cluster_id}."
                )
            sized_only = set(changes) <= {"desired_size", "auto_scaling"}
            cluster.pools[nodepool_id] = replace(current, state="scaling" if sized_only else "updating")
            return self._begin(
                cluster, nodepool_id, "nodepool_update", lambda: replace(updated, state="active")
            )

    def delete_pool(self, cluster_id: str, nodepool_id: str, force: bool) -> Task:
        with self.engine.lock:
            cluster = self._cluster(cluster_id)
            current = self._pool(cluster, nodepool_id)
            self._check_idle(cluster, current)
            if not force and current.total_nodes:
                raise err.ErrorNodePoolHasNodes(
                    f"Node pool {nodepool_id} has {current.total_nodes} nodes; "
                    "delete them first or set force=true."
                )
            cluster.pools[nodepool_id] = replace(current, state="deleting")
            return self._begin(cluster, nodepool_id, "nodepool_delete", lambda: None)

    def autoscale_pool(self, cluster_id: str, nodepool_id: str, nodes: int) -> None:
        """The cluster autoscaler resized the pool's scaling group to `nodes` ECS nodes."""
        with self.engine.lock:
            cluster = self._cluster(cluster_id)
            pool = self._pool(cluster, nodepool_id)
            cluster.pools[nodepool_id] = replace(pool, scaled_size=nodes)

    # State

    def settle(self) -> None:
        """End every pool operation whose time has come, and its task."""
        now = self.engine.now()
        for cluster in self.clusters.values():
            for nodepool_id, (task, finish) in list(cluster.pending.items()):
                pool = cluster.pools.get(nodepool_id)
                if pool is not None and pool.state == "failed":  # failed midway (set by a test): ends now
                    del cluster.pending[nodepool_id]
                    task.state, task.error, task.ended_at = "fail", f"node pool {nodepool_id} failed", now
                    continue
                if now < task.done_at:
                    continue
                del cluster.pending[nodepool_id]
                task.ended_at = task.done_at
                result = finish()
                if result is None:
                    cluster.pools.pop(nodepool_id, None)
                    task.state = "success"
                else:
                    cluster.pools[nodepool_id] = replace(result, state="active")
                    task.state = "success"

    def _begin(
        self, cluster: Cluster, nodepool_id: str, task_type: str, finish: Callable[[], NodePool | None]
    ) -> Task:
        now = self.engine.now()
        task = Task(
            self._ids("T"),
            cluster.cluster_id,
            nodepool_id,
            task_type,
            now + self.engine.op_seconds,
            started_at=now,
        )
        cluster.pending[nodepool_id] = (task, finish)
        self.tasks[task.task_id] = task
        return task

    def _check_idle(self, cluster: Cluster, pool: NodePool) -> None:
        if pool.nodepool_id in cluster.pending:
            raise err.ErrorNodePoolStatusInvalid(
                f"The current status of node pool {pool.nodepool_id} is {pool.state}; "
                f"another operation is in progress. Try again when the node pool is active."
            )

    def _cluster(self, cluster_id: str) -> Cluster:
        self.settle()
        try:
            return self.clusters[cluster_id]
        except KeyError:
            raise err.ErrorClusterNotFound(f"Cluster {cluster_id} not found.") from None

    @staticmethod
    def _pool(cluster: Cluster, nodepool_id: str) -> NodePool:
        try:
            return cluster.pools[nodepool_id]
        except KeyError:
            raise err.ErrorNodePoolNotFound(
                f"Node pool {nodepool_id} not found in cluster {cluster.cluster_id}."
            ) from None


class AckBackends:
    """Every account's and region's backend, made on first use, and the lookups ACK's paths need:
    a cluster by its ID alone, a task by its ID alone."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._backends: dict[tuple[str, str], AckBackend] = {}
        self._lock = threading.Lock()
        self._counter = itertools.count(1)

    def __getitem__(self, key: tuple[str, str]) -> AckBackend:
        with self._lock:
            if key not in self._backends:
                self._backends[key] = AckBackend(self.engine, *key, ids=self._id)
            return self._backends[key]

    def _id(self, prefix: str) -> str:
        number = next(self._counter)
        return f"{prefix}{number:032x}" if prefix == "np" else f"{prefix}-{number:08x}"

    def all(self) -> list[AckBackend]:
        with self._lock:
            return list(self._backends.values())

    def of_cluster(self, cluster_id: str) -> AckBackend:
        for backend in self.all():
            if cluster_id in backend.clusters:
                return backend
        raise err.ErrorClusterNotFound(f"Cluster {cluster_id} not found.")

    def of_task(self, task_id: str) -> Task:
        for backend in self.all():
            task = backend.task(task_id)
            if task is not None:
                return task
        raise err.ErrorTaskNotFound(f"Task {task_id} not found.")


# Rules


def check_pool(pool: NodePool) -> None:
    """Everything the API reference refuses in a node pool, as a whole (create, or after modify)."""
    if not POOL_NAME.match(pool.name):
        raise err.InvalidParameter(f"Invalid node pool name {pool.name!r}: {POOL_NAME_RULE}")
    if pool.type not in POOL_TYPES:
        raise err.InvalidParameter(
            f"nodepool_info.type {pool.type!r} is not supported; valid values: {', '.join(POOL_TYPES)}."
        )
    if pool.type == "ess":
        _check_scaling_group(pool)
    _check_auto_scaling(pool.auto_scaling)
    _check_labels(pool.labels)
    for key, _, effect in pool.taints:
        if not key:
            raise err.InvalidParameter("kubernetes_config.taints: a taint key must not be empty.")
        if effect not in TAINT_EFFECTS:
            raise err.InvalidParameter(
                f"kubernetes_config.taints: invalid effect {effect!r} for key {key}; "
                f"valid values: {', '.join(TAINT_EFFECTS)}."
            )
    _check_tags(pool.tags)


def _check_scaling_group(pool: NodePool) -> None:
    if not 1 <= len(pool.instance_types) <= MAX_INSTANCE_TYPES:
        raise err.InvalidParameter(
            f"scaling_group.instance_types must list 1 to {MAX_INSTANCE_TYPES} instance types."
        )
    for instance_type in pool.instance_types:
        if instance_type not in INSTANCE_TYPES:
            raise err.InvalidParameter(
                f"scaling_group.instance_types: {instance_type} is not a valid instance type."
            )
    if not 1 <= len(pool.vswitch_ids) <= MAX_VSWITCHES:
        raise err.InvalidParameter(f"scaling_group.vswitch_ids must list 1 to {MAX_VSWITCHES} vSwitches.")
    for vswitch in pool.vswitch_ids:
        if not VSWITCH_ID.match(vswitch):
            raise err.InvalidParameter(f"scaling_group.vswitch_ids: {vswitch!r} is not a vSwitch ID.")
    if not 0 <= pool.desired_size <= MAX_INSTANCES:
        raise err.InvalidParameter(f"scaling_group.desired_size must be between 0 and {MAX_INSTANCES}.")
    low, high = SYSTEM_DISK_GIB
    if not low <= pool.system_disk_size <= high:
        raise err.InvalidParameter(
            f"scaling_group.system_disk_size {pool.system_disk_size} is out of range: valid values are "
            f"{low} to {high} GiB."
        )
    for value, allowed, name in (
        (pool.system_disk_category, SYSTEM_DISK_CATEGORIES, "system_disk_category"),
        (pool.spot_strategy, SPOT_STRATEGIES, "spot_strategy"),
        (pool.instance_charge_type, CHARGE_TYPES, "instance_charge_type"),
    ):
        if value not in allowed:
            raise err.InvalidParameter(
                f"scaling_group.{name} {value!r} is not valid; valid values: {', '.join(allowed)}."
            )


def _check_auto_scaling(scaling: AutoScaling) -> None:
    if scaling.type not in SCALING_TYPES:
        raise err.InvalidParameter(
            f"auto_scaling.type {scaling.type!r} is not valid; valid values: {', '.join(SCALING_TYPES)}."
        )
    if scaling.enable and not 0 <= scaling.min_instances <= scaling.max_instances <= MAX_INSTANCES:
        raise err.InvalidParameter(
            f"auto_scaling: min_instances ({scaling.min_instances}) and max_instances "
            f"({scaling.max_instances}) must satisfy 0 <= min_instances <= max_instances <= {MAX_INSTANCES}."
        )


def _check_labels(labels: tuple[Label, ...]) -> None:
    if len(labels) > MAX_LABELS:
        raise err.InvalidParameter(
            f"kubernetes_config.labels: at most {MAX_LABELS} labels, got {len(labels)}."
        )
    keys = [key for key, _ in labels]
    for key, value in labels:
        if not key or len(key) > MAX_LABEL_KEY:
            raise err.InvalidParameter(
                f"kubernetes_config.labels: label key {key!r} must be 1 to {MAX_LABEL_KEY} characters."
            )
        if len(value) > MAX_LABEL_VALUE:
            raise err.InvalidParameter(
                f"kubernetes_config.labels: the value of {key} is longer than {MAX_LABEL_VALUE} characters."
            )
        if keys.count(key) > 1:
            raise err.InvalidParameter(f"kubernetes_config.labels: label key {key} is duplicated.")
        for text in (key, value):
            if text.startswith(RESERVED_PREFIXES):
                raise err.InvalidParameter(
                    f"kubernetes_config.labels: {text!r} must not start with {', '.join(RESERVED_PREFIXES)}."
                )


def _check_tags(tags: tuple[Label, ...]) -> None:
    keys = [key for key, _ in tags]
    for key, value in tags:
        if not key or len(key) > MAX_TAG_KEY or keys.count(key) > 1:
            raise err.InvalidParameter(
                f"scaling_group.tags: tag key {key!r} must be unique and 1 to {MAX_TAG_KEY} characters."
            )
        for text in (key, value):
            if text.startswith(("aliyun", "acs:")) or "http://" in text or "https://" in text:
                raise err.InvalidParameter(
                    f"scaling_group.tags: {text!r} must not start with aliyun or acs: nor contain http(s)://."
                )


def _now() -> str:
    """A creation time as DescribeClusterNodePools spells it: 2020-09-27T20:37:46+08:00."""
    return datetime.now(UTC).isoformat(timespec="seconds")
