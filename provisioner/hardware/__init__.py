"""Hardware and cloud facts, loaded from the YAML files beside this module.

Everything cloud- or GPU-specific that the compiler needs lives in those files; this module only
gives them types. Each file names its sources.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from ruamel.yaml import YAML

from provisioner.pools import Taint

_PROFILE_NAME = re.compile(r"^(?P<compute>\d+)g\.(?P<memory>\d+)gb$")
# Seconds late a request paced by a window quota may reach the cloud with no window of the cloud's
# clock getting more than its count: ACK's 10-a-second windows, paced with no such allowance, were
# overrun under a loaded machine (4 of 404 requests answered 429, bench `fleet`).
WINDOW_LATENESS = 0.25


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.10gb"
    instances: int  # how many fit on one GPU
    gi: int  # GPU-instance profile ID (nvidia-smi mig -cgi)

    @property
    def memory_gb(self) -> int:
        return int(_PROFILE_NAME.match(self.name)["memory"])  # type: ignore[index]


@dataclass(frozen=True)
class Gpu:
    key: str  # e.g. "A100-80GB"
    name: str  # e.g. "A100 80GB"
    memory_gb: int
    mig: Mapping[str, MigProfile] = field(default_factory=dict)

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig)


@dataclass(frozen=True)
class InstanceType:
    cloud: str
    name: str
    gpu: Gpu
    gpus: int | None  # fixed count, or None where the pool chooses from gpu_choices
    gpu_choices: tuple[int, ...] = ()
    accelerator: str | None = None  # the cloud's accelerator type name, where its API takes one


@dataclass(frozen=True)
class SharingMode:
    min_replicas: int
    max_replicas: int | None
    on_mig: bool
    strategy: str | None = None  # the cloud's own enum name, where sharing is a pool field


@dataclass(frozen=True)
class PoolLimits:
    """What a cloud's API refuses in a pool beyond Kubernetes' own rules (clouds.yaml `limits`)."""

    max_nodes: int  # per pool, or per zone with nodes_per_zone; for count and the autoscaling maximum
    nodes_per_zone: bool = False
    min_disk_size_gb: int | None = None
    max_disk_size_gb: int | None = None
    max_label_key_length: int | None = None  # the whole key, prefix included
    min_label_value_length: int = 0
    max_taint_key_length: int | None = None
    max_taints: int | None = None  # the GPU taint provisioner adds counts too
    max_labels: int | None = None  # the user's labels on one pool
    max_tags: int | None = None  # on the resource the autoscaler's hints go on ...
    taken_tags: int = 0  # ... of which the cloud and the tool take this many themselves
    reserved_label_prefixes: Mapping[str, str] = field(default_factory=dict)  # prefix -> why


@dataclass(frozen=True)
class MemoryScheduler:
    """A cloud's own GPU scheduler that shares GPUs by memory, steered by a node-pool label
    (ACK cGPU: ack.node.gpu.schedule): pods request GiB of GPU memory, not a replica."""

    label: str
    exclusive: str  # the label value for whole GPUs
    isolation: Mapping[str, str]  # isolation level -> label value
    edge_isolation: frozenset[str]  # the levels edge pools support
    placement_label: str
    resource: str  # what pods request, in GiB
    gib_per_gpu: Mapping[str, int]  # GPU key -> GiB the scheduler advertises per GPU

    def mode_of(self, value: str) -> str | None:
        """The isolation level a label value stands for; None for whole GPUs or a value not written here."""
        return next((level for level, written in self.isolation.items() if written == value), None)


@dataclass(frozen=True)
class ZoneRules:
    """How a cloud's pools name the zones their nodes run in (clouds.yaml `zones`)."""

    field: str  # the cloud's own field, for messages
    pattern: str  # a zone's form, a regex where {region} stands for the cluster's region
    example: str  # one, for messages
    count_per_zone: bool  # the cloud's fixed size is per zone: a count is spread over the zones
    follows_cluster: bool  # a pool that names none runs in the cluster's zones (so import omits them)

    def matches(self, zone: str, region: str) -> bool:
        return re.fullmatch(self.pattern.replace("{region}", re.escape(region)), zone) is not None


@dataclass(frozen=True)
class PoolLabel:
    """The node label a cloud puts on each node of a pool (clouds.yaml `poolLabel`)."""

    key: str
    value: Literal["name", "cloudId"]  # the pool's name, or the cloud's own ID of the pool


