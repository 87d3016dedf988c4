"""What the sandbox Kubernetes API says about itself, so that kubectl can use it: discovery
(`/api`, `/api/v1`, `/apis`) and the OpenAPI v3 documents kubectl reads before it applies.

Written from the Kubernetes API reference (API concepts, "Discovery API": APIVersions,
APIResourceList and APIGroupList; "OpenAPI V3": /openapi/v3 lists one document per group
version) and trimmed to what this API serves: the core/v1 kinds its routes handle, with the verbs
they take, the groups apps/v1 (Deployments, ReplicaSets, their /scale) and policy/v1
(PodDisruptionBudgets; pods/eviction is core's, of kind policy/v1 Eviction), and on clusters of
Kubernetes 1.34 or later the group resource.k8s.io at v1 (its
preferred and only version here; kubernetes pkg/registry/resource/rest/storage_resource.go serves
deviceclasses, resourceclaims with resourceclaims/status, resourceclaimtemplates and
resourceslices). kubectl asks for aggregated discovery (apidiscovery.k8s.io/v2) first and takes
this plain form, as from an older server.
"""

from __future__ import annotations

from typing import Any

# name -> (kind, singular, namespaced, verbs, short names), as `kubectl api-resources` shows them
# for core/v1; the verbs are those urls.py routes.
RESOURCES: dict[str, tuple[str, str, bool, tuple[str, ...], tuple[str, ...]]] = {
    "configmaps": (
        "ConfigMap",
        "configmap",
        True,
        ("create", "delete", "get", "list", "patch", "update"),
        ("cm",),
    ),
    "events": ("Event", "event", True, ("list",), ("ev",)),
    "namespaces": ("Namespace", "namespace", False, ("get", "list"), ("ns",)),
    "nodes": ("Node", "node", False, ("get", "list", "patch"), ("no",)),
    "pods": ("Pod", "pod", True, ("create", "delete", "get", "list", "patch"), ("po",)),
    "pods/eviction": ("Eviction", "", True, ("create",), ()),
}
# A subresource whose kind is another group's names that group and version in its entry (kubectl
# drain finds policy/v1 Eviction so: kubectl pkg/drain/drain.go CheckEvictionSupport; the scale
# client finds autoscaling/v1 Scale so).
SUBRESOURCE_GROUPS = {
    "pods/eviction": ("policy", "v1"),
    "deployments/scale": ("autoscaling", "v1"),
    "replicasets/scale": ("autoscaling", "v1"),
}


def api_versions(server: str) -> dict[str, Any]:
    """GET /api: the core group's versions (APIVersions)."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
    }


# name -> (kind, singular, namespaced, verbs, short names) of resource.k8s.io/v1; the verbs are
# those urls.py routes (resourceslices are the kubelet plugins' to write: read-only to users here).
_WRITABLE = ("create", "delete", "get", "list", "patch", "update")
RESOURCE_V1: dict[str, tuple[str, str, bool, tuple[str, ...], tuple[str, ...]]] = {
    "deviceclasses": ("DeviceClass", "deviceclass", False, _WRITABLE, ()),
    "resourceclaims": ("ResourceClaim", "resourceclaim", True, _WRITABLE, ()),
    "resourceclaims/status": ("ResourceClaim", "", True, ("get", "patch", "update"), ()),
    "resourceclaimtemplates": ("ResourceClaimTemplate", "resourceclaimtemplate", True, _WRITABLE, ()),
    "resourceslices": ("ResourceSlice", "resourceslice", False, ("get", "list"), ()),
}
RESOURCE_GROUP, RESOURCE_VERSION = "resource.k8s.io", "v1"
# apps/v1 and policy/v1, as far as the sandbox stores them (stored.py), with the verbs urls.py routes.
APPS_V1: dict[str, tuple[str, str, bool, tuple[str, ...], tuple[str, ...]]] = {
    "deployments": ("Deployment", "deployment", True, _WRITABLE, ("deploy",)),
    "deployments/scale": ("Scale", "", True, ("get", "patch", "update"), ()),
    "replicasets": ("ReplicaSet", "replicaset", True, _WRITABLE, ("rs",)),
    "replicasets/scale": ("Scale", "", True, ("get", "patch", "update"), ()),
}
POLICY_V1: dict[str, tuple[str, str, bool, tuple[str, ...], tuple[str, ...]]] = {
    "poddisruptionbudgets": ("PodDisruptionBudget", "poddisruptionbudget", True, _WRITABLE, ("pdb",)),
}
# group -> (its one version, its resources), in the order /apis lists them.
GROUPS = {
    "apps": ("v1", APPS_V1),
    "policy": ("v1", POLICY_V1),
    RESOURCE_GROUP: (RESOURCE_VERSION, RESOURCE_V1),
}


def served_groups(resource_api: bool) -> list[str]:
    """The named groups a cluster serves: resource.k8s.io only where its version has it."""
    return [g for g in GROUPS if g != RESOURCE_GROUP or resource_api]


def _group_entry(group: str = RESOURCE_GROUP) -> dict[str, Any]:
    version = {"groupVersion": f"{group}/{GROUPS[group][0]}", "version": GROUPS[group][0]}
    return {"name": group, "versions": [version], "preferredVersion": version}


def api_groups(resource_api: bool) -> dict[str, Any]:
    """GET /apis: the named groups (APIGroupList): resource.k8s.io where the cluster serves it."""
    groups = [_group_entry(g) for g in served_groups(resource_api)]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(name: str = RESOURCE_GROUP) -> dict[str, Any]:
    """GET /apis/<group> (APIGroup)."""
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(name)}


def group_resources(name: str = RESOURCE_GROUP) -> dict[str, Any]:
    """GET /apis/<group>/<version> (APIResourceList)."""
    version, table = GROUPS[name]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{name}/{version}",
        "resources": _listed(table),
    }


def resource_group() -> dict[str, Any]:
    """GET /apis/resource.k8s.io (APIGroup)."""
    return group(RESOURCE_GROUP)


def resource_resources() -> dict[str, Any]:
    """GET /apis/resource.k8s.io/v1 (APIResourceList)."""
    return group_resources(RESOURCE_GROUP)


def core_resources() -> dict[str, Any]:
    """GET /api/v1: its resources (APIResourceList)."""
    return {"kind": "APIResourceList", "groupVersion": "v1", "resources": _listed(RESOURCES)}


def _listed(
    table: dict[str, tuple[str, str, bool, tuple[str, ...], tuple[str, ...]]],
) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "singularName": singular,
            "namespaced": namespaced,
            "kind": kind,
            "verbs": list(verbs),
            **({"shortNames": list(short)} if short or "/" not in name else {}),
            **(
                {"group": SUBRESOURCE_GROUPS[name][0], "version": SUBRESOURCE_GROUPS[name][1]}
                if name in SUBRESOURCE_GROUPS
                else {}
            ),
        }
        for name, (kind, singular, namespaced, verbs, short) in table.items()
    ]


OPENAPI_V1_PATH = "/openapi/v3/api/v1"
OPENAPI_RESOURCE_PATH = "/openapi/v3/apis/resource.k8s.io/v1"


def openapi_root(prefix: str, resource_api: bool) -> dict[str, Any]:
    """GET /openapi/v3: one document per group version, by its server-relative URL."""
    paths = {"api/v1": {"serverRelativeURL": f"{prefix}{OPENAPI_V1_PATH}"}}
    for name in served_groups(resource_api):
        path = f"apis/{name}/{GROUPS[name][0]}"
        paths[path] = {"serverRelativeURL": f"{prefix}/openapi/v3/{path}"}
    return {"paths": paths}


def openapi_group(name: str) -> dict[str, Any]:
    """GET /openapi/v3/apis/<group>/<version>, as openapi_v1 for the group's kinds."""
    version, table = GROUPS[name]
    prefix = {"apps": "io.k8s.api.apps.v1", "policy": "io.k8s.api.policy.v1"}.get(name, f"io.k8s.api.{name}")
    operation = {"apps": "AppsV1", "policy": "PolicyV1"}.get(name, name.title())
    kinds = {n: row for n, row in table.items() if "/" not in n}
    return _openapi(name, version, f"/apis/{name}/{version}", prefix, operation_prefix=operation, table=kinds)


