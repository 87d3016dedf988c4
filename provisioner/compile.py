"""The compiler: a fleet file's pools -> the NodeSetup each needs on its cloud.

It composes three concerns, each in its own module: whether a pool keeps its cloud's rules
(rules.py), how NVIDIA's conventions, the cloud's own pool fields or its GPU scheduler's pool
label carry MIG and sharing (nvidia.py), and what the pool then offers (capacity.py). What is left
here is the flow, file -> checked pools -> NodeSetups per cluster, and `desired_state`, the
PoolState that plan compares the clouds' pools to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from provisioner import hardware
from provisioner.autoscaler import hint_tags, most_hint_tags, node_template
from provisioner.capacity import GIB_IN_GB, SHARING_ISOLATION, memory_per_slice_gb, slices_per_gpu
from provisioner.clusters import Target
from provisioner.errors import Diagnostic, FleetError
from provisioner.fleet import Cluster, Fleet, Pool, SalvagedFleet, Sharing, parse
from provisioner.hardware import CloudProfile, Gpu, InstanceType, MigProfile
from provisioner.heap import heap_frozen
from provisioner.nvidia import DevicePluginConfig, marks
from provisioner.pools import POOL_NODE_LABEL, NativeSharing, PoolState, Scaling, Taint
from provisioner.rules import PoolProblems, check_pool


@dataclass(frozen=True)
class NodeSetup:
    """Everything a pool's nodes need for their GPUs to be shared as the fleet file says."""

    instance_type: InstanceType | None  # None: an edge pool of the user's own machines
    gpu: Gpu
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
    isolation: str  # what a slice isolates (capacity.ISOLATION_LEVELS)
    gib_per_gpu: int | None = None  # where a scheduler shares memory: the GiB it advertises per GPU
    allocation: str = "device-plugin"  # or "dra": pods claim devices through DRA (`resource` a DeviceClass)
    dra_feature_gates: frozenset[str] = frozenset()  # the DRA driver gates the pool opted in to

    @property
    def slice_unit(self) -> str:
        return "GiB" if self.gib_per_gpu is not None else "slice"

    @property
    def slices_per_gpu(self) -> int:
        if self.gib_per_gpu is not None:
            return self.gib_per_gpu
        return slices_per_gpu(self.mig, self.replicas)

    @property
    def slices_per_node(self) -> int:
        return self.gpus_per_node * self.slices_per_gpu

    @property
    def memory_per_slice_gb(self) -> float:
        if self.gib_per_gpu is not None:
            return GIB_IN_GB
        return memory_per_slice_gb(self.gpu, self.mig, self.replicas)


@dataclass(frozen=True)
class CompiledPool:
    pool: Pool
    setup: NodeSetup
    cloud: CloudProfile


@dataclass(frozen=True)
class CompiledCluster:
    cluster: Cluster
    cloud: CloudProfile
    pools: tuple[CompiledPool, ...]

    @property
    def name(self) -> str:
        return self.cluster.name

    @property
    def target(self) -> Target:
        return Target(self.cluster.name, self.cluster.ref)

    @property
    def device_plugin_configs(self) -> list[DevicePluginConfig]:
        """The distinct device-plugin configs this cluster's pools select, in key order."""
        configs = {p.setup.device_plugin for p in self.pools if p.setup.device_plugin}
        return sorted(configs, key=lambda c: (c.mode, c.replicas))

    @property
    def uses_gpu_operator(self) -> bool:
        return self.cloud.sharing_via == "device-plugin" or self.cloud.mig_via == "operator-label"

    @property
    def dra_pools(self) -> tuple[CompiledPool, ...]:
        return tuple(p for p in self.pools if p.setup.allocation == "dra")


@dataclass(frozen=True)
class CompiledFleet:
    clusters: tuple[CompiledCluster, ...]

    def cluster(self, name: str) -> CompiledCluster | None:
        return next((c for c in self.clusters if c.name == name), None)


def desired_state(compiled: CompiledPool) -> PoolState:
    """The PoolState a cloud should hold for `compiled`: what plan compares drivers' pools to."""
    pool, setup = compiled.pool, compiled.setup
    state = PoolState(
        name=pool.name,
        instance_type=pool.instance_type or "",  # an edge pool has none
        gpus_per_node=setup.gpus_per_node,
        mig_setting=setup.mig_setting,
        sharing=setup.native_sharing,
        spot=pool.spot,
        disk_size_gb=pool.disk_size_gb,
        # An edge pool's machines join it themselves: nothing for the cloud to scale.
        scaling=pool.nodes.scaling if pool.nodes is not None else Scaling.fixed(0),
        labels=tuple(setup.labels.items()),
        taints=setup.taints,
        edge=pool.edge if compiled.cloud.edge_pools else None,  # every pool there is edge or not
        zones=tuple(pool.zones) if pool.zones is not None else None,
        cloud_installs_driver=_cloud_installs_driver(compiled),
    )
    return dataclasses.replace(state, autoscaler_hints=node_template(compiled.cloud, state, setup))