@dataclass(frozen=True)
class PlacementRules:
    """What a pod needs to land on one of a cloud's pools (clouds.yaml `placement`)."""

    mig_label: str | None = None  # a node label MIG pods select with the partition size
    sharing_strategy_label: str | None = None  # a node label shared-GPU pods select ...
    sharing_strategy_values: Mapping[str, str] = field(default_factory=dict)  # ... sharing mode -> value
    sharing_clients_label: str | None = None  # ... and one with the clients per GPU
    pod_spec: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # sharing mode -> fields
    compute_share_isolation: str | None = None  # on memory-scheduler pools of this isolation ...
    compute_share_resource: str | None = None  # ... pods also request this percentage of a GPU


@dataclass(frozen=True)
class PollSchedule:
    """How often a driver asks whether an operation has ended (clouds.yaml `polling`): `first`
    seconds in where nothing says when it should end, then intervals growing with the time
    waited, up to `ceiling`."""

    first: float = 0.1
    factor: float = 1.3
    ceiling: float = 5.0

    def interval(self, waited: float) -> float:
        """The next interval after `waited` seconds: `first` plus `factor - 1` of the time waited
        (30% for 1.3), so an end is noticed within about that share of the wait. Polled from the
        start, it is first * factor**n, the geometric backoff; a wait that starts late, at an
        expected end, goes on from there."""
        return min(self.ceiling, self.first + (self.factor - 1) * waited)


@dataclass(frozen=True)
class AutoscalerHints:
    """The tags a cloud's cluster autoscaler reads for what one new node of a pool at zero will
    offer (clouds.yaml `autoscaler.hints`): keys with {name} for the resource, label or taint key."""

    on: str  # what carries them, for messages
    resource: str
    label: str | None = None  # None: the autoscaler reads labels and taints from the pool itself
    taint: str | None = None
    slash: str = "/"  # what stands for `/` in a key (Azure tag names may not hold one)
    underscore: str = "_"  # what stands for `_` in a label or taint key, where `_` stands for `/`
    auto_scaling_group: bool = False  # the same tags on the pool's Auto Scaling group too (EKS)


@dataclass(frozen=True)
class DraRules:
    """What a pool with gpu.allocation: dra needs on one cloud (clouds.yaml `dra`)."""

    device_plugin_off: Mapping[str, str]  # node labels that keep the device plugin off its nodes
    driver_root: str  # the chart's nvidiaDriverRoot on the cloud's nodes
    mig: bool  # static MIG partitions exist before the driver starts
    sharing: frozenset[str]  # modes the DRA driver may share GPUs with there
    refused: Mapping[str, str]  # intent (mig, a sharing mode, edge) -> why not, with the source
    install_note: str
    cloud_installs_driver: bool | None = None  # False: the pool turns the cloud's driver off (GKE)
    edge_pools: bool = True


@dataclass(frozen=True)
class DraSharing:
    gate: str  # the DRA driver's alpha feature gate for the mode
    min_replicas: int
    max_replicas: int
    on_mig: bool


@dataclass(frozen=True)
class DraDriver:
    """NVIDIA's DRA driver for GPUs (clouds.yaml `draDriver`)."""

    chart: HelmChart
    release: str
    namespace: str
    driver: str  # its DRA driver name, in ResourceSlices and opaque configs
    device_classes: Mapping[str, str]  # gpu / mig -> the class the chart creates
    min_kubernetes: tuple[int, int]
    extended_resource_since: tuple[int, int]
    sharing: Mapping[str, DraSharing]
    on_mig_refusal: str

    @property
    def gates(self) -> frozenset[str]:
        return frozenset(s.gate for s in self.sharing.values())


@dataclass(frozen=True)
class Bucket:
    """A token bucket: `size` requests at once, refilled `per_second`."""

    size: float
    per_second: float


@dataclass(frozen=True)
class Quota:
    """Where and how a cloud counts its API requests (clouds.yaml `quota`, sourced there)."""

    scope: tuple[str, ...]  # the ClusterRef fields, after the cloud, one quota counts
    counted_by: Literal["kind", "action", "all"]  # a bucket per kind, per API action, or one
    buckets: Mapping[str, Bucket]  # by kind (read, write, delete); "all" for countedBy all
    published: bool = True  # False: the cloud publishes none, the figures are chosen


