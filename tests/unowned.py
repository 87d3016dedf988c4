"""Pools made behind the tool's back, as a user's `az aks nodepool add`, `gcloud container
node-pools create`, eksctl or the ACK console makes them: through each cloud's SDK, over the wire,
without the ownership marker (and with a cloud tag of the user's own, which adoption must keep).

And each pool's cloud identity, to tell an adopted pool from one deleted and made anew."""

from __future__ import annotations

from typing import Any

from provisioner.clusters import ClusterRef
from provisioner.drivers.registry import connect
from provisioner.pools import OWNER_LABEL_KEY, PoolState
from provisioner.sandbox.server import Sandbox

USER_TAG = ("cost-center", "ml-research")  # a tag of the user's own on the pool: adoption keeps it


def create_unowned(sandbox: Sandbox, ref: ClusterRef, state: PoolState) -> PoolState:
    """Create `state` on its cloud without the ownership marker; the pool as the driver lists it."""
    driver: Any = connect(ref.cloud, sandbox.directory)
    globals()[f"_create_{ref.cloud}"](driver, ref, state)
    listed = {p.name: p for p in driver.list_pools(ref)}[state.name]
    assert not listed.owned, listed
    return listed


def _create_aks(driver: Any, ref: ClusterRef, state: PoolState) -> None:
    from provisioner.drivers import aks

    properties = aks._properties(state)
    properties["tags"] = dict([USER_TAG])
    driver._put(ref, state.name, properties, f"creating {state.name} by hand")


def _create_gke(driver: Any, ref: ClusterRef, state: PoolState) -> None:
    from provisioner.drivers import gke

    node_pool = driver._node_pool(state, state.zones or driver._cluster_zones(ref))
    node_pool.config.resource_labels = dict([USER_TAG])
    operation = driver._call(driver._client.create_node_pool, parent=gke._path(ref), node_pool=node_pool)
    driver._wait(ref, operation, f"creating {state.name} by hand")


def _create_eks(driver: Any, ref: ClusterRef, state: PoolState) -> None:
    from provisioner.drivers import eks

    scaling = state.scaling
    driver._client(ref).create_nodegroup(
        clusterName=ref.name,
        nodegroupName=state.name,
        nodeRole=ref.extras["node_role"],
        subnets=list(ref.extras["subnets"]),
        instanceTypes=[state.instance_type],
        amiType=eks.GPU_AMI_TYPE,
        capacityType="SPOT" if state.spot else "ON_DEMAND",
        scalingConfig={"minSize": scaling.min, "maxSize": max(scaling.max, 1), "desiredSize": scaling.min},
        labels=state.label_map,
        taints=[eks._taint(t) for t in state.taints],
        tags=dict([USER_TAG]),
        **({"diskSize": state.disk_size_gb} if state.disk_size_gb is not None else {}),
    )
    driver._wait_active(ref, state.name, f"creating {state.name} by hand")


def _create_ack(driver: Any, ref: ClusterRef, state: PoolState) -> None:
    from alibabacloud_cs20151215 import models as cs

    from provisioner.drivers import ack

    request = ack._create_request(ref, state)
    config = request.kubernetes_config
    config.labels = [label for label in config.labels if label.key != OWNER_LABEL_KEY]
    if request.scaling_group is not None:
        key, value = USER_TAG
        request.scaling_group.tags = [cs.CreateClusterNodePoolRequestScalingGroupTags(key=key, value=value)]
    body = driver._call(ref, "create_cluster_node_pool_with_options", ref.name, request)
    driver._wait_task(ref, body.get("task_id"), "nodepool_create", f"creating {state.name} by hand")
    driver._wait_settled(ref, body["nodepool_id"], f"creating {state.name} by hand")


def identity(sandbox: Sandbox, ref: ClusterRef, name: str) -> dict[str, Any]:
    """What tells this pool from another of its name: its cloud ID and creation time where the
    cloud gives them (EKS ARN with its UUID and createdAt, ACK nodepool_id and created); AKS and GKE
    pools carry no creation time, so the emulator's count of the pool's creations stands in."""
    driver: Any = connect(ref.cloud, sandbox.directory)
    if ref.cloud == "eks":
        group = driver._describe(ref, name)
        return {"id": group["nodegroupArn"], "created": group["createdAt"], "tags": group["tags"]}
    if ref.cloud == "ack":
        raw = driver._find(ref, name)
        tags = {t["key"]: t["value"] for t in (raw.get("scaling_group") or {}).get("tags") or []}
        info = raw["nodepool_info"]
        return {"id": info["nodepool_id"], "created": info["created"], "tags": tags}
    emulator: Any = sandbox.emulators[ref.cloud]
    backend = emulator.backend(ref.account, ref.location)
    creations = sandbox.engines[ref.cloud].history(backend.cluster_key(ref.name), name).count("create")
    if ref.cloud == "aks":
        pool = driver._pools(ref).get(ref.location, ref.name, name, **driver._options)
        return {"id": pool.id, "created": creations, "tags": dict(pool.properties.tags or {})}
    from provisioner.drivers import gke

    pool = driver._call(driver._client.get_node_pool, name=f"{gke._path(ref)}/nodePools/{name}")
    return {"id": pool.self_link, "created": creations, "tags": dict(pool.config.resource_labels)}
