"""The sandbox Kubernetes API's routes: the core/v1 paths the official client calls (kubernetes
api/core_v1_api.py, version_api.py), each fleet cluster under its own prefix /clusters/<name>,
which its kubeconfig entry names as the server."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

_CLUSTER = "/clusters/<cluster>"
_V1 = f"{_CLUSTER}/api/v1"
_NAMESPACED = f"{_V1}/namespaces/<namespace>"
ROUTES = Map(
    [
        Rule(f"{_CLUSTER}/version", methods=["GET"], endpoint="version"),
        Rule(f"{_V1}/nodes", methods=["GET"], endpoint="list_nodes"),
        Rule(f"{_V1}/nodes/<name>", methods=["GET"], endpoint="get_node"),
        Rule(f"{_V1}/nodes/<name>", methods=["PATCH"], endpoint="patch_node"),
        Rule(f"{_V1}/namespaces/<namespace>", methods=["GET"], endpoint="get_namespace"),
        Rule(f"{_V1}/pods", methods=["GET"], endpoint="list_pods"),
        Rule(f"{_NAMESPACED}/pods", methods=["GET"], endpoint="list_pods"),
        Rule(f"{_NAMESPACED}/pods", methods=["POST"], endpoint="create_pod"),
        Rule(f"{_NAMESPACED}/pods/<name>", methods=["GET"], endpoint="get_pod"),
        Rule(f"{_NAMESPACED}/pods/<name>", methods=["DELETE"], endpoint="delete_pod"),
        Rule(f"{_V1}/configmaps", methods=["GET"], endpoint="list_config_maps"),
        Rule(f"{_NAMESPACED}/configmaps", methods=["GET"], endpoint="list_config_maps"),
        Rule(f"{_NAMESPACED}/configmaps", methods=["POST"], endpoint="create_config_map"),
        Rule(f"{_NAMESPACED}/configmaps/<name>", methods=["GET"], endpoint="get_config_map"),
        Rule(f"{_NAMESPACED}/configmaps/<name>", methods=["PUT"], endpoint="replace_config_map"),
        Rule(f"{_NAMESPACED}/configmaps/<name>", methods=["PATCH"], endpoint="patch_config_map"),
        Rule(f"{_NAMESPACED}/configmaps/<name>", methods=["DELETE"], endpoint="delete_config_map"),
    ],
    strict_slashes=False,
)