@dataclass(frozen=True)
class CloudProfile:
    key: str  # "aks"
    title: str  # "AKS"
    pool_name_pattern: re.Pattern[str]
    pool_name_rule: str
    generation_suffix: str  # a replacement's cloud name: the fleet name, cut, then this ({n}: generation)
    pool_name_max: int
    mig_via: Literal["pool-field", "operator-label", "none"]
    mig_values: Mapping[str, int]  # field value -> GI profile ID; empty: the field takes names
    mig_unsupported: Mapping[str, frozenset[str]]  # GPU key -> profiles it has that the cloud cannot set
    sharing_via: Literal["pool-field", "device-plugin", "node-label"]
    sharing_modes: Mapping[str, SharingMode]
    refused_sharing: Mapping[str, str]  # mode -> why not here and what to use instead
    gpu_operator_values: Mapping[str, Any]
    spot_labels: Mapping[str, str]  # what the cloud writes into a Spot pool's own labels
    spot_taints: tuple[Taint, ...]  # ... and taints
    in_place: frozenset[str]  # PoolState fields the cloud changes on an existing pool
    limits: PoolLimits
    requests_at_once: int  # clusters one run lists on it at the same time, over all its processes
    quota: Quota
    mig_refusal: str | None = None  # with mig_via none: why, and what to use instead
    scheduler: MemoryScheduler | None = None  # with sharing_via node-label
    edge_labels: Mapping[str, str] | None = None  # {model, count} label keys; None: no edge pools
    gpu_stack_note: str | None = None  # what `render` says of a GPU stack the cloud installs itself
    # The kubeconfig context the cloud's CLI writes ({"name": ...} or {"match": glob}); empty:
    # the fleet must name one (kubeContext).
    kube_context: Mapping[str, str] = field(default_factory=dict)
    pool_label: PoolLabel | None = None  # the node label naming each node's pool
    placement: PlacementRules | None = None  # None: the tool cannot place pods on this cloud's pools
    polling: PollSchedule = PollSchedule()  # how its drivers wait for an operation to end
    zones: ZoneRules | None = None  # None: its pools name no zones (zones_refusal says why)
    zones_refusal: str | None = None
    # None: its autoscaler knows a pool's GPU sharing itself (GKE), or the tool knows no hints.
    autoscaler_hints: AutoscalerHints | None = None
    autoscaler_knows_sharing: bool = False
    autoscaler_renamed_gpu_note: str | None = None  # what plan says of a pool of renamed GPU slices
    dra: DraRules | None = None  # None: the tool compiles no DRA pools there

    @property
    def edge_pools(self) -> bool:
        return self.edge_labels is not None

    def mig_profiles(self, gpu: Gpu) -> list[MigProfile]:
        """The MIG profiles this cloud can partition `gpu` into, smallest first."""
        if self.mig_via == "none":
            return []
        unsupported = self.mig_unsupported.get(gpu.key, frozenset())
        settable = set(self.mig_values.values())
        return [
            p for p in gpu.mig.values() if p.name not in unsupported and (not settable or p.gi in settable)
        ]

    def mig_setting(self, profile: MigProfile) -> str:
        """The value of this cloud's MIG pool field for `profile`."""
        for value, gi in self.mig_values.items():
            if gi == profile.gi:
                return value
        return profile.name


@dataclass(frozen=True)
class HelmChart:
    repo: str  # e.g. "nvidia/gpu-operator"
    version: str  # the chart version the rendered values are checked against


@dataclass(frozen=True)
class Hardware:
    gpus: Mapping[str, Gpu]
    instance_types: Mapping[str, Mapping[str, InstanceType]]  # cloud -> name -> type
    clouds: Mapping[str, CloudProfile]
    gpu_operator_chart: HelmChart
    dra_driver: DraDriver

    def instance_type(self, cloud: str, name: str) -> InstanceType | None:
        return self.instance_types.get(cloud, {}).get(name)

    def gpus_named(self, model: str) -> list[Gpu]:
        """The GPUs `model` names: a key (T4-16GB) exactly, else every GPU whose key starts with
        it as a whole word (T4; A100 names two)."""
        if model in self.gpus:
            return [self.gpus[model]]
        return [gpu for key, gpu in self.gpus.items() if key.split("-")[0].lower() == model.lower()]

    def similar_instance_types(self, cloud: str, name: str, limit: int = 3) -> list[str]:
        known = list(self.instance_types.get(cloud, {}))
        close = difflib.get_close_matches(name, known, n=limit, cutoff=0.6)
        if close:
            return close
        lowered = {k.lower(): k for k in known}
        return [lowered[k] for k in difflib.get_close_matches(name.lower(), lowered, n=limit)]

    def clouds_offering(self, name: str) -> list[str]:
        return [cloud for cloud, types in self.instance_types.items() if name in types]


def _read(filename: str) -> Any:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    return YAML(typ="safe").load(text)


