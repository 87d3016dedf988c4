"""The cluster's nodes: not stored, computed on each read from the cloud emulator's pools (clouds.py)
and from what the GPU stack would advertise given each node's labels and the device plugin's
ConfigMap (rules.py).

What kubectl changes on a node (labels, taints, annotations, cordon) is kept per node until the node
goes away, and yields to the cloud when the cloud changes the same label or the pool's taints.

A node the cloud already counts but that is still booting (the autoscaler resized its pool and the
instance has not joined yet) is absent from the API until it joins, as a real node registers only
once its kubelet starts.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from provisioner.sandbox.kube import rules
from provisioner.sandbox.kube.clouds import Pool
from provisioner.sandbox.kube.configmaps import ConfigMaps
from provisioner.sandbox.kube.exceptions import NotFound
from provisioner.sandbox.kube.migmanager import MigManager, MigReport
from provisioner.sandbox.kube.objects import Revisions, now
from provisioner.sandbox.kube.selectors import label_selector

# kubelet's default --max-pods (kubelet configuration reference, maxPods: 110).
MAX_PODS = 110
# What the node lifecycle controller taints a cordoned node with (TaintNodesByCondition: kubernetes
# pkg/controller/nodelifecycle doNoScheduleTaintingPass, UnschedulableTaint; timeAdded set as it
# adds it), which the scheduler's NodeUnschedulable filter lets a pod tolerate.
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True)
class NodeGpus:
    """A node's GPUs as NVML shows them to a DRA kubelet plugin: which, how many, MIG state."""

    hardware: rules.Hardware
    mig_mode: bool
    mig_profile: str | None


@dataclass
class NodeEdits:
    """What was changed on one node through the API (kubectl label / taint / annotate / cordon),
    and, for the test helpers, what the node's agents report otherwise."""

    labels: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # key -> (cloud's, set)
    taints: tuple[list[dict[str, str]], list[dict[str, str]]] | None = None  # (the pool's, set)
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    cordoned: str = ""  # when spec.unschedulable was set: the taint's timeAdded
    mig_state: str | None = None  # what the MIG manager reports, forced (test helper)
    mig_stranded: bool = False  # MIG mode on and no partitions (test helper)
    capacity: dict[str, str] = field(default_factory=dict)  # resource -> quantity, forced (test helper)

    def apply_labels(self, labels: dict[str, str]) -> dict[str, str]:
        for key, (was, value) in list(self.labels.items()):
            if labels.get(key) != was:  # the cloud changed the label since: its value wins
                del self.labels[key]
            elif value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        return labels

    def apply_taints(self, taints: list[dict[str, str]]) -> list[dict[str, str]]:
        if self.taints is not None and self.taints[0] != taints:
            self.taints = None
        return copy.deepcopy(self.taints[1]) if self.taints is not None else taints


