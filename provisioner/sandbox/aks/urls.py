"""The AKS emulator's routes: the ARM paths of managedClusters (list, get), of the agentPools API
and of its async operations (azure-rest-api-specs Microsoft.ContainerService, managedClusters,
agentPools and operationStatus paths)."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

_PROVIDER = "/subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.ContainerService"
_POOL = f"{_PROVIDER}/managedClusters/<cluster>/agentPools/<pool>"
_OPERATIONS = "/subscriptions/<subscription>/providers/Microsoft.ContainerService/locations/<location>"
ROUTES = Map(
    [
        Rule(
            "/subscriptions/<subscription>/providers/Microsoft.ContainerService/managedClusters",
            endpoint="list_clusters",
        ),
        Rule(f"{_PROVIDER}/managedClusters/<cluster>", methods=["GET"], endpoint="get_cluster"),
        Rule(f"{_PROVIDER}/managedClusters/<cluster>/agentPools", endpoint="list_pools"),
        Rule(_POOL, methods=["GET"], endpoint="get_pool"),
        Rule(_POOL, methods=["PUT"], endpoint="put_pool"),
        Rule(_POOL, methods=["DELETE"], endpoint="delete_pool"),
        Rule(f"{_OPERATIONS}/operations/<operation>", endpoint="operation_status"),
        Rule(f"{_OPERATIONS}/operationresults/<operation>", endpoint="operation_result"),
    ],
    strict_slashes=False,
)
