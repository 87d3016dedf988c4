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
from provisioner.fleet import Pool
from provisioner.hardware import CloudProfile, InstanceType, MigProfile
from provisioner.nvidia import TOOL_LABELS
from provisioner.pools import GPU_TAINT, Taint
from provisioner.source import Loc, cut, shown

_WHY_NOT_ON_MIG = {
    "device-plugin": "the NVIDIA device plugin does not run MPS on MIG devices",
    "pool-field": "the cloud does not share MIG partitions this way",
}


class PoolProblems(Exception):
    """A pool's intent breaks cloud rules; each problem is (field loc within the pool, message)."""

    def __init__(self, problems: list[tuple[Loc, str]]):
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


@dataclass(frozen=True)
class CheckedPool:
    """A pool that keeps its cloud's rules, with what the checks found out about it."""

    instance_type: InstanceType
    gpus_per_node: int
    mig: MigProfile | None
    labels: dict[str, str]  # the user's
    taints: tuple[Taint, ...]  # the GPU taint first, then the user's


def check_pool(cloud: CloudProfile, pool: Pool) -> CheckedPool:
    """`pool` as checked against `cloud`'s rules; PoolProblems lists every rule it breaks."""
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
    return CheckedPool(instance_type, gpus_per_node, mig, labels, taints)


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
