"""The rules a pool must keep on its cloud, checked before any cloud is asked.

Every check runs and every broken rule is reported, each with the field it is about, so that one
`validate` lists all a file's problems. What a cloud accepts is data (hardware/clouds.yaml, read
through `provisioner.hardware`); the checks read that table and never branch on a cloud's name.
The checks also yield what they checked (the instance type, GPUs per node, MIG profile, labels
and taints with the GPU taint), so the compiler builds on values that are known to be good.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner import hardware
from provisioner.fleet import LABEL_VALUE, Pool
from provisioner.hardware import CloudProfile, Gpu, InstanceType, MigProfile
from provisioner.nvidia import TOOL_LABELS
from provisioner.pools import GENERATION_LABEL_KEY, GPU_TAINT, OWNER_LABEL_KEY, POOL_NODE_LABEL, Taint
from provisioner.source import Loc, cut, shown

_WHY_NOT_ON_MIG = {
    "device-plugin": "the NVIDIA device plugin does not run MPS on MIG devices",
    "pool-field": "the cloud does not share MIG partitions this way",
    "node-label": "the cloud's scheduler shares whole GPUs by memory, not MIG partitions",
}


class PoolProblems(Exception):
    """A pool's intent breaks cloud rules; each problem is (field loc within the pool, message)."""

    def __init__(self, problems: list[tuple[Loc, str]]):
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


@dataclass(frozen=True)
class CheckedPool:
    """A pool that keeps its cloud's rules, with what the checks found out about it."""

    instance_type: InstanceType | None  # None: an edge pool, whose machines are the user's
    gpu: Gpu
    gpus_per_node: int
    mig: MigProfile | None
    labels: dict[str, str]  # the user's
    taints: tuple[Taint, ...]  # the GPU taint first, then the user's


def check_pool(cloud: CloudProfile, pool: Pool, region: str = "") -> CheckedPool:
    """`pool` as checked against `cloud`'s rules, in a cluster of `region` (where zone names say
    it); PoolProblems lists every rule it breaks."""
    problems = _Problems()
    if not cloud.pool_name_pattern.fullmatch(pool.name):
        problems.add(
            ("name",), f"{shown(pool.name)} is not a valid {cloud.title} pool name: {cloud.pool_name_rule}"
        )
    elif not LABEL_VALUE.fullmatch(pool.name):  # the compiler writes it as provisioner.io/pool's value
        problems.add(
            ("name",),
            f"{shown(pool.name)} cannot be the value of the node label {POOL_NODE_LABEL}, which names "
            "the pool on its nodes: letters, digits, '-', '_' and '.', beginning and ending with a "
            "letter or digit",
        )
    labels = _labels(cloud, pool, problems)
    taints = _taints(pool, problems)
    _check_limits(cloud, pool, taints, problems)
    _check_zones(cloud, pool, region, problems)
    _check_kind(cloud, pool, problems)

    if pool.edge:
        found = _edge_gpu(pool, problems)
        if found is None:
            raise PoolProblems(problems)
        instance_type, (gpu, gpus_per_node) = None, found
    else:
        if pool.instance_type is None:
            raise PoolProblems(problems)  # _check_kind said so
        instance_type = hardware.load().instance_type(cloud.key, pool.instance_type)
        if instance_type is None:
            problems.add(("instanceType",), _unknown_instance_type(cloud, pool.instance_type))
            raise PoolProblems(problems)
        gpu, gpus_per_node = instance_type.gpu, _gpus_per_node(instance_type, pool, problems)
    mig = _mig_profile(cloud, gpu, instance_type, pool, problems)
    if pool.gpu.allocation == "dra":
        _check_dra(cloud, pool, mig, problems)
    else:
        _check_sharing(cloud, pool, gpu, mig, problems)
    if problems:
        raise PoolProblems(problems)
    return CheckedPool(instance_type, gpu, gpus_per_node, mig, labels, taints)


class _Problems(list[tuple[Loc, str]]):
    def add(self, loc: Loc, message: str) -> None:
        self.append((loc, message))


# The tool's own markers on a pool, never the user's to set: each with what it marks.
_MARKERS = {
    OWNER_LABEL_KEY: "marks the pools provisioner owns",
    GENERATION_LABEL_KEY: "marks which generation of its fleet pool a cloud pool is",
}


