"""The AKS emulator's state and rules: agent pools per managed cluster and their operations.

Pools are kept as ARM's `properties` objects (camelCase, as the API writes them). The rules are
this module's own tables, each with its source, and import nothing of the tool's hardware data:
the emulator is an oracle independent of the tool, so a wrong fact in the tool's data fails a
test instead of passing both the compiler and the emulator.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from provisioner.sandbox.aks.exceptions import (
    InvalidParameter,
    NotFound,
    OperationInProgress,
    OperationNotAllowed,
    PropertyChangeNotAllowed,
    ResourceNotFound,
)
from provisioner.sandbox.engine import (
    BackendDict,
    ClusterBusy,
    ClusterState,
    Engine,
    Operation,
    UnknownCluster,
)
from provisioner.sandbox.versions import VersionFormat

# Agent pool names: agentPools REST reference, the agentPoolName path parameter
# (azure-rest-api-specs, Microsoft.ContainerService managedClusters.json: pattern
# ^[a-z][a-z0-9]{0,11}$); AKS docs "Create node pools": Linux pool names 1-12 characters,
# lowercase alphanumerics, starting with a letter.
POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
POOL_NAME_RULE = "lowercase letters and digits, starting with a letter, 1-12 characters"
# AgentPool properties.gpuInstanceProfile, the GPUInstanceProfile enum of the agentPools spec.
GPU_INSTANCE_PROFILES = ("MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g")
# The GPU VM sizes this emulator knows, and whether AKS can partition their GPUs (MIG). GPUs per
# size: the Azure VM size pages (MicrosoftDocs/azure-compute-docs: NC A100 v4, ND A100 v4,
# NC H100 v5, ND H100 v5, ND H200 v5, NCasT4_v3). MIG: AKS "Create a multi-instance GPU node pool"
# (learn.microsoft.com/azure/aks/gpu-multi-instance) on A100 and H100-class sizes; the NVIDIA MIG
# user guide lists A100, H100 (NVL too) and H200 as MIG-capable and T4 as not.
GPU_VM_SIZES_MIG = {
    "Standard_NC24ads_A100_v4": True,
    "Standard_NC48ads_A100_v4": True,
    "Standard_NC96ads_A100_v4": True,
    "Standard_ND96asr_v4": True,
    "Standard_ND96amsr_A100_v4": True,
    "Standard_NC40ads_H100_v5": True,
    "Standard_NC80adis_H100_v5": True,
    "Standard_ND96isr_H100_v5": True,
    "Standard_ND96isr_H200_v5": True,
    "Standard_NC4as_T4_v3": False,
    "Standard_NC8as_T4_v3": False,
    "Standard_NC16as_T4_v3": False,
    "Standard_NC64as_T4_v3": False,
}
# General-purpose sizes (Dsv5, Esv5 ...), for system pools: Azure VM size naming conventions.
SYSTEM_VM_SIZE = re.compile(r"^Standard_[DE]\d+[a-z]*s?_v\d$")
# nodeTaints entries: key[=value]:Effect, the effects Kubernetes knows (AKS "Use node taints").
TAINT = re.compile(r"^(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(?P<effect>NoSchedule|PreferNoSchedule|NoExecute)$")
# Set at creation only: a change needs a new pool (FACTS.md, AKS; agentPools spec descriptions).
# availabilityZones too (learn.microsoft.com azure/aks/availability-zones: "You can't change the
# availability zones of an existing node pool").
IMMUTABLE = ("vmSize", "gpuInstanceProfile", "osDiskSizeGB", "scaleSetPriority", "availabilityZones")
# Availability zones are numbered 1 to 3 in a region that has them (AKS availability-zones).
ZONES = ("1", "2", "3")
DEFAULT_OS_DISK_GB = 128
# What AKS writes into a Spot pool's own nodeLabels / nodeTaints, as `az aks nodepool show` lists
# them (learn.microsoft.com/azure/aks/spot-node-pool).
SPOT_LABELS = {"kubernetes.azure.com/scalesetpriority": "spot"}
SPOT_TAINT = "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"
# agentPools spec (azure-rest-api-specs, ContainerServiceOSDisk): osDiskSizeGB minimum 0, maximum 2048.
OS_DISK_GB = (0, 2048)
# ManagedClusterProperties.currentKubernetesVersion (azure-mgmt-containerservice models, from the
# managedClusters spec): "the full <major.minor.patch> version being used"; a cluster asked for
# 1.X runs a patch of it, here its .0.
KUBERNETES_VERSIONS = VersionFormat("{major}.{minor}.{patch}", default_patch=0)


def subscription_prefix(subscription: str) -> str:
    """ARM resource paths are case-insensitive: the emulator keys them in lower case."""
    return f"/subscriptions/{subscription.lower()}/"


def find_operation(engine: Engine, subscription: str, operation_id: str) -> Operation:
    """An operation of `subscription`'s clusters (ARM serves them under the subscription)."""
    operation = engine.operation(operation_id)
    if operation is None or not operation.cluster.startswith(subscription_prefix(subscription)):
        raise NotFound(f"Operation {operation_id} not found.")
    return operation


