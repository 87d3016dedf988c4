"""The ACK emulator's routes: the CS API 2015-12-15 ROA paths the node-pool calls use, each with
the action name the SDK sends in x-acs-action (alibabacloud-cs20151215 client.py, `Params`)."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

_POOLS = "/clusters/<cluster_id>/nodepools"
ROUTES = Map(
    [
        Rule("/api/v1/clusters", methods=["GET"], endpoint="describe_clusters"),
        Rule("/clusters/<cluster_id>", methods=["GET"], endpoint="describe_cluster"),
        Rule(_POOLS, methods=["GET"], endpoint="list_pools"),
        Rule(_POOLS, methods=["POST"], endpoint="create_pool"),
        Rule(f"{_POOLS}/<nodepool_id>", methods=["GET"], endpoint="get_pool"),
        Rule(f"{_POOLS}/<nodepool_id>", methods=["PUT"], endpoint="modify_pool"),
        Rule(f"{_POOLS}/<nodepool_id>", methods=["DELETE"], endpoint="delete_pool"),
        Rule("/tasks/<task_id>", methods=["GET"], endpoint="describe_task"),
    ],
    strict_slashes=False,
)
# endpoint -> the action the SDK names in x-acs-action for it
ACTIONS = {
    "describe_clusters": "DescribeClustersV1",
    "describe_cluster": "DescribeClusterDetail",
    "list_pools": "DescribeClusterNodePools",
    "create_pool": "CreateClusterNodePool",
    "get_pool": "DescribeClusterNodePoolDetail",
    "modify_pool": "ModifyClusterNodePool",
    "delete_pool": "DeleteClusterNodepool",
    "describe_task": "DescribeTaskInfo",
}
