"""The GKE emulator's routes: the container v1 REST paths for node pools and operations
(google/container/v1/cluster_service.proto, the http annotations of ClusterManager)."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

_LOCATION = "/v1/projects/<project>/locations/<location>"
_CLUSTER = f"{_LOCATION}/clusters/<cluster>"
ROUTES = Map(
    [
        Rule(f"{_LOCATION}/clusters", methods=["GET"], endpoint="list_clusters"),
        Rule(f"{_CLUSTER}", methods=["GET"], endpoint="get_cluster"),
        Rule(f"{_CLUSTER}/nodePools", methods=["GET"], endpoint="list_pools"),
        Rule(f"{_CLUSTER}/nodePools", methods=["POST"], endpoint="create_pool"),
        Rule(f"{_CLUSTER}/nodePools/<pool>:setAutoscaling", methods=["POST"], endpoint="set_autoscaling"),
        Rule(f"{_CLUSTER}/nodePools/<pool>:setSize", methods=["POST"], endpoint="set_size"),
        Rule(f"{_CLUSTER}/nodePools/<pool>", methods=["GET"], endpoint="get_pool"),
        Rule(f"{_CLUSTER}/nodePools/<pool>", methods=["PUT"], endpoint="update_pool"),
        Rule(f"{_CLUSTER}/nodePools/<pool>", methods=["DELETE"], endpoint="delete_pool"),
        Rule(f"{_LOCATION}/operations/<operation>", endpoint="get_operation"),
    ],
    strict_slashes=False,
)
