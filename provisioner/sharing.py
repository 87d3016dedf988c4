"""The sharing compiler: a pool's intent -> the NodeSetup its cloud needs.

What a cloud accepts is data (hardware/clouds.yaml, read through `provisioner.hardware`); the
rules here read that table and never branch on a cloud's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner import hardware
from provisioner.fleet import Cluster, Fleet, Pool, Sharing, parse
from provisioner.hardware import CloudProfile, Gpu, InstanceType, MigProfile
from provisioner.pools import GPU_TAINT, NativeSharing, PoolState, Taint
from provisioner.source import Diagnostic, FleetError, Loc, cut, shown

DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_PREFIX = "all-"  # mig-parted's default configs name every-GPU-alike layouts all-<profile>
# Labels the tool derives from gpu: a user's own value would silently fight it.
TOOL_LABELS = {DEVICE_PLUGIN_LABEL: "gpu.sharing", MIG_CONFIG_LABEL: "gpu.mig"}

GPU_RESOURCE = "nvidia.com/gpu"
# The device plugin renames shared GPUs (renameByDefault) so a pod cannot mistake a share for a
# whole GPU; GKE's own sharing keeps nvidia.com/gpu.
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
DEFAULT_CONFIG_KEY = "default"
_CONFIG_KEY_PREFIX = {"time-slicing": "time-sliced", "mps": "mps"}
_DEVICE_PLUGIN_SECTION = {"time-slicing": "timeSlicing", "mps": "mps"}
_WHY_NOT_ON_MIG = {
    "device-plugin": "the NVIDIA device plugin does not run MPS on MIG devices",
    "pool-field": "the cloud does not share MIG partitions this way",
}


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
        section = {
            "renameByDefault": True,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": GPU_RESOURCE, "replicas": self.replicas}],
        }
        return {**default_device_plugin_config(), "sharing": {_DEVICE_PLUGIN_SECTION[self.mode]: section}}


def default_device_plugin_config() -> dict[str, Any]:
    # "single" serves MIG and whole GPUs alike (NVIDIA/k8s-device-plugin#233), matching the
    # GPU Operator's default mig.strategy.
    return {"version": "v1", "flags": {"migStrategy": "single"}}


@dataclass(frozen=True)
class NodeSetup:
    """Everything a pool's nodes need for their GPUs to be shared as the fleet file says."""

    instance_type: InstanceType
    gpus_per_node: int
    mig: MigProfile | None
    mig_setting: str | None  # the cloud's MIG pool field value (MIG1g, 1g.5gb), where it has one
    sharing: Sharing
    replicas: int | None
    native_sharing: NativeSharing | None
    device_plugin: DevicePluginConfig | None
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    resource: str  # what pods request

    @property
    def gpu(self) -> Gpu:
        return self.instance_type.gpu

    @property
    def slices_per_gpu(self) -> int:
        return slices_per_gpu(self.mig, self.replicas)

    @property
    def slices_per_node(self) -> int:
        return self.gpus_per_node * self.slices_per_gpu

    @property
    def memory_per_slice_gb(self) -> float:
        return memory_per_slice_gb(self.gpu, self.mig, self.replicas)


def slices_per_gpu(mig: MigProfile | None, replicas: int | None) -> int:
    """MIG instances per GPU (where partitioned) x clients per GPU or instance (where shared)."""
    return (mig.instances if mig else 1) * (replicas or 1)


def memory_per_slice_gb(gpu: Gpu, mig: MigProfile | None, replicas: int | None) -> float:
    """Memory one slice gets: isolated under MIG, a nominal share under time-slicing/MPS."""
    device = mig.memory_gb if mig else gpu.memory_gb
    return round(device / (replicas or 1), 2)


@dataclass(frozen=True)
class CompiledPool:
    pool: Pool
    setup: NodeSetup


