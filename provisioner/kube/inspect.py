"""`inspect`: allocated / total GPU resources per node, pool and cluster, as `kubectl inspect
cgpu` shows ACK's, for every kind of GPU resource a node advertises.

Allocation is what the scheduler counts: the requests (limits where a container gives no
request) of the pods bound to the node and not finished, an init container's counted as
Kubernetes does (the larger of the init containers' largest and the app containers' sum).

Devices of NVIDIA's DRA driver are counted from the cluster's ResourceSlices (the total, per
DeviceClass: gpu.nvidia.com for whole GPUs, mig.nvidia.com for MIG devices) and its allocated
ResourceClaims (a device is allocated where a claim's allocation names it); the pods holding them
are those the claims are reserved for.

A node's pool is the fleet pool its provisioner.io/pool label names, so both generations of a
pool being replaced are one pool here; a node without the label (a pool made before the tool set
it) is named by its cloud's pool label.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from provisioner import hardware
from provisioner.catalog.listing import Allocation
from provisioner.kube.contexts import Kube, at_once
from provisioner.kube.dra import Device, DeviceKey, device_class, published, reservations
from provisioner.pools import POOL_NODE_LABEL

# The extended resources GPU device plugins advertise: NVIDIA's (nvidia.com/gpu, the renamed
# nvidia.com/gpu.shared, mixed-strategy nvidia.com/mig-<profile>) and ACK's cGPU
# (aliyun.com/gpu-mem in GiB, aliyun.com/gpu-count; ACK docs doc-detail/191140).
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-", "aliyun.com/gpu")
FINISHED_PHASES = ("Succeeded", "Failed")
NO_POOL = "-"
UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"  # the pods' field selector


# Quantity suffixes (apimachinery resource.Quantity), longest first so "Mi" wins over "M".
_SUFFIXES = {"m": Decimal("0.001"), "k": Decimal(1000), "M": Decimal(10**6), "G": Decimal(10**9)}
_SUFFIXES |= {"Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40)}
_BY_LENGTH = sorted(_SUFFIXES, key=len, reverse=True)


def quantity(text: Any) -> int | float:
    """A Kubernetes quantity as a number ("10" -> 10; "1k" -> 1000; "500m" -> 0.5)."""
    return _quantity(str(text).strip())


@functools.lru_cache(maxsize=1024)
def _quantity(text: str) -> int | float:
    """quantity of one text, worked out once: every pod and node of every cluster repeats a few."""
    unit = next((s for s in _BY_LENGTH if text.endswith(s)), "")
    try:
        value = Decimal(text[: len(text) - len(unit)]) * _SUFFIXES.get(unit, Decimal(1))
    except InvalidOperation:
        return 0
    return int(value) if value == value.to_integral_value() else float(value)


def gpu_resources(resources: Mapping[str, Any]) -> dict[str, int | float]:
    """The GPU resources among `resources` with a quantity above 0, by name."""
    found = {r: quantity(q) for r, q in sorted(resources.items()) if r.startswith(GPU_RESOURCE_PREFIXES)}
    return {r: n for r, n in found.items() if n}


@dataclass(frozen=True)
class NodeUse:
    cluster: str
    pool: str
    node: str
    resource: str
    allocated: int | float
    total: int | float
    pods: tuple[tuple[str, int | float], ...] = field(default=())  # (namespace/name, amount)
    # DRA devices: per allocated device, how many pods its claims are reserved for (sync counts a
    # shared device's slices by them)
    device_holders: tuple[int, ...] = field(default=())

    def json(self, detailed: bool = False) -> dict[str, Any]:
        row = {k: getattr(self, k) for k in ("cluster", "pool", "node", "resource", "allocated", "total")}
        if detailed:
            row["pods"] = [{"pod": pod, "amount": amount} for pod, amount in self.pods]
        return row


def pod_request(pod: Mapping[str, Any], resource: str) -> int | float:
    """What the scheduler counts of `resource` for `pod`."""
    spec = pod.get("spec") or {}

    def of(container: Mapping[str, Any]) -> int | float:
        resources = container.get("resources") or {}
        amount = (resources.get("requests") or {}).get(resource)
        if amount is None:
            amount = (resources.get("limits") or {}).get(resource, "0")
        return quantity(amount)

    apps = sum(of(c) for c in spec.get("containers") or [])
    inits = max((of(c) for c in spec.get("initContainers") or []), default=0)
    return max(apps, inits)


def node_pool(node: Mapping[str, Any], label_keys: Sequence[str], names: Mapping[str, str]) -> str:
    """The fleet pool a node belongs to: its provisioner.io/pool label, the same on every generation
    of the pool; on a node without it (a pool made before the tool set it), the first cloud pool
    label it carries, `names` mapping a cloud pool's ID or name to its fleet pool's (ACK labels
    nodes with the ID)."""
    labels = node.get("metadata", {}).get("labels") or {}
    if POOL_NODE_LABEL in labels:
        return labels[POOL_NODE_LABEL]
    for key in label_keys:
        if key in labels:
            return names.get(labels[key], labels[key])
    return NO_POOL


def all_pool_label_keys() -> list[str]:
    return [c.pool_label.key for c in hardware.load().clouds.values() if c.pool_label is not None]


@dataclass(frozen=True)
class InspectReads:
    """What inspect reads of one cluster (verify reads its own set: verify.ClusterReads)."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    slices: list[dict[str, Any]] | None = None  # None: not read, or no resource.k8s.io/v1 there
    claims: list[dict[str, Any]] | None = None