def _gpu(key: str, row: Mapping[str, Any]) -> Gpu:
    mig = {
        name: MigProfile(name=name, instances=spec["instances"], gi=spec["gi"])
        for name, spec in (row.get("mig") or {}).items()
    }
    return Gpu(key=key, name=row["name"], memory_gb=row["memoryGb"], mig=mig)


def _instance_type(cloud: str, name: str, row: Mapping[str, Any], gpus: Mapping[str, Gpu]):
    count = row["gpus"]
    return InstanceType(
        cloud=cloud,
        name=name,
        gpu=gpus[row["gpu"]],
        gpus=count if isinstance(count, int) else None,
        gpu_choices=() if isinstance(count, int) else tuple(count["choose"]),
        accelerator=row.get("accelerator"),
    )


def _taint(text: str) -> Taint:
    key_value, _, effect = text.rpartition(":")
    key, _, value = key_value.partition("=")
    return Taint(key, value, effect)  # type: ignore[arg-type]


def _cloud(key: str, row: Mapping[str, Any]) -> CloudProfile:
    modes = {
        mode: SharingMode(
            min_replicas=spec["minReplicas"],
            max_replicas=spec.get("maxReplicas"),
            on_mig=spec["onMig"],
            strategy=spec.get("strategy"),
        )
        for mode, spec in row["sharing"]["modes"].items()
    }
    return CloudProfile(
        key=key,
        title=row["title"],
        pool_name_pattern=re.compile(row["poolName"]["pattern"]),
        pool_name_rule=row["poolName"]["rule"],
        generation_suffix=row["poolName"]["generation"]["suffix"],
        pool_name_max=row["poolName"]["generation"]["maxLength"],
        mig_via=row["mig"]["via"],
        mig_values=row["mig"].get("values", {}),
        mig_unsupported={gpu: frozenset(names) for gpu, names in row["mig"].get("unsupported", {}).items()},
        sharing_via=row["sharing"]["via"],
        sharing_modes=modes,
        refused_sharing=row["sharing"].get("refused", {}),
        gpu_operator_values=row.get("gpuOperator", {}),
        spot_labels=row.get("spotAdds", {}).get("labels", {}),
        spot_taints=tuple(_taint(t) for t in row.get("spotAdds", {}).get("taints", [])),
        in_place=frozenset(row["inPlace"]),
        limits=_limits(row["limits"]),
        mig_refusal=row["mig"].get("refusal"),
        scheduler=_scheduler(row["sharing"]["scheduler"]) if "scheduler" in row["sharing"] else None,
        edge_labels=row["edgePools"]["labels"] if "edgePools" in row else None,
        gpu_stack_note=row.get("gpuStackNote"),
        kube_context=row.get("kubeContext", {}),
        pool_label=PoolLabel(**row["poolLabel"]) if "poolLabel" in row else None,
        placement=_placement(row["placement"]) if "placement" in row else None,
        polling=_polling(row["polling"]) if "polling" in row else PollSchedule(),
        requests_at_once=row["requestsAtOnce"],
        quota=_quota(row["quota"]),
        zones=_zones(row["zones"]) if "field" in row.get("zones", {}) else None,
        zones_refusal=row.get("zones", {}).get("refused"),
        autoscaler_hints=_hints(row["autoscaler"]["hints"]) if "hints" in row["autoscaler"] else None,
        autoscaler_knows_sharing=row["autoscaler"].get("knowsSharing", False),
        autoscaler_renamed_gpu_note=row["autoscaler"].get("renamedGpuNote"),
        dra=_dra(row["dra"]) if "dra" in row else None,
    )


def _dra(row: Mapping[str, Any]) -> DraRules:
    return DraRules(
        device_plugin_off=dict(row["devicePluginOff"]),
        driver_root=row["driverRoot"],
        mig=row["mig"],
        sharing=frozenset(row["sharing"]),
        refused=row.get("refused", {}),
        install_note=row["installNote"],
        cloud_installs_driver=row.get("cloudInstallsDriver"),
        edge_pools=row.get("edgePools", True),
    )


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _dra_driver(row: Mapping[str, Any]) -> DraDriver:
    return DraDriver(
        chart=HelmChart(**row["chart"]),
        release=row["release"],
        namespace=row["namespace"],
        driver=row["driver"],
        device_classes=row["deviceClasses"],
        min_kubernetes=_version(row["minKubernetes"]),
        extended_resource_since=_version(row["extendedResourceSince"]),
        sharing={
            mode: DraSharing(spec["gate"], spec["minReplicas"], spec["maxReplicas"], spec["onMig"])
            for mode, spec in row["sharing"].items()
        },
        on_mig_refusal=row["onMigRefusal"],
    )


