"""What the EKS emulator adds to moto's state: the checks moto lacks, and node groups that take
time to create, update and delete (moto makes them ACTIVE at once and has no describe_update).

The rules are this module's own tables, each with its source, and import nothing of the tool's
hardware data: the emulator is an oracle independent of the tool, so a wrong fact in the tool's
data fails a test instead of passing both the compiler and the emulator.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from provisioner.sandbox.eks.exceptions import (
    InvalidParameterException,
    ResourceInUseException,
    ResourceNotFoundException,
)
from provisioner.sandbox.eks.groups import AutoScalingGroup
from provisioner.sandbox.engine import Engine
from provisioner.sandbox.versions import VersionFormat

# nodegroupName: CreateNodegroup API reference (1-63 characters, starting with a letter or digit,
# then letters, digits, hyphens and underscores); botocore's model gives it no pattern, so the
# check is the service's.
NODEGROUP_NAME = re.compile(r"^[0-9A-Za-z][-_0-9A-Za-z]{0,62}$")
NODEGROUP_NAME_RULE = (
    "letters, digits, hyphens and underscores, starting with a letter or digit, 1-63 characters"
)
# The enums of botocore's EKS model (data/eks/2017-11-01/service-2.json): TaintEffect,
# CapacityTypes, AMITypes.
TAINT_EFFECTS = ("NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE")
CAPACITY_TYPES = ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")
AMI_TYPES = (
    "AL2_x86_64",
    "AL2_x86_64_GPU",
    "AL2_ARM_64",
    "CUSTOM",
    "BOTTLEROCKET_ARM_64",
    "BOTTLEROCKET_x86_64",
    "BOTTLEROCKET_ARM_64_FIPS",
    "BOTTLEROCKET_x86_64_FIPS",
    "BOTTLEROCKET_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA_FIPS",
    "BOTTLEROCKET_x86_64_NVIDIA_FIPS",
    "WINDOWS_CORE_2019_x86_64",
    "WINDOWS_FULL_2019_x86_64",
    "WINDOWS_CORE_2022_x86_64",
    "WINDOWS_FULL_2022_x86_64",
    "WINDOWS_CORE_2025_x86_64",
    "WINDOWS_FULL_2025_x86_64",
    "AL2023_x86_64_STANDARD",
    "AL2023_ARM_64_STANDARD",
    "AL2023_x86_64_NEURON",
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
)
# CreateNodegroup API reference, taints: "a maximum of 50 taints per node group".
MAX_TAINTS = 50
# TagResource (EKS API reference, and the tagging page "Tag your Amazon EKS resources"): at most 50
# tags per resource, keys 1-128 and values 0-256 characters, and the aws: prefix is reserved.
MAX_TAGS = 50
TAG_KEY_LENGTH, TAG_VALUE_LENGTH = 128, 256
# A managed node group's ARN: arn:<partition>:eks:<region>:<account>:nodegroup/<cluster>/<name>/<uuid>.
NODEGROUP_ARN = re.compile(
    r"^arn:aws[-a-z]*:eks:[^:]+:\d{12}:nodegroup/(?P<cluster>[^/]+)/(?P<name>[^/]+)/[^/]+$"
)
# A cluster's version as EKS writes it: major.minor only (Cluster.version, "The Kubernetes server
# version for the cluster", botocore's EKS model; the EKS API reference's examples give "1.31").
# The patch its control plane runs shows only in the cluster's own /version, here .0.
KUBERNETES_VERSIONS = VersionFormat("{major}.{minor}", default_patch=0)
# (min, max) length of each, from botocore's EKS model (shapes labelKey, labelValue, taintKey,
# taintValue). botocore checks minimums client-side, not maximums: the service checks both.
LENGTHS = {"label key": (1, 63), "label value": (1, 63), "taint key": (1, 63), "taint value": (0, 63)}


def check_create(body: dict[str, Any]) -> None:
    """CreateNodegroup's checks that moto does not make."""
    name = body.get("nodegroupName", "")
    if not NODEGROUP_NAME.match(name):
        raise InvalidParameterException(f"Nodegroup name {name!r} is invalid: {NODEGROUP_NAME_RULE}.")
    if body.get("capacityType", "ON_DEMAND") not in CAPACITY_TYPES:
        raise InvalidParameterException(f"capacityType must be one of {', '.join(CAPACITY_TYPES)}.")
    if body.get("amiType", "AL2023_x86_64_STANDARD") not in AMI_TYPES:
        raise InvalidParameterException(f"amiType {body.get('amiType')!r} is not supported.")
    _check_scaling(body.get("scalingConfig") or {})
    _check_labels(body.get("labels") or {})
    _check_taints(body.get("taints") or [])


