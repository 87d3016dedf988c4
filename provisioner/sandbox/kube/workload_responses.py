"""The wire side of apps/v1 (Deployments, ReplicaSets, their /scale), policy/v1
(PodDisruptionBudgets) and the pods' eviction subresource, mixed into responses.KubeHandlers.

Writes take a JSON body (POST, PUT) or a merge or strategic merge patch, which is what kubectl
apply (client-side), edit, scale and the official client send for these built-in kinds; a server-
side apply patch is refused with 415. A DELETE answers Status Success with the object's details
(propagationPolicy Background, kubectl's default: the garbage collector then removes what it owned).
"""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.sandbox.kube import discovery
from provisioner.sandbox.kube.exceptions import UnsupportedMediaType
from provisioner.sandbox.kube.listing import listed, one
from provisioner.sandbox.kube.models import KubeCluster
from provisioner.sandbox.kube.stored import MERGE, STRATEGIC
from provisioner.sandbox.wire import json_response, request_json


def _patch_type(request: Request, resource: str) -> str:
    if request.mimetype not in (MERGE, STRATEGIC):
        raise UnsupportedMediaType(f"{resource} take {MERGE} or {STRATEGIC} here, not {request.mimetype}", {})
    return request.mimetype


class WorkloadHandlers:
    # Discovery of the stored groups

    def api_group(self, request: Request, cluster: KubeCluster, group: str) -> Response:
        return json_response(discovery.group(group))

    def group_resources(self, request: Request, cluster: KubeCluster, group: str) -> Response:
        return json_response(discovery.group_resources(group))

    def openapi_group(self, request: Request, cluster: KubeCluster, group: str) -> Response:
        return json_response(discovery.openapi_group(group))

    # Deployments, ReplicaSets, PodDisruptionBudgets

    def list_stored(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str | None = None
    ) -> Response:
        found = cluster.list_stored(
            resource, namespace, request.args.get("labelSelector", ""), request.args.get("fieldSelector", "")
        )
        kind = cluster.stored[resource].kind
        return listed(kind.kind, cluster, found, request, kind.api_version)

    def get_stored(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str, name: str
    ) -> Response:
        return one(
            cluster.stored[resource].kind.kind,
            cluster,
            cluster.get_stored(resource, namespace, name),
            request,
        )

    def create_stored(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str
    ) -> Response:
        return json_response(cluster.create_stored(resource, namespace, request_json(request)), 201)

    def replace_stored(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str, name: str
    ) -> Response:
        return json_response(cluster.replace_stored(resource, namespace, name, request_json(request)))

    def patch_stored(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str, name: str
    ) -> Response:
        content_type = _patch_type(request, resource)
        return json_response(
            cluster.patch_stored(resource, namespace, name, request_json(request), content_type)
        )

    def delete_stored(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str, name: str
    ) -> Response:
        gone = cluster.delete_stored(resource, namespace, name)
        kind = cluster.stored[resource].kind
        details = {"name": name, "group": kind.group, "kind": resource, "uid": gone["metadata"]["uid"]}
        return json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
        )

    # …/scale

    def get_scale(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str, name: str
    ) -> Response:
        return json_response(cluster.scale(resource, namespace, name))

    def patch_scale(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str, name: str
    ) -> Response:
        body: dict[str, Any] = request_json(request)
        if request.method == "PATCH":
            _patch_type(request, f"{resource}/scale")
        else:
            body = {"spec": {"replicas": (body.get("spec") or {}).get("replicas")}}
        return json_response(cluster.patch_scale(resource, namespace, name, body))

    # pods/eviction

    def evict_pod(self, request: Request, cluster: KubeCluster, namespace: str, name: str) -> Response:
        done = cluster.evict_pod(namespace, name, request_json(request), request.args.get("dryRun") == "All")
        return json_response(done, 201)