def _hints(row: Mapping[str, Any]) -> AutoscalerHints:
    return AutoscalerHints(
        on=row["on"],
        resource=row["resource"],
        label=row.get("label"),
        taint=row.get("taint"),
        slash=row.get("slash", "/"),
        underscore=row.get("underscore", "_"),
        auto_scaling_group=row.get("autoScalingGroup", False),
    )


def _zones(row: Mapping[str, Any]) -> ZoneRules:
    return ZoneRules(
        field=row["field"],
        pattern=row["pattern"],
        example=row["example"],
        count_per_zone=row["countPerZone"],
        follows_cluster=row["followsCluster"],
    )


def _quota(row: Mapping[str, Any]) -> Quota:
    return Quota(
        scope=tuple(row["scope"]),
        counted_by=row["countedBy"],
        buckets={kind: _bucket(limit) for kind, limit in row["buckets"].items()},
        published=row.get("published", True),
    )


def _bucket(limit: Mapping[str, Any]) -> Bucket:
    if "requests" in limit:
        # N requests per W seconds, as a bucket that never lets more than N into any W seconds of
        # the cloud's clock though requests reach it up to WINDOW_LATENESS late (one sent late
        # lands beside the next, sent on time): a fifth of N at once, the rest refilled over
        # W + WINDOW_LATENESS (size + (W + WINDOW_LATENESS) * refill = N).
        requests, seconds = limit["requests"], limit["seconds"]
        return Bucket(requests / 5, (requests - requests / 5) / (seconds + WINDOW_LATENESS))
    return Bucket(limit["size"], limit["perSecond"])


def _polling(row: Mapping[str, Any]) -> PollSchedule:
    return PollSchedule(first=row["firstSeconds"], factor=row["factor"], ceiling=row["ceilingSeconds"])


def _placement(row: Mapping[str, Any]) -> PlacementRules:
    sharing = row.get("sharingLabels", {})
    compute = row.get("computeShare", {})
    return PlacementRules(
        mig_label=row.get("migLabel"),
        sharing_strategy_label=sharing.get("strategy"),
        sharing_strategy_values=sharing.get("values", {}),
        sharing_clients_label=sharing.get("clients"),
        pod_spec=row.get("podSpec", {}),
        compute_share_isolation=compute.get("isolation"),
        compute_share_resource=compute.get("resource"),
    )


def _scheduler(row: Mapping[str, Any]) -> MemoryScheduler:
    return MemoryScheduler(
        label=row["label"],
        exclusive=row["exclusive"],
        isolation=row["isolation"],
        edge_isolation=frozenset(row["edgeIsolation"]),
        placement_label=row["placementLabel"],
        resource=row["resource"],
        gib_per_gpu=row["gibPerGpu"],
    )


def _limits(row: Mapping[str, Any]) -> PoolLimits:
    disk = row.get("diskSizeGb", {})
    return PoolLimits(
        max_nodes=row["nodes"]["max"],
        nodes_per_zone=row["nodes"].get("perZone", False),
        min_disk_size_gb=disk.get("min"),
        max_disk_size_gb=disk.get("max"),
        max_label_key_length=row.get("labelKey", {}).get("maxLength"),
        min_label_value_length=row.get("labelValue", {}).get("minLength", 0),
        max_taint_key_length=row.get("taintKey", {}).get("maxLength"),
        max_taints=row.get("taints", {}).get("max"),
        max_labels=row.get("labels", {}).get("max"),
        max_tags=row.get("tags", {}).get("max"),
        taken_tags=row.get("tags", {}).get("taken", 0),
        reserved_label_prefixes=row.get("reservedLabelPrefixes", {}),
    )


@functools.cache
def load() -> Hardware:
    gpus = {key: _gpu(key, row) for key, row in _read("gpus.yaml")["gpus"].items()}
    types = {
        cloud: {name: _instance_type(cloud, name, row, gpus) for name, row in rows.items()}
        for cloud, rows in _read("instance_types.yaml").items()
    }
    cloud_rows = _read("clouds.yaml")
    clouds = {key: _cloud(key, row) for key, row in cloud_rows["clouds"].items()}
    chart = HelmChart(**cloud_rows["gpuOperatorChart"])
    dra = _dra_driver(cloud_rows["draDriver"])
    return Hardware(gpus=gpus, instance_types=types, clouds=clouds, gpu_operator_chart=chart, dra_driver=dra)
