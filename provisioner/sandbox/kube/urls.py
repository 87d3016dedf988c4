"""The sandbox Kubernetes API's routes: the core/v1 paths the official client calls (kubernetes
api/core_v1_api.py, version_api.py, with pods/eviction), the apps/v1 and policy/v1 paths
(apps_v1_api.py, policy_v1_api.py: deployments and replicasets with /scale,
poddisruptionbudgets), the resource.k8s.io/v1 paths (resource_v1_api.py:
deviceclasses, resourceslices, resourceclaims with their status, resourceclaimtemplates), the
discovery and OpenAPI paths kubectl reads first, and the sandbox's own /sandbox/ paths (what a
user does with helm, done for them), each fleet cluster under its own prefix /clusters/<name>,
which its kubeconfig entry names as the server."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

_CLUSTER = "/clusters/<cluster>"
_V1 = f"{_CLUSTER}/api/v1"
_NAMESPACED = f"{_V1}/namespaces/<namespace>"
_RESOURCE = f"{_CLUSTER}/apis/resource.k8s.io/v1"
_RESOURCE_NS = f"{_RESOURCE}/namespaces/<namespace>"


def _stored(resource: str, namespaced: bool) -> list[Rule]:
    """The routes of one stored resource.k8s.io kind: list (everywhere and per namespace),
    create, get, replace, patch, delete."""
    collection = f"{_RESOURCE_NS}/{resource}" if namespaced else f"{_RESOURCE}/{resource}"
    item = f"{collection}/<name>"
    kind = {"resource": resource}
    rules = [
        Rule(collection, methods=["GET"], endpoint="list_resources", defaults=kind),
        Rule(collection, methods=["POST"], endpoint="create_resource", defaults=kind),
        Rule(item, methods=["GET"], endpoint="get_resource", defaults=kind),
        Rule(item, methods=["PUT"], endpoint="replace_resource", defaults=kind),
        Rule(item, methods=["PATCH"], endpoint="patch_resource", defaults=kind),
        Rule(item, methods=["DELETE"], endpoint="delete_resource", defaults=kind),
    ]
    if namespaced:
        rules.append(
            Rule(f"{_RESOURCE}/{resource}", methods=["GET"], endpoint="list_resources", defaults=kind)
        )
    return rules


def _group(group: str, version: str, resources: tuple[str, ...], scaled: tuple[str, ...] = ()) -> list[Rule]:
    """A stored group's routes (apps/v1, policy/v1): its discovery and OpenAPI document, and per
    namespaced resource list (everywhere and per namespace), create, get, replace, patch, delete,
    with /scale where it has one."""
    root = f"{_CLUSTER}/apis/{group}/{version}"
    named = {"group": group}
    rules = [
        Rule(f"{_CLUSTER}/apis/{group}", methods=["GET"], endpoint="api_group", defaults=named),
        Rule(root, methods=["GET"], endpoint="group_resources", defaults=named),
        Rule(
            f"{_CLUSTER}/openapi/v3/apis/{group}/{version}",
            methods=["GET"],
            endpoint="openapi_group",
            defaults=named,
        ),
    ]
    for resource in resources:
        kind = {"resource": resource}
        collection, item = (
            f"{root}/namespaces/<namespace>/{resource}",
            f"{root}/namespaces/<namespace>/{resource}/<name>",
        )
        rules += [
            Rule(f"{root}/{resource}", methods=["GET"], endpoint="list_stored", defaults=kind),
            Rule(collection, methods=["GET"], endpoint="list_stored", defaults=kind),
            Rule(collection, methods=["POST"], endpoint="create_stored", defaults=kind),
            Rule(item, methods=["GET"], endpoint="get_stored", defaults=kind),
            Rule(item, methods=["PUT"], endpoint="replace_stored", defaults=kind),
            Rule(item, methods=["PATCH"], endpoint="patch_stored", defaults=kind),
            Rule(item, methods=["DELETE"], endpoint="delete_stored", defaults=kind),
        ]
        if resource in scaled:
            rules += [
                Rule(f"{item}/scale", methods=["GET"], endpoint="get_scale", defaults=kind),
                Rule(f"{item}/scale", methods=["PATCH", "PUT"], endpoint="patch_scale", defaults=kind),
            ]
    return rules


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
        Rule(f"{_NAMESPACED}/pods/<name>/eviction", methods=["POST"], endpoint="evict_pod"),
        Rule(f"{_V1}/configmaps", methods=["GET"], endpoint="list_config_maps"),
        Rule(f"{_NAMESPACED}/configmaps", methods=["GET"], endpoint="list_config_maps"),
        Rule(f"{_NAMESPACED}/configmaps", methods=["POST"], endpoint="create_config_map"),
        Rule(f"{_NAMESPACED}/configmaps/<name>", methods=["GET"], endpoint="get_config_map"),
        Rule(f"{_NAMESPACED}/configmaps/<name>", methods=["PUT"], endpoint="replace_config_map"),
        Rule(f"{_NAMESPACED}/configmaps/<name>", methods=["PATCH"], endpoint="patch_config_map"),
        Rule(f"{_NAMESPACED}/configmaps/<name>", methods=["DELETE"], endpoint="delete_config_map"),
        Rule(f"{_CLUSTER}/apis/resource.k8s.io", methods=["GET"], endpoint="resource_group"),
        Rule(_RESOURCE, methods=["GET"], endpoint="resource_resources"),
        Rule(
            f"{_CLUSTER}/openapi/v3/apis/resource.k8s.io/v1", methods=["GET"], endpoint="openapi_resource_v1"
        ),
        *_stored("deviceclasses", namespaced=False),
        *_stored("resourceclaims", namespaced=True),
        *_stored("resourceclaimtemplates", namespaced=True),
        Rule(f"{_RESOURCE_NS}/resourceclaims/<name>/status", methods=["GET"], endpoint="get_claim_status"),
        Rule(
            f"{_RESOURCE_NS}/resourceclaims/<name>/status", methods=["PUT"], endpoint="replace_claim_status"
        ),
        Rule(
            f"{_RESOURCE_NS}/resourceclaims/<name>/status", methods=["PATCH"], endpoint="patch_claim_status"
        ),
        Rule(f"{_RESOURCE}/resourceslices", methods=["GET"], endpoint="list_resource_slices"),
        Rule(f"{_RESOURCE}/resourceslices/<name>", methods=["GET"], endpoint="get_resource_slice"),
        *_group("apps", "v1", ("deployments", "replicasets"), scaled=("deployments", "replicasets")),
        *_group("policy", "v1", ("poddisruptionbudgets",)),
        Rule(f"{_CLUSTER}/sandbox/dra-driver", methods=["GET"], endpoint="get_dra_driver"),
        Rule(f"{_CLUSTER}/sandbox/dra-driver", methods=["PUT"], endpoint="install_dra_driver"),
        Rule(f"{_CLUSTER}/sandbox/dra-driver", methods=["DELETE"], endpoint="uninstall_dra_driver"),
    ],
    strict_slashes=False,
)