class Nodes:
    """Read and patch the nodes of one cluster's pools; the caller holds the cluster's lock."""

    def __init__(
        self, source: Any, config_maps: ConfigMaps, revisions: Revisions, mig: MigManager | None = None
    ) -> None:
        self.source = source  # the cluster's cloud adapter (clouds.ADAPTERS)
        self.mig = mig  # the MIG managers of pools that partition from the node label
        self.config_maps = config_maps
        self.revisions = revisions
        self.edits: dict[str, NodeEdits] = {}
        self._slots: dict[str, int] = {}
        self._seen: dict[str, tuple[str, str]] = {}  # node -> (uid, creationTimestamp)
        self.booting: dict[str, float] = {}  # node the cloud counts, not yet joined -> when it was asked for
        self.gpus: dict[str, NodeGpus] = {}  # GPU node -> its GPUs, as of the last `all`

    def all(self) -> dict[str, dict[str, Any]]:
        """Every node now, by name, as the API shows it."""
        config_map = self.config_maps.stored.get(
            (rules.DEVICE_PLUGIN_NAMESPACE, rules.DEVICE_PLUGIN_CONFIG_MAP)
        )
        nodes: dict[str, dict[str, Any]] = {}
        self.gpus = {}
        for pool in self.pools():
            for index, name in enumerate(pool.node_names):
                nodes[name] = self._node(pool, index, name, config_map)
        for gone in set(self.edits) - set(nodes):  # a node that went away takes its edits along
            del self.edits[gone]
        for gone in set(self._seen) - set(nodes):
            del self._seen[gone]
        if self.mig is not None:
            self.mig.forget(set(nodes))
        return nodes

    def pools(self) -> list[Pool]:
        """The cloud's pools as Kubernetes sees them, their joined nodes by name."""
        return [_joined(pool, self.booting) for pool in self.cloud_pools()]

    def cloud_pools(self) -> list[Pool]:
        """The cloud's pools as the cloud counts them: booting nodes included."""
        return self.source.pools(self._slot)

    def pools_by_name(self) -> dict[str, Pool]:
        return {pool.name: pool for pool in self.pools()}

    def cloud_pools_by_name(self) -> dict[str, Pool]:
        return {pool.name: pool for pool in self.cloud_pools()}

    def get(self, name: str) -> dict[str, Any]:
        try:
            return self.all()[name]
        except KeyError:
            raise NotFound.of("nodes", name) from None

    def matching(self, label_selector_text: str = "") -> list[dict[str, Any]]:
        matches = label_selector(label_selector_text)
        return [n for _, n in sorted(self.all().items()) if matches(n["metadata"]["labels"])]

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A merge / strategic-merge patch of the node's labels, annotations, taints or
        unschedulable (NodeSpec.taints is atomic: a patch replaces the whole list)."""
        self.get(name)
        edits = self.edits.setdefault(name, NodeEdits())
        metadata, spec = patch.get("metadata") or {}, patch.get("spec") or {}
        pool, index = self._pool_of(name)
        base_labels = self._cloud_labels(pool, index, name)  # what an edit yields to if the cloud changes it
        for key, value in (metadata.get("labels") or {}).items():
            edits.labels[key] = (base_labels.get(key), None if value is None else str(value))
        for key, value in (metadata.get("annotations") or {}).items():
            if value is None:
                edits.annotations.pop(key, None)
            else:
                edits.annotations[key] = str(value)
        if "taints" in spec:
            edits.taints = (copy.deepcopy(pool.taints), [dict(t) for t in spec["taints"] or []])
        if "unschedulable" in spec:
            cordon = bool(spec["unschedulable"])
            if cordon and not edits.unschedulable:
                edits.cordoned = now()
            edits.unschedulable = cordon
        self.revisions.next()
        return self.get(name)

    # Test helpers: what the node's agents would report otherwise.

    def fail_mig(self, node: str, state: str = "failed") -> None:
        """Make the MIG manager report `state` for `node` (it then leaves the GPUs whole)."""
        self.get(node)
        self.edits.setdefault(node, NodeEdits()).mig_state = state

    def stall_mig(self, node: str) -> None:
        """Keep `node`'s MIG reconfiguration in flight, or its next one, pending for good: the MIG
        manager gave up waiting for the GPU clients' pods (NVIDIA/gpu-operator#2833)."""
        self.get(node)
        if self.mig is not None:
            self.mig.stall(node)

    def strand_mig(self, node: str) -> None:
        """Leave `node`'s GPUs in MIG mode with no partitions (a MIG config that enabled MIG and
        created none): the device plugin finds no MIG devices, the DRA driver nothing to publish."""
        self.get(node)
        self.edits.setdefault(node, NodeEdits()).mig_stranded = True

    def set_capacity(self, node: str, resource: str, quantity: int | str) -> None:
        """Make `node` advertise `quantity` of `resource` (a device plugin that lost devices, a
        kubelet with fewer pods)."""
        self.get(node)
        self.edits.setdefault(node, NodeEdits()).capacity[resource] = str(quantity)

    def _slot(self, pool_key: str) -> int:
        """A stable small number per pool (for node IPs), in the order pools are first seen."""
        return self._slots.setdefault(pool_key, len(self._slots) + 1)

    def _pool_of(self, name: str) -> tuple[Pool, int]:
        for pool in self.pools():
            if name in pool.node_names:
                return pool, pool.node_names.index(name)
        raise NotFound.of("nodes", name)

    def _cloud_labels(self, pool: Pool, index: int, name: str) -> dict[str, str]:
        """The node's labels as the kubelet and the cloud set them (Kubernetes "Well-Known Labels,
        Annotations and Taints"), before any edit and before the GPU stack's agents add theirs."""
        return {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": pool.instance_type,
            **({"topology.kubernetes.io/region": self.source.region} if self.source.region else {}),
            **({"topology.kubernetes.io/zone": pool.zones[index]} if pool.zones else {}),
            **pool.labels,
        }

    def _node(self, pool: Pool, index: int, name: str, config_map: dict[str, Any] | None) -> dict[str, Any]:
        edits = self.edits.get(name) or NodeEdits()
        labels = self._cloud_labels(pool, index, name)
        labels = edits.apply_labels(labels)
        taints = edits.apply_taints([dict(t) for t in pool.taints])  # a taint is flat: key, value, effect
        advertised = rules.Advertised()
        if pool.hardware is not None:
            advertised = pool.advertise(
                pool.hardware, labels, config_map, self._mig(pool, name, labels, edits)
            )
            if edits.mig_stranded:
                advertised.mig_mode, advertised.mig_profile = True, None
                advertised.resources = dict.fromkeys(advertised.resources, 0)
            self.gpus[name] = NodeGpus(pool.hardware, advertised.mig_mode, advertised.mig_profile)
        labels.update(advertised.labels)  # the GPU stack's agents write theirs over anything else
        capacity = {"pods": str(MAX_PODS), **{k: str(v) for k, v in advertised.resources.items()}}
        capacity.update(edits.capacity)
        if name not in self._seen:  # a node keeps the uid and creation time it was first listed with
            self._seen[name] = (str(uuid.uuid4()), now())
        uid, created = self._seen[name]
        spec: dict[str, Any] = {}
        if taints:
            spec["taints"] = taints
        if edits.unschedulable:
            spec["unschedulable"] = True
            if not any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints):
                spec["taints"] = [
                    *taints,
                    {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule", "timeAdded": edits.cordoned},
                ]
        metadata: dict[str, Any] = {"name": name, "uid": uid, "creationTimestamp": created, "labels": labels}
        if edits.annotations:
            metadata["annotations"] = dict(edits.annotations)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": metadata,
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                    }
                ],
                "addresses": [{"type": "Hostname", "address": name}],
            },
        }
        # An opaque version that changes whenever what the node shows changes.
        digest = hashlib.sha256(repr(node).encode()).hexdigest()
        metadata["resourceVersion"] = str(int(digest[:12], 16))
        return node

    def _mig(self, pool: Pool, name: str, labels: dict[str, str], edits: NodeEdits) -> MigReport | None:
        """What the node's MIG manager reports: forced by a test helper (the GPUs left whole), else
        its own account of the label's changes; None where no MIG manager runs or no label is set."""
        if edits.mig_state is not None:
            return MigReport(edits.mig_state, None)
        wanted = labels.get(rules.MIG_CONFIG_LABEL)
        if not pool.mig_manager or self.mig is None or wanted is None or pool.hardware is None:
            return None
        return self.mig.report(name, wanted, rules.valid_mig_config(pool.hardware.gpu, wanted))


def _joined(pool: Pool, booting: dict[str, float]) -> Pool:
    """`pool` with only its joined nodes (each node's zone kept beside it)."""
    if not any(name in booting for name in pool.node_names):
        return pool
    kept = [i for i, name in enumerate(pool.node_names) if name not in booting]
    zones = [pool.zones[i] for i in kept] if pool.zones else []
    return dataclasses.replace(pool, node_names=[pool.node_names[i] for i in kept], zones=zones)