@dataclass(frozen=True)
class CompiledCluster:
    cluster: Cluster
    cloud: CloudProfile
    pools: tuple[CompiledPool, ...]

    @property
    def device_plugin_configs(self) -> list[DevicePluginConfig]:
        """The distinct device-plugin configs this cluster's pools select, in key order."""
        configs = {p.setup.device_plugin for p in self.pools if p.setup.device_plugin}
        return sorted(configs, key=lambda c: (c.mode, c.replicas))

    @property
    def uses_gpu_operator(self) -> bool:
        return self.cloud.sharing_via == "device-plugin" or self.cloud.mig_via == "operator-label"


@dataclass(frozen=True)
class CompiledFleet:
    file: str
    clusters: tuple[CompiledCluster, ...]

    def cluster(self, name: str) -> CompiledCluster | None:
        return next((c for c in self.clusters if c.cluster.name == name), None)


def desired_state(compiled: CompiledPool) -> PoolState:
    """The PoolState a cloud should hold for `compiled`: what plan compares drivers' pools to."""
    pool, setup = compiled.pool, compiled.setup
    return PoolState(
        name=pool.name,
        instance_type=pool.instance_type,
        gpus_per_node=setup.gpus_per_node,
        mig_setting=setup.mig_setting,
        sharing=setup.native_sharing,
        spot=pool.spot,
        disk_size_gb=pool.disk_size_gb,
        scaling=pool.nodes.scaling,
        labels=tuple(setup.labels.items()),
        taints=setup.taints,
    )


class PoolProblems(Exception):
    """A pool's intent breaks cloud rules; each problem is (field loc within the pool, message)."""

    def __init__(self, problems: list[tuple[Loc, str]]):
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


def compile_file(path: str | Path, text: str | None = None) -> CompiledFleet:
    """Load and compile a fleet file (or `text` once read from it); FleetError lists every problem."""
    fleet, problems = parse(path, text)
    try:
        compiled = compile_fleet(fleet)
    except FleetError as exc:
        problems += exc.diagnostics
    if problems:
        raise FleetError(problems)
    return compiled


def compile_fleet(fleet: Fleet) -> CompiledFleet:
    hw = hardware.load()
    problems: list[Diagnostic] = []
    clusters = []
    for cluster in fleet.clusters:
        cloud = hw.clouds[cluster.cloud]
        pools = []
        for pool in cluster.pools:
            try:
                pools.append(CompiledPool(pool, compile_pool(cloud, pool)))
            except PoolProblems as exc:
                problems += [fleet.source.diagnostic(pool._loc + loc, msg) for loc, msg in exc.problems]
        clusters.append(CompiledCluster(cluster, cloud, tuple(pools)))
    if problems:
        raise FleetError(problems)
    return CompiledFleet(file=fleet.source.file, clusters=tuple(clusters))


def compile_pool(cloud: CloudProfile, pool: Pool) -> NodeSetup:
    """The NodeSetup for `pool` on `cloud`; PoolProblems lists every rule it breaks."""
    problems = _Problems()
    if not cloud.pool_name_pattern.fullmatch(pool.name):
        problems.add(
            ("name",), f"{shown(pool.name)} is not a valid {cloud.title} pool name: {cloud.pool_name_rule}"
        )
    labels = _labels(pool, problems)
    taints = _taints(pool, problems)
    _check_limits(cloud, pool, taints, problems)

    instance_type = hardware.load().instance_type(cloud.key, pool.instance_type)
    if instance_type is None:
        problems.add(("instanceType",), _unknown_instance_type(cloud, pool.instance_type))
        raise PoolProblems(problems)
    gpus_per_node = _gpus_per_node(instance_type, pool, problems)
    mig = _mig_profile(cloud, instance_type, pool, problems)
    _check_replicas(cloud, pool, mig, problems)
    if problems:
        raise PoolProblems(problems)

    spec = pool.gpu
    shared = spec.sharing != "exclusive"
    native = device_plugin = None
    if shared and cloud.sharing_via == "pool-field":
        strategy = cloud.sharing_modes[spec.sharing].strategy or spec.sharing
        native = NativeSharing(strategy, spec.replicas or 0)
    elif shared:
        device_plugin = DevicePluginConfig(spec.sharing, spec.replicas or 0)
        labels[DEVICE_PLUGIN_LABEL] = device_plugin.key
    mig_setting = None
    if mig and cloud.mig_via == "pool-field":
        mig_setting = cloud.mig_setting(mig)
    elif mig:
        labels[MIG_CONFIG_LABEL] = MIG_CONFIG_PREFIX + mig.name
    return NodeSetup(
        instance_type=instance_type,
        gpus_per_node=gpus_per_node,
        mig=mig,
        mig_setting=mig_setting,
        sharing=spec.sharing,
        replicas=spec.replicas if shared else None,
        native_sharing=native,
        device_plugin=device_plugin,
        labels=labels,
        taints=taints,
        resource=SHARED_GPU_RESOURCE if device_plugin else GPU_RESOURCE,
    )