def openapi_v1() -> dict[str, Any]:
    """GET /openapi/v3/api/v1: the served paths and their operations. kubectl reads it to learn
    whether the server validates fields itself (the `fieldValidation` parameter of PATCH), and then
    leaves validation to it; the schemas are open objects, checked by the API's own rules."""
    kinds = {name: row for name, row in RESOURCES.items() if "/" not in name}
    return _openapi("", "v1", "/api/v1", "io.k8s.api.core.v1", operation_prefix="CoreV1", table=kinds)


def openapi_resource_v1() -> dict[str, Any]:
    """GET /openapi/v3/apis/resource.k8s.io/v1, as openapi_v1 for the group's kinds."""
    table = {name: row for name, row in RESOURCE_V1.items() if "/" not in name}
    return _openapi(
        RESOURCE_GROUP,
        RESOURCE_VERSION,
        "/apis/resource.k8s.io/v1",
        "io.k8s.api.resource.v1",
        operation_prefix="ResourceV1",
        table=table,
    )


def _openapi(
    group: str,
    version: str,
    root: str,
    schema_prefix: str,
    *,
    operation_prefix: str,
    table: dict[str, tuple[str, str, bool, tuple[str, ...], tuple[str, ...]]],
) -> dict[str, Any]:
    field_validation = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
    manager = {"name": "fieldManager", "in": "query", "schema": {"type": "string"}}
    paths: dict[str, Any] = {}
    for name, (kind, _, namespaced, verbs, _) in table.items():
        collection = f"{root}/namespaces/{{namespace}}/{name}" if namespaced else f"{root}/{name}"
        item = f"{collection}/{{name}}"
        ref = {"$ref": f"#/components/schemas/{schema_prefix}.{kind}"}
        body = {"content": {"application/json": {"schema": ref}}}

        def operation(verb: str, kind: str = kind, body: Any = body, **extra: Any) -> dict[str, Any]:
            return {
                "operationId": f"{verb}{operation_prefix}{kind}",
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind},
                "responses": {"200": body},
                **extra,
            }

        paths[collection] = {"get": operation("list")} if "list" in verbs else {}
        if "create" in verbs:
            paths[collection]["post"] = operation("post", requestBody=body, parameters=[field_validation])
        paths[item] = {}
        if "get" in verbs:
            paths[item]["get"] = operation("get")
        if "patch" in verbs:
            paths[item]["patch"] = operation("patch", parameters=[field_validation, manager])
        if "update" in verbs:
            paths[item]["put"] = operation("put", requestBody=body, parameters=[field_validation])
        if "delete" in verbs:
            paths[item]["delete"] = operation("delete")
    schemas = {
        f"{schema_prefix}.{kind}": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": group, "version": version, "kind": kind}],
            "additionalProperties": True,
        }
        for kind, *_ in table.values()
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (provisioner sandbox)", "version": version},
        "paths": {path: operations for path, operations in paths.items() if operations},
        "components": {"schemas": schemas},
    }
