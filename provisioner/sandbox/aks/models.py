"""The AKS emulator's state and rules: agent pools per managed cluster and their operations.

Pools are kept as ARM's `properties` objects (camelCase, as the API writes them); what the API
rejects is rejected with ARM's error codes (FACTS.md, hardware/clouds.yaml).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from provisioner import hardware
from provisioner.sandbox.engine import ClusterBusy, Engine, Operation, UnknownCluster
from provisioner.sandbox.wire import ApiError

TAINT = re.compile(r"^(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(?P<effect>NoSchedule|PreferNoSchedule|NoExecute)$")
# Set at creation only: a change needs a new pool.
IMMUTABLE = ("vmSize", "gpuInstanceProfile", "osDiskSizeGB", "scaleSetPriority")
DEFAULT_OS_DISK_GB = 128
# What AKS writes into a Spot pool's own nodeLabels / nodeTaints, as `az aks nodepool show` lists
# them (learn.microsoft.com/azure/aks/spot-node-pool).
SPOT_LABELS = {"kubernetes.azure.com/scalesetpriority": "spot"}
SPOT_TAINT = "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"
# agentPools spec (azure-rest-api-specs, ContainerServiceOSDisk): osDiskSizeGB minimum 0, maximum 2048.
OS_DISK_GB = (0, 2048)
SYSTEM_VM_SIZE = re.compile(r"^Standard_[DE]\d+[a-z]*s?_v\d$")  # general-purpose sizes for system pools


def cluster_key(subscription: str, resource_group: str, cluster: str) -> str:
    return (
        f"/subscriptions/{subscription.lower()}/resourceGroups/{resource_group.lower()}"
        f"/providers/Microsoft.ContainerService/managedClusters/{cluster}"
    )


class AksBackend:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._rules = hardware.load().clouds["aks"]

    def add_cluster(self, subscription: str, resource_group: str, cluster: str) -> str:
        key = cluster_key(subscription, resource_group, cluster)
        self.engine.add_cluster(key)
        return key

    def seed_system_pool(self, key: str) -> None:
        """The System-mode pool every AKS cluster has, which the tool did not create."""
        self._pools(key)["system"] = {
            "vmSize": "Standard_D4s_v5",
            "count": 3,
            "mode": "System",
            "osDiskSizeGB": DEFAULT_OS_DISK_GB,
            "provisioningState": "Succeeded",
        }

    def clusters(self, subscription: str) -> list[str]:
        prefix = f"/subscriptions/{subscription.lower()}/"
        return [key for key in self.engine.clusters() if key.startswith(prefix)]

    # Reads

    def list_pools(self, key: str) -> dict[str, dict[str, Any]]:
        with self.engine.lock:
            return copy.deepcopy(self._pools(key))

    def get_pool(self, key: str, name: str) -> dict[str, Any]:
        with self.engine.lock:
            return copy.deepcopy(self._pool(key, name))

    def operation(self, operation_id: str) -> Operation:
        operation = self.engine.operation(operation_id)
        if operation is None:
            raise ApiError(404, "NotFound", f"Operation {operation_id} not found.")
        return operation

    # Operations

    def put_pool(self, key: str, name: str, properties: dict[str, Any]) -> tuple[Operation, bool]:
        """Create or update; returns the operation and whether the pool is new."""
        with self.engine.lock:
            pools = self._pools(key)
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
                key,
                kind,
                name,
                start=lambda: pools.__setitem__(name, {**properties, "provisioningState": state}),
                finish=lambda: pools.__setitem__(name, {**pools[name], "provisioningState": "Succeeded"}),
            )
            return operation, current is None

    def delete_pool(self, key: str, name: str) -> Operation | None:
        """Start deleting; None where the pool does not exist (ARM answers 204)."""
        with self.engine.lock:
            pools = self._pools(key)
            if name not in pools:
                return None
            if (
                pools[name].get("mode") == "System"
                and sum(p.get("mode") == "System" for p in pools.values()) == 1
            ):
                raise ApiError(
                    400, "OperationNotAllowed", "A cluster must keep at least one System agent pool."
                )
            deleting = {**pools[name], "provisioningState": "Deleting"}
            return self._begin(
                key,
                "delete",
                name,
                start=lambda: pools.__setitem__(name, deleting),
                finish=lambda: pools.pop(name, None),
            )

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
        if not self._rules.pool_name_pattern.match(name):
            raise ApiError(
                400, "InvalidParameter", f"Agent pool name {name!r} is invalid: {self._rules.pool_name_rule}."
            )
        size = properties.get("vmSize", "")
        machine = hardware.load().instance_type("aks", size)
        if machine is None and not SYSTEM_VM_SIZE.match(size):
            raise ApiError(400, "InvalidParameter", f"The VM size {size!r} is not available.")
        profile = properties.get("gpuInstanceProfile")
        if profile is None:
            return
        if profile not in self._rules.mig_values:
            allowed = ", ".join(self._rules.mig_values)
            raise ApiError(
                400, "InvalidParameter", f"gpuInstanceProfile {profile!r} is invalid; allowed: {allowed}."
            )
        if machine is None or not machine.gpu.mig_capable:
            raise ApiError(
                400,
                "InvalidParameter",
                f"The VM size {size} does not support GPU instance profile {profile}.",
            )

    def _check_update(self, current: dict[str, Any], properties: dict[str, Any]) -> None:
        for field in IMMUTABLE:
            if properties.get(field) != current.get(field):
                raise ApiError(
                    400, "PropertyChangeNotAllowed", f"Changing property '{field}' is not allowed."
                )

    @staticmethod
    def _check_common(properties: dict[str, Any]) -> None:
        disk, (low, high) = properties.get("osDiskSizeGB"), OS_DISK_GB
        if not isinstance(disk, int) or not low <= disk <= high:
            raise ApiError(
                400,
                "InvalidParameter",
                f"The value of parameter osDiskSizeGB is invalid: {disk!r} is not in [{low}, {high}].",
            )
        for taint in properties.get("nodeTaints") or []:
            if not TAINT.match(taint):
                raise ApiError(
                    400,
                    "InvalidParameter",
                    f"Taint {taint!r} is invalid: want key=value:NoSchedule|PreferNoSchedule|NoExecute.",
                )
        if properties.get("enableAutoScaling"):
            low, high = properties.get("minCount"), properties.get("maxCount")
            if low is None or high is None or not 0 <= low <= high:
                raise ApiError(400, "InvalidParameter", "Autoscaling needs 0 <= minCount <= maxCount.")
        elif properties.get("count", 0) < 0:
            raise ApiError(400, "InvalidParameter", "count must be >= 0.")

    # State

    def _pools(self, key: str) -> dict[str, dict[str, Any]]:
        try:
            return self.engine.cluster(key).pools
        except UnknownCluster:
            raise ApiError(
                404, "ResourceNotFound", f"The Resource '{key.rsplit('/', 1)[-1]}' was not found."
            ) from None

    def _pool(self, key: str, name: str) -> dict[str, Any]:
        try:
            return self._pools(key)[name]
        except KeyError:
            raise ApiError(404, "NotFound", f"Agent pool {name!r} not found.") from None

    def _begin(self, key: str, kind: Any, pool: str, start: Any, finish: Any) -> Operation:
        try:
            return self.engine.begin(key, kind, pool, finish=finish, start=start)
        except ClusterBusy as busy:
            running = busy.running
            raise ApiError(
                409,
                "OperationNotAllowed",
                f"Operation is not allowed because there's an in progress {running.kind} node pool "
                f"operation ({running.id}) on agent pool {running.pool}. Please wait for it to finish.",
            ) from None