def with_cluster_version(body: dict[str, Any], cluster_version: str) -> dict[str, Any]:
    """CreateNodegroup's version (botocore's EKS model): "By default, the Kubernetes version of
    the cluster is used, and this is the only accepted specified value"; moto would make it 1.19."""
    version = body.get("version") or cluster_version
    if version != cluster_version:
        raise InvalidParameterException(
            f"version {version} is invalid: a new node group runs its cluster's Kubernetes version, "
            f"{cluster_version}."
        )
    return {**body, "version": version}


def check_update(body: dict[str, Any], current: dict[str, Any]) -> None:
    """UpdateNodegroupConfig's checks, against the node group as it is."""
    taints = body.get("taints") or {}
    _check_taints(taints.get("addOrUpdateTaints") or [])
    _check_labels((body.get("labels") or {}).get("addOrUpdateLabels") or {})
    scaling = {**current.get("scalingConfig", {}), **(body.get("scalingConfig") or {})}
    _check_scaling(scaling)


def check_tags(tags: Any) -> None:
    if not isinstance(tags, dict) or not tags:
        raise InvalidParameterException("tags must be a map of at least one tag.")
    for key, value in tags.items():
        if not isinstance(key, str) or not 1 <= len(key) <= TAG_KEY_LENGTH or key.lower().startswith("aws:"):
            raise InvalidParameterException(
                f"Tag key {key!r} is invalid: 1 to {TAG_KEY_LENGTH} characters, not starting with aws:."
            )
        if not isinstance(value, str) or len(value) > TAG_VALUE_LENGTH:
            raise InvalidParameterException(
                f"Tag value for {key!r} must be at most {TAG_VALUE_LENGTH} characters."
            )


def _check_scaling(scaling: dict[str, int]) -> None:
    low, high = scaling.get("minSize", 0), scaling.get("maxSize", 1)
    desired = scaling.get("desiredSize", low)
    if not 0 <= low <= high:
        raise InvalidParameterException(
            f"Minimum capacity {low} can't be greater than maximum capacity {high}."
        )
    if high < 1:
        raise InvalidParameterException("Maximum capacity must be at least 1.")
    if not low <= desired <= high:
        raise InvalidParameterException(f"Desired capacity {desired} must be between {low} and {high}.")


def _check_length(what: str, value: Any) -> None:
    low, high = LENGTHS[what]
    if not isinstance(value, str) or not low <= len(value) <= high:
        shown = repr(value) if len(str(value)) <= 80 else f"{str(value)[:80]!r}..."
        raise InvalidParameterException(f"The {what} {shown} must be {low} to {high} characters long.")


def _check_labels(labels: dict[str, Any]) -> None:
    for key, value in labels.items():
        _check_length("label key", key)
        _check_length("label value", value)


def _check_taints(taints: list[dict[str, Any]]) -> None:
    if len(taints) > MAX_TAINTS:
        raise InvalidParameterException(f"A node group can have at most {MAX_TAINTS} taints.")
    for taint in taints:
        _check_length("taint key", taint.get("key"))
        _check_length("taint value", taint.get("value", ""))
        if taint.get("effect") not in TAINT_EFFECTS:
            raise InvalidParameterException(
                f"Taint effect {taint.get('effect')!r} is invalid; allowed: {', '.join(TAINT_EFFECTS)}."
            )


@dataclass
class Transition:
    status: str  # CREATING, UPDATING or DELETING while it runs
    done_at: float
    update_id: str | None = None
    ghost: dict[str, Any] | None = None  # a deleted node group's last description, shown while DELETING