def _cloud_installs_driver(compiled: CompiledPool) -> bool | None:
    """Where the cloud has a pool field for it (GKE), False on a DRA pool: the cloud must not install
    the NVIDIA driver there (clouds.yaml `dra.cloudInstallsDriver`). None elsewhere, device-plugin
    pools included: a pool whose user installs the driver (gpu-driver-version=disabled) is theirs to
    keep so, not a reason to replace it."""
    rules = compiled.cloud.dra
    if rules is None or rules.cloud_installs_driver is None or compiled.setup.allocation != "dra":
        return None
    return rules.cloud_installs_driver


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


def compile_fleet(fleet: Fleet | SalvagedFleet) -> CompiledFleet:
    hw = hardware.load()
    problems: list[Diagnostic] = []
    clusters = []
    with heap_frozen():  # a full collection would walk the loaded fleet again: 0.1 s at 10,000 pools
        for cluster in fleet.clusters:
            cloud = hw.clouds[cluster.cloud]
            pools = []
            for pool in cluster.pools:
                try:
                    setup = compile_pool(cloud, pool, cluster.zone_region)
                    pools.append(CompiledPool(pool, setup, cloud))
                except PoolProblems as exc:
                    problems += [fleet.source.diagnostic(pool._loc + loc, msg) for loc, msg in exc.problems]
            clusters.append(CompiledCluster(cluster, cloud, tuple(pools)))
    if problems:
        raise FleetError(problems)
    return CompiledFleet(tuple(clusters))


def compile_pool(cloud: CloudProfile, pool: Pool, region: str = "") -> NodeSetup:
    """The NodeSetup for `pool` on `cloud`, in a cluster of `region`; PoolProblems lists every
    rule it breaks."""
    checked = check_pool(cloud, pool, region)
    spec = pool.gpu
    replicas = spec.replicas
    marked = marks(
        cloud,
        checked.mig,
        spec.sharing,
        replicas,
        isolation=spec.isolation,
        placement=spec.placement,
        allocation=spec.allocation,
    )
    # The fleet's pool name, the same on every generation: what place's pods and verify select by.
    labels = checked.labels | marked.labels | {POOL_NODE_LABEL: pool.name}
    if pool.edge and cloud.edge_labels is not None:  # no instance type names an edge pool's GPUs
        labels |= {
            cloud.edge_labels["model"]: checked.gpu.key,
            cloud.edge_labels["count"]: str(checked.gpus_per_node),
        }
    limit = cloud.limits.max_labels
    if limit is not None and len(labels) > limit:
        derived = len(labels) - len(checked.labels)
        raise PoolProblems(
            [
                (
                    ("labels",),
                    f"{len(labels)} labels ({derived} set by provisioner); "
                    f"{cloud.title} allows at most {limit}",
                )
            ]
        )
    scheduler = cloud.scheduler if spec.sharing == "memory" else None
    setup = NodeSetup(
        instance_type=checked.instance_type,
        gpu=checked.gpu,
        gpus_per_node=checked.gpus_per_node,
        mig=checked.mig,
        mig_setting=marked.mig_setting,
        sharing=spec.sharing,
        replicas=replicas,
        native_sharing=marked.native_sharing,
        device_plugin=marked.device_plugin,
        labels=labels,
        taints=checked.taints,
        resource=marked.resource,
        # A MIG instance or a whole GPU is isolated by the hardware; sharing isolates what it does.
        isolation=spec.isolation or SHARING_ISOLATION.get(spec.sharing, "none"),
        gib_per_gpu=scheduler.gib_per_gpu[checked.gpu.key] if scheduler is not None else None,
        allocation=spec.allocation,
        dra_feature_gates=frozenset(spec.dra_feature_gates),
    )
    _check_hint_tags(CompiledPool(pool, setup, cloud))
    return setup


def _check_hint_tags(compiled: CompiledPool) -> None:
    """The autoscaler's hints fit the tags the cloud holds on their resource: each of the pool's
    labels and taints is one more tag there, so a label-heavy pool is refused here, not by apply."""
    cloud, setup = compiled.cloud, compiled.setup
    limits = cloud.limits
    if limits.max_tags is None:
        return
    if most_hint_tags(cloud, len(setup.labels), len(setup.taints)) + limits.taken_tags <= limits.max_tags:
        return  # room for every hint it could take: most pools, decided without building the hints
    hints = hint_tags(cloud.autoscaler_hints, desired_state(compiled).autoscaler_hints)
    if limits.max_tags is None or len(hints) + limits.taken_tags <= limits.max_tags:
        return
    room = limits.max_tags - limits.taken_tags
    raise PoolProblems(
        [
            (
                ("labels",),
                f"its autoscaler hints need {len(hints)} {cloud.title} tags (one per resource, label "
                f"and taint), and {room} are free there (at most {limits.max_tags}, "
                f"{limits.taken_tags} taken by the cloud and provisioner); give it fewer labels or taints",
            )
        ]
    )