def inspect_cluster(
    kube: Kube, label_keys: Sequence[str], pool_names: Mapping[str, str] | None = None, dra: bool = True
) -> list[NodeUse]:
    """Per node and GPU resource (with `dra`, DRA DeviceClass too), allocated / total;
    KubeUnreachable where the API cannot be used."""
    reads = read_cluster(kube, dra)
    return node_uses(
        kube.name, reads.nodes, reads.pods, label_keys, pool_names, slices=reads.slices, claims=reads.claims
    )


def read_cluster(kube: Kube, dra: bool = True) -> InspectReads:
    """The cluster's nodes, its pods not finished and, with `dra`, its ResourceSlices and
    ResourceClaims, read at once."""
    # The field selector spares the transfer; node_uses keeps the rule whatever the server.
    if not dra:
        nodes, pods = at_once(kube.nodes, lambda: kube.pods(UNFINISHED))
        return InspectReads(nodes, pods)
    nodes, pods, slices, claims = at_once(
        kube.nodes, lambda: kube.pods(UNFINISHED), kube.resource_slices, kube.resource_claims
    )
    return InspectReads(nodes, pods, slices, claims)


def node_uses(
    cluster: str,
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    label_keys: Sequence[str],
    pool_names: Mapping[str, str] | None = None,
    *,
    slices: Sequence[Mapping[str, Any]] | None = None,
    claims: Sequence[Mapping[str, Any]] | None = None,
) -> list[NodeUse]:
    """Per node and GPU resource, allocated / total, from the cluster's nodes and pods, and per
    DeviceClass of the DRA driver's devices, from its slices and claims."""
    devices = published(slices or [], hardware.load().dra_driver.driver)
    held = reservations(claims or [])
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in FINISHED_PHASES:
            by_node.setdefault(node, []).append(pod)
    uses = []
    for node in sorted(nodes, key=lambda n: n.get("metadata", {}).get("name", "")):
        name = node["metadata"]["name"]
        pool = node_pool(node, label_keys, pool_names or {})
        for resource, total in gpu_resources(node.get("status", {}).get("allocatable") or {}).items():
            holding = []
            for pod in by_node.get(name, []):
                amount = pod_request(pod, resource)
                if amount:
                    meta = pod.get("metadata", {})
                    holding.append((f"{meta.get('namespace', '')}/{meta.get('name', '')}", amount))
            allocated = sum(a for _, a in holding)
            uses.append(NodeUse(cluster, pool, name, resource, allocated, total, tuple(sorted(holding))))
        uses += _device_uses(cluster, pool, name, devices.get(name, []), held)
    return uses


def _device_uses(
    cluster: str, pool: str, node: str, devices: Sequence[Device], held: Mapping[DeviceKey, tuple[str, ...]]
) -> list[NodeUse]:
    """One node's DRA devices per DeviceClass: allocated / total, and the pods holding them."""
    by_class: dict[str, list[Device]] = {}
    for device in devices:
        name = device_class(device)
        if name is not None:
            by_class.setdefault(name, []).append(device)
    uses = []
    for name, of_class in sorted(by_class.items()):
        allocated = [held[d.key] for d in of_class if d.key in held]
        pods: dict[str, int] = {}
        for holders in allocated:
            for pod in holders:
                pods[pod] = pods.get(pod, 0) + 1
        uses.append(
            NodeUse(
                cluster,
                pool,
                node,
                name,
                len(allocated),
                len(of_class),
                tuple(sorted(pods.items())),
                tuple(len(holders) for holders in allocated),
            )
        )
    return uses


def totals(uses: Sequence[NodeUse], by: Sequence[str]) -> list[dict[str, Any]]:
    """Allocated and total summed over the nodes sharing the fields `by` (and the resource)."""
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for use in uses:
        key = (*(getattr(use, f) for f in by), use.resource)
        row = rows.setdefault(
            key,
            {
                **{f: getattr(use, f) for f in by},
                "resource": use.resource,
                "allocated": 0,
                "total": 0,
                "nodes": 0,
            },
        )
        row["allocated"] += use.allocated
        row["total"] += use.total
        row["nodes"] += 1
    return list(rows.values())


def pool_allocation(
    uses: Sequence[NodeUse], resources: Mapping[str, str], dra_replicas: Mapping[str, int] | None = None
) -> dict[str, Allocation]:
    """Per pool named in `resources` (pool -> the resource its slices are: nvidia.com/gpu.shared,
    aliyun.com/gpu-mem, a DRA pool's DeviceClass...): its nodes that advertise GPUs, and the slices
    they advertise and pods hold, in that resource (what `sync` stores, and `place --live` reads).
    `dra_replicas`: the shared DRA pools' pods per device, whose slices are each device's shares."""
    found = {}
    for name, resource in resources.items():
        counted = [u for u in uses if u.pool == name and u.resource == resource]
        advertised, allocated = sum(u.total for u in counted), sum(u.allocated for u in counted)
        replicas = (dra_replicas or {}).get(name)
        if replicas:
            advertised *= replicas
            # an allocated device is taken (its claim holds it) even before a pod reserves it
            allocated = sum(min(max(n, 1), replicas) for u in counted for n in u.device_holders)
        found[name] = Allocation(
            nodes=len({u.node for u in uses if u.pool == name}),
            advertised=int(advertised),
            allocated=int(allocated),
        )
    return found