def backend_for(backends: BackendDict[AksBackend], subscription: str, resource_group: str) -> AksBackend:
    """The backend of a subscription's resource group: ARM names are case-insensitive, so backends
    are keyed in lower case."""
    return backends[subscription.lower()][resource_group.lower()]


class AksBackend:
    """The managed clusters of one resource group of one subscription: ARM's resource path puts
    the subscription and the resource group above a cluster, as moto keys by account and region."""

    def __init__(self, engine: Engine, subscription: str, resource_group: str):
        self.engine = engine
        self.prefix = (
            f"{subscription_prefix(subscription)}resourceGroups/{resource_group.lower()}"
            "/providers/Microsoft.ContainerService/managedClusters/"
        )
        self.kubernetes_versions: dict[str, str] = {}  # cluster -> its currentKubernetesVersion

    def cluster_key(self, cluster: str) -> str:
        """The cluster's ARM resource ID, as pools' ids begin."""
        return f"{self.prefix}{cluster}"

    def add_cluster(self, cluster: str, kubernetes_version: str = KUBERNETES_VERSIONS.default) -> str:
        key = self.cluster_key(cluster)
        self.engine.add_cluster(key)
        self.kubernetes_versions[cluster] = kubernetes_version
        return key

    def cluster(self, cluster: str) -> ClusterState:
        """The cluster's state as the engine holds it (tests set what the cloud would change)."""
        return self.engine.cluster(self.cluster_key(cluster))

    def seed_system_pool(self, cluster: str) -> None:
        """The System-mode pool every AKS cluster has, which the tool did not create."""
        self._pools(cluster)["system"] = {
            "vmSize": "Standard_D4s_v5",
            "count": 3,
            "mode": "System",
            "osDiskSizeGB": DEFAULT_OS_DISK_GB,
            "provisioningState": "Succeeded",
        }

    def clusters(self) -> list[str]:
        """The resource IDs of this resource group's clusters."""
        return [key for key in self.engine.clusters() if key.startswith(self.prefix)]

    # Reads

    def get_cluster(self, cluster: str) -> dict[str, Any]:
        """The managed cluster's `properties` as its GET gives them (ManagedClusterProperties):
        the version asked for and the one it runs are the same here, as after a create."""
        with self.engine.lock:
            self._pools(cluster)  # ResourceNotFound for an unknown cluster
            version = self.kubernetes_versions.get(cluster, KUBERNETES_VERSIONS.default)
            return {
                "provisioningState": "Succeeded",
                "powerState": {"code": "Running"},
                "kubernetesVersion": version,
                "currentKubernetesVersion": version,
            }

    def list_pools(self, cluster: str) -> dict[str, dict[str, Any]]:
        with self.engine.lock:
            return copy.deepcopy(self._pools(cluster))

    def get_pool(self, cluster: str, name: str) -> dict[str, Any]:
        with self.engine.lock:
            return copy.deepcopy(self._pool(cluster, name))

    # Operations

    def put_pool(self, cluster: str, name: str, properties: dict[str, Any]) -> tuple[Operation, bool]:
        """Create or update; returns the operation and whether the pool is new."""
        with self.engine.lock:
            pools = self._pools(cluster)
            current = pools.get(name)
            properties = self._normalised(properties)
            if current is None:
                self._check_new(name, properties)
            else:
                self._check_update(current, properties)
            self._check_common(properties)
            kind = "create" if current is None else "update"
            state = "Creating" if current is None else "Updating"
            operation = self._begin(
                cluster,
                kind,
                name,
                start=lambda: pools.__setitem__(name, {**properties, "provisioningState": state}),
                finish=lambda: pools.__setitem__(name, {**pools[name], "provisioningState": "Succeeded"}),
            )
            return operation, current is None

    def delete_pool(self, cluster: str, name: str) -> Operation | None:
        """Start deleting; None where the pool does not exist (ARM answers 204)."""
        with self.engine.lock:
            pools = self._pools(cluster)
            if name not in pools:
                return None
            if (
                pools[name].get("mode") == "System"
                and sum(p.get("mode") == "System" for p in pools.values()) == 1
            ):
                raise OperationNotAllowed("A cluster must keep at least one System agent pool.")
            deleting = {**pools[name], "provisioningState": "Deleting"}
            return self._begin(
                cluster,
                "delete",
                name,
                start=lambda: pools.__setitem__(name, deleting),
                finish=lambda: pools.pop(name, None),
            )

    def autoscale_pool(self, cluster: str, name: str, count: int) -> None:
        """The cluster autoscaler resized the pool's scale set: `count` nodes, no agentPool
        operation (it scales the VMSS itself; the pool's count then reports it)."""
        with self.engine.lock:
            pool = self._pool(cluster, name)
            self._pools(cluster)[name] = {**pool, "count": count}

    # Rules

    def _normalised(self, properties: dict[str, Any]) -> dict[str, Any]:
        """The defaults ARM fills in, as a GET shows them."""
        filled = {
            "mode": "User",
            "osDiskSizeGB": DEFAULT_OS_DISK_GB,
            "enableAutoScaling": False,
            **properties,
        }
        if filled.get("scaleSetPriority") == "Spot":
            filled.setdefault("scaleSetEvictionPolicy", "Delete")
            filled["nodeLabels"] = {**(filled.get("nodeLabels") or {}), **SPOT_LABELS}
            taints = filled.get("nodeTaints") or []
            filled["nodeTaints"] = taints if SPOT_TAINT in taints else [*taints, SPOT_TAINT]
        return {k: v for k, v in filled.items() if v is not None and k != "provisioningState"}

    def _check_new(self, name: str, properties: dict[str, Any]) -> None:
        if not POOL_NAME.match(name):
            raise InvalidParameter(f"Agent pool name {name!r} is invalid: {POOL_NAME_RULE}.")
        size = properties.get("vmSize", "")
        if size not in GPU_VM_SIZES_MIG and not SYSTEM_VM_SIZE.match(size):
            raise InvalidParameter(f"The VM size {size!r} is not available.")
        profile = properties.get("gpuInstanceProfile")
        if profile is None:
            return
        if profile not in GPU_INSTANCE_PROFILES:
            allowed = ", ".join(GPU_INSTANCE_PROFILES)
            raise InvalidParameter(f"gpuInstanceProfile {profile!r} is invalid; allowed: {allowed}.")
        if not GPU_VM_SIZES_MIG.get(size, False):
            raise InvalidParameter(f"The VM size {size} does not support GPU instance profile {profile}.")

    def _check_update(self, current: dict[str, Any], properties: dict[str, Any]) -> None:
        for field in IMMUTABLE:
            if properties.get(field) != current.get(field):
                raise PropertyChangeNotAllowed(f"Changing property '{field}' is not allowed.")

    @staticmethod
    def _check_common(properties: dict[str, Any]) -> None:
        disk, (low, high) = properties.get("osDiskSizeGB"), OS_DISK_GB
        if not isinstance(disk, int) or not low <= disk <= high:
            raise InvalidParameter(
                f"The value of parameter osDiskSizeGB is invalid: {disk!r} is not in [{low}, {high}]."
            )
        for taint in properties.get("nodeTaints") or []:
            if not TAINT.match(taint):
                raise InvalidParameter(
                    f"Taint {taint!r} is invalid: want key=value:NoSchedule|PreferNoSchedule|NoExecute."
                )
        zones = properties.get("availabilityZones") or []
        if any(zone not in ZONES for zone in zones) or len(set(zones)) != len(zones):
            raise InvalidParameter(f"availabilityZones {zones!r} is invalid: zones are {', '.join(ZONES)}.")
        if properties.get("enableAutoScaling"):
            low, high = properties.get("minCount"), properties.get("maxCount")
            if low is None or high is None or not 0 <= low <= high:
                raise InvalidParameter("Autoscaling needs 0 <= minCount <= maxCount.")
        elif properties.get("count", 0) < 0:
            raise InvalidParameter("count must be >= 0.")

    # State

    def _pools(self, cluster: str) -> dict[str, dict[str, Any]]:
        try:
            return self.engine.cluster(self.cluster_key(cluster)).pools
        except UnknownCluster:
            raise ResourceNotFound(f"The Resource '{cluster}' was not found.") from None

    def _pool(self, cluster: str, name: str) -> dict[str, Any]:
        try:
            return self._pools(cluster)[name]
        except KeyError:
            raise NotFound(f"Agent pool {name!r} not found.") from None

    def _begin(self, cluster: str, kind: Any, pool: str, start: Any, finish: Any) -> Operation:
        try:
            return self.engine.begin(self.cluster_key(cluster), kind, pool, finish=finish, start=start)
        except ClusterBusy as busy:
            running = busy.running
            raise OperationInProgress(
                f"Operation is not allowed because there's an in progress {running.kind} node pool "
                f"operation ({running.id}) on agent pool {running.pool}. Please wait for it to finish."
            ) from None