class EksBackend:
    """One account's node-group transitions in one region, keyed by (cluster, node group), each
    lasting the engine's `op_seconds`: moto keys its EKS backends by account and region, and so
    does this layer over it."""

    def __init__(self, engine: Engine, account: str, region: str):
        self.engine = engine
        self.account = account
        self.region = region
        self._running: dict[tuple[str, str], Transition] = {}
        self._updates: dict[str, tuple[tuple[str, str], float]] = {}
        self._ids = itertools.count(1)
        self.groups: dict[str, AutoScalingGroup] = {}  # the Auto Scaling groups, by name

    def add_group(self, name: str, cluster: str, nodegroup: str) -> None:
        with self.engine.lock:
            self.groups[name] = AutoScalingGroup.for_nodegroup(name, cluster, nodegroup)

    def drop_groups(self, cluster: str, nodegroup: str) -> None:
        with self.engine.lock:
            for name in [
                n for n, g in self.groups.items() if (g.cluster, g.nodegroup) == (cluster, nodegroup)
            ]:
                del self.groups[name]

    def group_sizes(self, group: AutoScalingGroup) -> tuple[int, int, int]:
        """(min, max, desired) of the group: its node group's scaling config, which EKS keeps
        the group at."""
        scaling = self.nodegroups(group.cluster).get(group.nodegroup, {}).get("scalingConfig", {})
        return scaling.get("minSize", 0), scaling.get("maxSize", 0), scaling.get("desiredSize", 0)

    def autoscale_nodegroup(self, cluster: str, nodegroup: str, desired: int) -> None:
        """The cluster autoscaler set the group's desired capacity (SetDesiredCapacity); EKS
        reports it as the node group's scalingConfig.desiredSize."""
        from moto.eks.models import eks_backends

        with self.engine.lock:
            found = eks_backends[self.account][self.region].clusters.get(cluster)
            group = found.nodegroups.get(nodegroup) if found is not None else None
            if group is not None:
                group.scaling_config = {**(group.scaling_config or {}), "desiredSize": desired}

    def cluster_version(self, cluster: str) -> str | None:
        """The cluster's version as moto holds it (CreateCluster's), None for an unknown cluster."""
        from moto.eks.models import eks_backends

        with self.engine.lock:
            found = eks_backends[self.account][self.region].clusters.get(cluster)
            return None if found is None else found.version

    def group_of(self, cluster: str, nodegroup: str) -> AutoScalingGroup | None:
        with self.engine.lock:
            return next(
                (g for g in self.groups.values() if (g.cluster, g.nodegroup) == (cluster, nodegroup)), None
            )

    def start(self, key: tuple[str, str], status: str, ghost: dict[str, Any] | None = None) -> Transition:
        with self.engine.lock:
            transition = Transition(status, self.engine.now() + self.engine.op_seconds, ghost=ghost)
            if status == "UPDATING":
                transition.update_id = f"update-{next(self._ids)}"
                self._updates[transition.update_id] = (key, transition.done_at)
            self._running[key] = transition
            return transition

    def current(self, key: tuple[str, str]) -> Transition | None:
        with self.engine.lock:
            transition = self._running.get(key)
            if transition is not None and self.engine.now() >= transition.done_at:
                del self._running[key]
                return None
            return transition

    def deleting(self, cluster: str) -> list[str]:
        return [
            ng for (c, ng) in list(self._running) if c == cluster and (t := self.current((c, ng))) and t.ghost
        ]

    def update_status(self, key: tuple[str, str], update_id: str) -> str | None:
        with self.engine.lock:
            found = self._updates.get(update_id)
            if found is None or found[0] != key:
                return None
            return "Successful" if self.engine.now() >= found[1] else "InProgress"

    def ensure_idle(self, key: tuple[str, str]) -> None:
        transition = self.current(key)
        if transition is not None:
            raise ResourceInUseException(
                f"Nodegroup {key[1]} is currently {transition.status}; wait until it is ACTIVE."
            )

    def tag_nodegroup(self, arn: str, tags: Any) -> bool:
        """TagResource on a node group's ARN: its tags merged with `tags`; False where `arn`
        names no node group (a cluster's, which moto tags itself)."""
        from moto.eks.models import eks_backends

        named = NODEGROUP_ARN.match(arn)
        if named is None:
            return False
        check_tags(tags)
        with self.engine.lock:
            found = eks_backends[self.account][self.region].clusters.get(named["cluster"])
            group = found.nodegroups.get(named["name"]) if found is not None else None
            if group is None or group.arn != arn:
                raise ResourceNotFoundException(f"No node group found for ARN: {arn}.")
            merged = {**(group.tags or {}), **tags}
            if len(merged) > MAX_TAGS:
                raise InvalidParameterException(
                    f"A resource has at most {MAX_TAGS} tags; this would have {len(merged)}."
                )
            group.tags = merged
        return True

    def untag_nodegroup(self, arn: str, keys: list[str]) -> bool:
        """UntagResource on a node group's ARN (keys it does not hold are no error, as in AWS);
        False where `arn` names no node group."""
        from moto.eks.models import eks_backends

        named = NODEGROUP_ARN.match(arn)
        if named is None:
            return False
        if not keys:
            raise InvalidParameterException("tagKeys must hold at least one key.")
        with self.engine.lock:
            found = eks_backends[self.account][self.region].clusters.get(named["cluster"])
            group = found.nodegroups.get(named["name"]) if found is not None else None
            if group is None or group.arn != arn:
                raise ResourceNotFoundException(f"No node group found for ARN: {arn}.")
            group.tags = {k: v for k, v in (group.tags or {}).items() if k not in keys}
        return True

    def nodegroups(self, cluster: str) -> dict[str, dict[str, Any]]:
        """`cluster`'s node groups that have nodes, as moto holds them (the sandbox's Kubernetes
        API reads them): those still CREATING have none yet, those DELETING are gone from moto."""
        from moto.eks.models import eks_backends

        with self.engine.lock:
            found = eks_backends[self.account][self.region].clusters.get(cluster)
            groups = dict(found.nodegroups) if found is not None else {}
            return {
                name: {
                    "instanceTypes": list(group.instance_types or []),
                    "scalingConfig": dict(group.scaling_config or {}),
                    "labels": dict(group.labels or {}),
                    "taints": [dict(t) for t in group.taints or []],
                    "capacityType": group.capacity_type,
                    "tags": dict(group.tags or {}),
                }
                for name, group in groups.items()
                if (t := self.current((cluster, name))) is None or t.status != "CREATING"
            }
