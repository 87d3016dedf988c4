"""What the sandbox Kubernetes API says about itself, so that kubectl can use it: discovery
(`/api`, `/api/v1`, `/apis`) and the OpenAPI v3 documents kubectl reads before it applies.

Written from the Kubernetes API reference (API concepts, "Discovery API": APIVersions,
APIResourceList and APIGroupList; "OpenAPI V3": /openapi/v3 lists one document per group
version) and trimmed to what this API serves: the core/v1 kinds its routes handle, with the verbs
they take. It has no API groups, so /apis lists none; kubectl asks for aggregated discovery
(apidiscovery.k8s.io/v2) first and takes this plain form, as from an older server.
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
}


def api_versions(server: str) -> dict[str, Any]:
    """GET /api: the core group's versions (APIVersions)."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
    }


def api_groups() -> dict[str, Any]:
    """GET /apis: the named groups (APIGroupList); this API serves none."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}


def core_resources() -> dict[str, Any]:
    """GET /api/v1: its resources (APIResourceList)."""
    resources = [
        {
            "name": name,
            "singularName": singular,
            "namespaced": namespaced,
            "kind": kind,
            "verbs": list(verbs),
            "shortNames": list(short),
        }
        for name, (kind, singular, namespaced, verbs, short) in RESOURCES.items()
    ]
    return {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}


OPENAPI_V1_PATH = "/openapi/v3/api/v1"


def openapi_root(prefix: str) -> dict[str, Any]:
    """GET /openapi/v3: one document per group version, by its server-relative URL."""
    return {"paths": {"api/v1": {"serverRelativeURL": f"{prefix}{OPENAPI_V1_PATH}"}}}


def openapi_v1() -> dict[str, Any]:
    """GET /openapi/v3/api/v1: the served paths and their operations. kubectl reads it to learn
    whether the server validates fields itself (the `fieldValidation` parameter of PATCH), and then
    leaves validation to it; the schemas are open objects, checked by the API's own rules."""
    field_validation = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
    manager = {"name": "fieldManager", "in": "query", "schema": {"type": "string"}}
    paths: dict[str, Any] = {}
    for name, (kind, _, namespaced, verbs, _) in RESOURCES.items():
        collection = f"/api/v1/namespaces/{{namespace}}/{name}" if namespaced else f"/api/v1/{name}"
        item = f"{collection}/{{name}}"
        ref = {"$ref": f"#/components/schemas/io.k8s.api.core.v1.{kind}"}
        body = {"content": {"application/json": {"schema": ref}}}

        def operation(verb: str, kind: str = kind, body: Any = body, **extra: Any) -> dict[str, Any]:
            return {
                "operationId": f"{verb}CoreV1{kind}",
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": {"group": "", "version": "v1", "kind": kind},
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
        f"io.k8s.api.core.v1.{kind}": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": kind}],
            "additionalProperties": True,
        }
        for kind, *_ in RESOURCES.values()
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (provisioner sandbox)", "version": "v1"},
        "paths": {path: operations for path, operations in paths.items() if operations},
        "components": {"schemas": schemas},
    }