class _Problems(list[tuple[Loc, str]]):
    def add(self, loc: Loc, message: str) -> None:
        self.append((loc, message))


def _labels(pool: Pool, problems: _Problems) -> dict[str, str]:
    for key in pool.labels:
        if key in TOOL_LABELS:
            problems.add(
                ("labels", key), f"{key} is set by provisioner from {TOOL_LABELS[key]}; remove it from labels"
            )
    return dict(pool.labels)


def _taints(pool: Pool, problems: _Problems) -> tuple[Taint, ...]:
    taints = [GPU_TAINT]
    for i, taint in enumerate(pool.taints):
        clash = next((t for t in taints if (t.key, t.effect) == (taint.key, taint.effect)), None)
        if clash == taint:
            continue  # the user spelled out the GPU taint, or wrote one twice: same thing
        if clash is not None:
            owner = "the GPU taint provisioner adds" if clash == GPU_TAINT else f"taint {clash}"
            problems.add(("taints", i), f"{taint} clashes with {owner} (same key and effect)")
            continue
        taints.append(taint)
    return tuple(taints)


def _check_limits(cloud: CloudProfile, pool: Pool, taints: tuple[Taint, ...], problems: _Problems) -> None:
    """What the cloud's API would refuse in this pool (clouds.yaml `limits`), refused here first."""
    limits, title = cloud.limits, cloud.title
    nodes = pool.nodes
    for field, value in (("count", nodes.count), ("max", nodes.max)):
        if value is not None and value > limits.max_nodes:
            problems.add(
                ("nodes", field),
                f"{shown(value)} nodes is above the {title} maximum of {limits.max_nodes} per pool",
            )
    disk = pool.disk_size_gb
    if disk is not None and limits.min_disk_size_gb is not None and disk < limits.min_disk_size_gb:
        problems.add(
            ("diskSizeGb",), f"{disk} GB is below the {title} minimum of {limits.min_disk_size_gb} GB"
        )
    if disk is not None and limits.max_disk_size_gb is not None and disk > limits.max_disk_size_gb:
        problems.add(
            ("diskSizeGb",), f"{shown(disk)} GB is above the {title} maximum of {limits.max_disk_size_gb} GB"
        )
    for key, value in pool.labels.items():
        reserved = next((p for p in limits.reserved_label_prefixes if key.startswith(p)), None)
        if reserved is not None:
            why = limits.reserved_label_prefixes[reserved]
            problems.add(("labels", key), f"{reserved}* labels are not yours to set on {title}: {why}")
        if limits.max_label_key_length is not None and len(key) > limits.max_label_key_length:
            problems.add(
                ("labels", key),
                f"the key is {len(key)} characters; {title} allows at most {limits.max_label_key_length}",
            )
        if len(value) < limits.min_label_value_length:
            problems.add(("labels", key), f"{title} does not accept an empty label value")
    for i, taint in enumerate(pool.taints):
        if limits.max_taint_key_length is not None and len(taint.key) > limits.max_taint_key_length:
            problems.add(
                ("taints", i),
                f"the key is {len(taint.key)} characters; {title} allows at most "
                f"{limits.max_taint_key_length}",
            )
    if limits.max_taints is not None and len(taints) > limits.max_taints:
        problems.add(
            ("taints",),
            f"{len(taints)} taints (the GPU taint provisioner adds included); "
            f"{title} allows at most {limits.max_taints} per pool",
        )


