"""The node groups a cluster autoscaler sees in each cloud, read from the cloud emulators' own
state: which GPU pools autoscale, their size and limits, what to call them in events, how to
resize them, and the template node that cloud's provider builds (templates.py).

- AKS: an agent pool with enableAutoScaling, its scale set aks-<pool>-<hash>-vmss; the scale set
  carries the pool's tags and aks-managed-poolName (AKS "Use Azure tags": a node pool's tags apply
  to the resources of that pool).
- EKS: a managed node group's Auto Scaling group, found by the auto-discovery tags EKS puts on it;
  its size is the group's desired capacity, which EKS reports as scalingConfig.desiredSize.
- GKE: a node pool with autoscaling, one instance group per zone, all resized together here
  (the emulator keeps one node count per zone); per-zone or total limits.
- ACK: a node pool with auto_scaling enabled, its scaling group asg-<id>.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provisioner.sandbox.kube import clouds, templates
from provisioner.sandbox.kube.clouds import Pool
from provisioner.sandbox.kube.templates import Template


@dataclass
class NodeGroup:
    ids: list[str]  # how the autoscaler names it: one per zone's instance group on GKE
    pool: str  # the pool whose nodes it runs (clouds.Pool.name)
    size: int  # nodes it is asked for now
    min_size: int
    max_size: int
    template: Template
    resize: Callable[[int], None]  # to that many nodes
    step: int = 1  # nodes a resize adds at once (GKE: one per zone)


def aks_groups(source: Any, pools: dict[str, Pool]) -> list[NodeGroup]:
    found = []
    for name, pool in sorted(source.backend.list_pools(source.cluster).items()):
        gpu = clouds.AKS_VM_SIZES.get(pool.get("vmSize", ""))
        if not pool.get("enableAutoScaling") or gpu is None or name not in pools:
            continue
        tags = {**(pool.get("tags") or {}), "aks-managed-poolName": name}
        found.append(
            NodeGroup(
                [f"aks-{name}-{source.scale_set}-vmss"],
                name,
                pool.get("count", 0),
                pool.get("minCount", 0),
                pool.get("maxCount", 0),
                templates.azure(pool["vmSize"], gpu[1], tags),
                lambda n, name=name: source.backend.autoscale_pool(source.cluster, name, n),
            )
        )
    return found


def eks_groups(source: Any, pools: dict[str, Pool]) -> list[NodeGroup]:
    backend = source.emulator.backend(source.region)
    found = []
    for name, nodegroup in sorted(source.emulator.nodegroups(source.region, source.cluster).items()):
        instance_type = (nodegroup.get("instanceTypes") or [""])[0]
        gpu = clouds.EKS_INSTANCE_TYPES.get(instance_type)
        group = backend.group_of(source.cluster, name)
        discovered = group is not None and {
            "k8s.io/cluster-autoscaler/enabled",
            f"k8s.io/cluster-autoscaler/{source.cluster}",
        } <= set(group.tags)
        if gpu is None or not discovered or name not in pools:
            continue
        low, high, desired = backend.group_sizes(group)
        template = templates.aws(instance_type, gpu[1], dict(group.tags), {"name": name, **nodegroup})
        found.append(
            NodeGroup(
                [group.name],
                name,
                desired,
                low,
                high,
                template,
                lambda n, name=name: backend.autoscale_nodegroup(source.cluster, name, n),
            )
        )
    return found


def gke_groups(source: Any, pools: dict[str, Pool]) -> list[NodeGroup]:
    found = []
    for pool in sorted(source.backend.list_pools(source.cluster), key=lambda p: p.name):
        scaling, seen = pool.autoscaling, pools.get(pool.name)
        if not scaling.enabled or seen is None or seen.hardware is None or not pool.locations:
            continue
        zones = len(pool.locations)
        low, high = (
            (scaling.total_min_nodes, scaling.total_max_nodes)
            if scaling.total_limits
            else (scaling.min_nodes * zones, scaling.max_nodes * zones)
        )
        key = source.backend.cluster_key(source.cluster)
        ids = [
            f"gke-{source.cluster}-{pool.name}-"
            f"{hashlib.sha256(f'{key}/{pool.name}/{zone}'.encode()).hexdigest()[:8]}-grp"
            for zone in pool.locations
        ]
        found.append(
            NodeGroup(
                ids,
                pool.name,
                pool.node_count * zones,
                low,
                high,
                templates.gke(seen),
                lambda n, name=pool.name, z=zones: source.backend.autoscale_pool(
                    source.cluster, name, n // z
                ),
                step=zones,
            )
        )
    return found


def ack_groups(source: Any, pools: dict[str, Pool]) -> list[NodeGroup]:
    found = []
    for pool in sorted(source.backend.list_pools(source.cluster), key=lambda p: p.name):
        instance_type = pool.instance_types[0] if pool.instance_types else ""
        gpu = clouds.ACK_INSTANCE_TYPES.get(instance_type)
        seen = pools.get(pool.name)
        if not pool.auto_scaling.enable or gpu is None or seen is None or seen.hardware is None:
            continue
        found.append(
            NodeGroup(
                [f"asg-{pool.nodepool_id[-12:]}"],
                pool.name,
                pool.total_nodes,
                pool.auto_scaling.min_instances,
                pool.auto_scaling.max_instances,
                templates.alibaba(instance_type, seen.hardware, seen, dict(pool.tags)),
                lambda n, pool_id=pool.nodepool_id: source.backend.autoscale_pool(source.cluster, pool_id, n),
            )
        )
    return found


# cloud adapter class -> the node groups its autoscaler sees
GROUPS: dict[type, Callable[[Any, dict[str, Pool]], list[NodeGroup]]] = {
    clouds.AksPools: aks_groups,
    clouds.EksPools: eks_groups,
    clouds.GkePools: gke_groups,
    clouds.AckPools: ack_groups,
}
