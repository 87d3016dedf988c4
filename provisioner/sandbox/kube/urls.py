"""The sandbox Kubernetes API's routes: the core/v1 paths the official client calls (kubernetes
api/core_v1_api.py, version_api.py) and the discovery and OpenAPI paths kubectl reads first, each
fleet cluster under its own prefix /clusters/<name>, which its kubeconfig entry names as the server."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

_CLUSTER = "/clusters/<cluster>"
_V1 = f"{_CLUSTER}/api/v1"
_NAMESPACED = f"{_V1}/namespaces/<namespace>"
ROUTES = Map(
    [
        Rule(f"{_CLUSTER}/version", methods=["GET"], endpoint="version"),
        Rule(f"{_CLUSTER}/api", methods=["GET"], endpoint="api_versions"),
        Rule(f"{_CLUSTER}/apis", methods=["GET"], endpoint="api_groups"),
        Rule(f"{_V1}", methods=["GET"], endpoint="core_resources"),
        Rule(f"{_CLUSTER}/openapi/v3", methods=["GET"], endpoint="openapi_root"),
        Rule(f"{_CLUSTER}/openapi/v3/api/v1", methods=["GET"], endpoint="openapi_v1"),
        Rule(f"{_V1}/namespaces", methods=["GET"], endpoint="list_namespaces"),
        Rule(f"{_V1}/events", methods=["GET"], endpoint="list_events"),
        Rule(f"{_NAMESPACED}/events", methods=["GET"], endpoint="list_events"),
        Rule(f"{_V1}/nodes", methods=["GET"], endpoint="list_nodes"),
        Rule(f"{_V1}/nodes/<name>", methods=["GET"], endpoint="get_node"),
        Rule(f"{_V1}/nodes/<name>", methods=["PATCH"], endpoint="patch_node"),
        Rule(f"{_V1}/namespaces/<namespace>", methods=["GET"], endpoint="get_namespace"),
        Rule(f"{_V1}/pods", methods=["GET"], endpoint="list_pods"),
        Rule(f"{_NAMESPACED}/pods", methods=["GET"], endpoint="list_pods"),
        Rule(f"{_NAMESPACED}/pods", methods=["POST"], endpoint="create_pod"),
        Rule(f"{_NAMESPACED}/pods/<name>", methods=["GET"], endpoint="get_pod"),
        Rule(f"{_NAMESPACED}/pods/<name>", methods=["PATCH"], endpoint="patch_pod"),
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