def _labels(cloud: CloudProfile, pool: Pool, problems: _Problems) -> dict[str, str]:
    derived = dict(TOOL_LABELS) | {POOL_NODE_LABEL: "name"}
    if cloud.scheduler is not None:
        derived |= {cloud.scheduler.label: "gpu.sharing", cloud.scheduler.placement_label: "gpu.placement"}
    if cloud.edge_labels is not None:
        derived |= {cloud.edge_labels["model"]: "gpu.model", cloud.edge_labels["count"]: "gpu.count"}
    if cloud.dra is not None:
        derived |= {key: "gpu.allocation" for key in cloud.dra.device_plugin_off if key not in derived}
    for key in pool.labels:
        if key in derived:
            problems.add(
                ("labels", key), f"{key} is set by provisioner from {derived[key]}; remove it from labels"
            )
        elif key in _MARKERS:
            problems.add(("labels", key), f"{key} {_MARKERS[key]}; remove it from labels")
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
    bounds = (("count", nodes.count), ("max", nodes.max)) if nodes is not None else ()
    # A per-zone limit holds for the pool's share in each zone; with its zones unknown (the
    # cluster's, which only the API holds), the whole pool is held to it.
    zones = len(set(pool.zones)) if limits.nodes_per_zone and pool.zones else 1
    for field, value in bounds:
        if value is not None and -(-value // zones) > limits.max_nodes:
            per = "per zone" if limits.nodes_per_zone else "per pool"
            spread = f" over {zones} zones" if zones > 1 else ""
            problems.add(
                ("nodes", field),
                f"{shown(value)} nodes{spread} is above the {title} maximum of {limits.max_nodes} {per}",
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


def _check_zones(cloud: CloudProfile, pool: Pool, region: str, problems: _Problems) -> None:
    """The pool's zones in the cloud's form, and a fixed count its zones can share evenly."""
    if pool.zones is None:
        return
    rules = cloud.zones
    if rules is None:
        problems.add(("zones",), f"{cloud.title} pools take no zones: {cloud.zones_refusal}")
        return
    where = f" of {region}" if "{region}" in rules.pattern else ""
    seen: set[str] = set()
    for i, zone in enumerate(pool.zones):
        if zone in seen:
            continue
        seen.add(zone)
        if not rules.matches(zone, region):
            example = rules.example.replace("{region}", region)
            problems.add(
                ("zones", i), f"{shown(zone)} is not a zone{where} ({cloud.title} zones look like {example})"
            )
        elif pool.zones.count(zone) > 1:
            problems.add(("zones", pool.zones.index(zone, i + 1)), f"{shown(zone)} is listed twice")
    count = pool.nodes.count if pool.nodes is not None else None
    zones = len(set(pool.zones))
    if rules.count_per_zone and count is not None and count % zones:
        lower, upper = count - count % zones, count - count % zones + zones
        multiples = f"{lower} or {upper}" if lower else str(upper)
        problems.add(
            ("nodes", "count"),
            f"{count} nodes cannot be spread evenly over {zones} zones: {cloud.title} runs the same "
            f"number of nodes in each zone of a pool ({count} / {zones} = {count / zones:.2f}); "
            f"give {multiples}",
        )


def _check_kind(cloud: CloudProfile, pool: Pool, problems: _Problems) -> None:
    """A cloud pool needs an instance type and nodes; an edge pool, the user's own machines, has
    neither, nor anything else the cloud would provision for it."""
    if pool.edge and not cloud.edge_pools:
        problems.add(("edge",), f"{cloud.title} has no edge pools of your own machines; remove edge")
        return
    if not pool.edge:
        either = " (or edge: true for a pool of your own machines)" if cloud.edge_pools else ""
        if pool.instance_type is None:
            problems.add(("instanceType",), f"is required{either}")
        if pool.nodes is None:
            problems.add(("nodes",), "is required")
        if pool.gpu.model is not None:
            problems.add(("gpu", "model"), "the instance type names the GPU; gpu.model is for edge pools")
        return
    why = "an edge pool's nodes are your own machines, which join it themselves"
    for present, loc, what in (
        (pool.instance_type is not None, ("instanceType",), "name their GPU with gpu.model and gpu.count"),
        (pool.nodes is not None, ("nodes",), "the tool neither scales nor counts them"),
        (pool.spot, ("spot",), "they are not the cloud's instances"),
        (pool.disk_size_gb is not None, ("diskSizeGb",), "they are not the cloud's instances"),
    ):
        if present:
            problems.add(loc, f"{why}: {what}; remove {loc[-1]}")


def _edge_gpu(pool: Pool, problems: _Problems) -> tuple[Gpu, int] | None:
    """The GPU an edge pool's machines carry, and how many each: gpu.model and gpu.count."""
    model, count = pool.gpu.model, pool.gpu.count
    if model is None or count is None:
        problems.add(("gpu",), "an edge pool names its machines' GPUs: set gpu.model (e.g. T4) and gpu.count")
        return None
    hw = hardware.load()
    named = hw.gpus_named(model)
    if len(named) != 1:
        known = ", ".join(g.key for g in named) if named else ", ".join(hw.gpus)
        what = "names several GPUs" if named else "is not a GPU model the data knows"
        problems.add(("gpu", "model"), f"{shown(model)} {what}; write one of: {known}")
        return None
    if count < 1:
        problems.add(("gpu", "count"), f"{shown(count)} GPUs: an edge machine with GPUs has at least 1")
        return None
    return named[0], count


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
    cloud: CloudProfile, gpu: Gpu, instance_type: InstanceType | None, pool: Pool, problems: _Problems
) -> MigProfile | None:
    wanted = pool.gpu.mig
    if wanted is None:
        return None
    if cloud.mig_via == "none":
        problems.add(("gpu", "mig"), f"MIG is not offered on {cloud.title}: {cloud.mig_refusal}")
        return None
    if not gpu.mig_capable:
        machines = f" of {instance_type.name}" if instance_type is not None else ""
        problems.add(
            ("gpu", "mig"),
            f"the {gpu.name}{machines} does not support MIG; remove gpu.mig "
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


def _check_sharing(
    cloud: CloudProfile, pool: Pool, gpu: Gpu, mig: MigProfile | None, problems: _Problems
) -> None:
    sharing, replicas = pool.gpu.sharing, pool.gpu.replicas
    if sharing == "exclusive":
        return
    if sharing in cloud.refused_sharing:
        problems.add(
            ("gpu", "sharing"), f"{cloud.title} does not offer {sharing}: {cloud.refused_sharing[sharing]}"
        )
        return
    mode = cloud.sharing_modes.get(sharing)
    if mode is None:
        offered = ", ".join(cloud.sharing_modes)
        problems.add(("gpu", "sharing"), f"{cloud.title} does not offer {sharing}; it offers {offered}")
        return
    if cloud.scheduler is not None:
        _check_memory_sharing(cloud, pool, gpu, problems)
    if replicas is None:
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


def _check_memory_sharing(cloud: CloudProfile, pool: Pool, gpu: Gpu, problems: _Problems) -> None:
    scheduler, isolation = cloud.scheduler, pool.gpu.isolation
    assert scheduler is not None
    if pool.edge and isolation not in scheduler.edge_isolation:
        problems.add(
            ("gpu", "isolation"),
            f"{cloud.title} edge pools share GPUs by scheduling only and isolate no {isolation}; "
            f"use isolation: {', '.join(sorted(scheduler.edge_isolation))} (or a cloud pool to isolate)",
        )
    if gpu.key not in scheduler.gib_per_gpu:
        problems.add(
            ("gpu", "sharing"),
            f"the GiB {cloud.title} advertises per {gpu.name} for memory sharing is not in the "
            f"hardware data; it knows: {', '.join(scheduler.gib_per_gpu)}",
        )


def _check_dra(cloud: CloudProfile, pool: Pool, mig: MigProfile | None, problems: _Problems) -> None:
    """A DRA pool: what the cloud lets the NVIDIA DRA driver do there (clouds.yaml `dra`), and the
    driver's alpha feature gates its sharing needs, which the pool must name to opt in."""
    rules, driver = cloud.dra, hardware.load().dra_driver
    spec = pool.gpu
    if rules is None:
        problems.add(("gpu", "allocation"), f"the tool compiles no DRA pools on {cloud.title} yet")
        return
    if pool.edge and not rules.edge_pools:
        problems.add(("gpu", "allocation"), f"allocation: dra on {cloud.title}: {rules.refused['edge']}")
    if pool.gpu.mig is not None and not rules.mig:
        problems.add(("gpu", "mig"), f"MIG with allocation: dra on {cloud.title}: {rules.refused['mig']}")
    known = ", ".join(sorted(driver.gates))
    for i, gate in enumerate(spec.dra_feature_gates):
        if gate not in driver.gates:
            problems.add(
                ("gpu", "draFeatureGates", i),
                f"{shown(gate)} is not a DRA driver feature gate a pool's sharing turns on; one of: {known}",
            )
    if spec.sharing == "exclusive":
        return
    if spec.sharing not in rules.sharing:
        why = rules.refused.get(spec.sharing, f"the DRA driver shares GPUs by {', '.join(driver.sharing)}")
        problems.add(("gpu", "sharing"), f"{spec.sharing} with allocation: dra on {cloud.title}: {why}")
        return
    mode = driver.sharing[spec.sharing]
    if mode.gate not in spec.dra_feature_gates:
        problems.add(
            ("gpu", "draFeatureGates"),
            f"{spec.sharing} under DRA needs the NVIDIA DRA driver's alpha feature gate {mode.gate} "
            f"(pkg/featuregates/featuregates.go; off by default): opt in with "
            f"draFeatureGates: [{mode.gate}], or use allocation: device-plugin",
        )
    replicas = spec.replicas or 0
    if not mode.min_replicas <= replicas <= mode.max_replicas:
        problems.add(
            ("gpu", "replicas"),
            f"{shown(replicas)} clients per GPU for {spec.sharing} under DRA; "
            f"from {mode.min_replicas} to {mode.max_replicas}",
        )
    if mig is not None and not mode.on_mig:
        problems.add(("gpu", "sharing"), f"{spec.sharing} with gpu.mig under DRA: {driver.on_mig_refusal}")