def _unknown_instance_type(cloud: CloudProfile, name: str) -> str:
    hw = hardware.load()
    message = f"{shown(name)} is not a known {cloud.title} GPU instance type"
    elsewhere = [hw.clouds[c].title for c in hw.clouds_offering(name)]
    if elsewhere:
        return f"{message}; it is an instance type of {' and '.join(elsewhere)}"
    similar = hw.similar_instance_types(cloud.key, name)
    if similar:
        return f"{message}; did you mean {', '.join(similar)}?"
    return f"{message}; known: {', '.join(hw.instance_types[cloud.key])}"


def _gpus_per_node(instance_type: InstanceType, pool: Pool, problems: _Problems) -> int:
    count, name, gpu = pool.gpu.count, instance_type.name, instance_type.gpu.name
    if instance_type.gpus is not None:
        if count is not None and count != instance_type.gpus:
            problems.add(("gpu", "count"), f"{name} always has {instance_type.gpus} GPU(s); remove gpu.count")
        return instance_type.gpus
    choices = ", ".join(map(str, instance_type.gpu_choices))
    if count is None:
        problems.add(
            ("gpu",), f"{name} takes a chosen number of {gpu} GPUs: set gpu.count to one of {choices}"
        )
    elif count not in instance_type.gpu_choices:
        problems.add(
            ("gpu", "count"), f"{shown(count)} {gpu} GPUs cannot be attached to {name}; one of: {choices}"
        )
    return count or 0


def _mig_profile(
    cloud: CloudProfile, instance_type: InstanceType, pool: Pool, problems: _Problems
) -> MigProfile | None:
    wanted, gpu = pool.gpu.mig, instance_type.gpu
    if wanted is None:
        return None
    if not gpu.mig_capable:
        problems.add(
            ("gpu", "mig"),
            f"the {gpu.name} of {instance_type.name} does not support MIG; remove gpu.mig "
            "or choose an instance type with A100, A30, H100, H200 or B200 GPUs",
        )
        return None
    offered = cloud.mig_profiles(gpu)
    profile = next((p for p in offered if p.name == wanted), None)
    if profile is None:
        names = ", ".join(p.name for p in offered)
        problems.add(
            ("gpu", "mig"),
            f"{cut(wanted)} is not a MIG profile of the {gpu.name} on {cloud.title}; it offers {names}",
        )
    return profile


def _check_replicas(cloud: CloudProfile, pool: Pool, mig: MigProfile | None, problems: _Problems) -> None:
    sharing, replicas = pool.gpu.sharing, pool.gpu.replicas
    if sharing == "exclusive" or replicas is None:
        return
    mode = cloud.sharing_modes.get(sharing)
    if mode is None:
        offered = ", ".join(cloud.sharing_modes)
        problems.add(("gpu", "sharing"), f"{cloud.title} does not offer {sharing}; it offers {offered}")
        return
    if replicas < mode.min_replicas:
        problems.add(
            ("gpu", "replicas"),
            f"{shown(replicas)} is below the minimum of {mode.min_replicas} clients per GPU for {sharing}",
        )
    if mode.max_replicas is not None and replicas > mode.max_replicas:
        limit = f"the {cloud.title} maximum of {mode.max_replicas}"
        problems.add(("gpu", "replicas"), f"{shown(replicas)} is above {limit} clients per GPU for {sharing}")
    if mig is not None and not mode.on_mig:
        problems.add(
            ("gpu", "sharing"),
            f"{sharing} on MIG partitions is not supported on {cloud.title}: "
            f"{_WHY_NOT_ON_MIG[cloud.sharing_via]}; use time-slicing, or drop gpu.mig",
        )
