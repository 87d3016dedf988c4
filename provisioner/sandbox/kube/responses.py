"""The sandbox Kubernetes API's wire format, as the API server writes it and the official client
reads it: objects and `<Kind>List`s with metadata.resourceVersion, errors as `Status` objects, a
bearer token on every request, PATCH by content type (merge, strategic merge, server-side apply)."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from werkzeug.wrappers import Request, Response

from provisioner.sandbox.engine import Engine
from provisioner.sandbox.kube import discovery, dra, versions
from provisioner.sandbox.kube.exceptions import (
    BadRequest,
    KubeError,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
)
from provisioner.sandbox.kube.listing import listed as _list
from provisioner.sandbox.kube.listing import one as _one
from provisioner.sandbox.kube.models import KubeCluster, KubeClusters
from provisioner.sandbox.kube.resources import GROUP_VERSION, KINDS
from provisioner.sandbox.kube.urls import ROUTES
from provisioner.sandbox.kube.workload_responses import WorkloadHandlers
from provisioner.sandbox.wire import (
    ApiError,
    EmulatorApp,
    MalformedBody,
    WireErrors,
    json_response,
    request_json,
)

TOKEN = "sandbox"  # the static bearer token DIR/kubeconfig gives every user
APPLY = "application/apply-patch+yaml"
MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
NO_RESOURCE = "the server could not find the requested resource"


def app(engine: Engine, clusters: KubeClusters, latency: float = 0.0) -> EmulatorApp:
    handlers = KubeHandlers(clusters)
    return EmulatorApp(
        engine,
        routes=ROUTES,
        handlers={rule.endpoint: handlers.checked(rule.endpoint) for rule in ROUTES.iter_rules()},
        render_error=render_error,
        errors=WireErrors(
            malformed=BadRequest,
            no_route=lambda what: NotFound(NO_RESOURCE, {}),
            faults={
                429: lambda: TooManyRequests("Too many requests, please try again later.", {}),
                503: lambda: ServiceUnavailable("the server is currently unable to handle the request", {}),
            },
        ),
        latency=latency,
    )


def render_error(error: ApiError) -> Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.code,
        "code": error.status,
    }
    if not error.code:
        del body["reason"]
    details = error.details if isinstance(error, KubeError) else None
    if details is not None:
        body["details"] = details
    headers = {"Retry-After": f"{error.retry_after:g}"} if error.retry_after is not None else None
    return json_response(body, error.status, headers)


def _release(release: dra.Release) -> dict[str, Any]:
    return {"release": release.name, "namespace": release.namespace, "values": release.values}


def _served(cluster: KubeCluster) -> bool:
    """resource.k8s.io/v1 exists from 1.34 (GA there): on an older cluster its paths are unknown."""
    if not cluster.serves_resource_api:
        raise NotFound(NO_RESOURCE, {})
    return True


def _field_manager(request: Request) -> str:
    """The fieldManager given, else the user agent's first word, as the API server defaults it."""
    return request.args.get("fieldManager") or request.headers.get("User-Agent", "unknown").split("/", 1)[0]


def _body(request: Request) -> dict[str, Any]:
    """The request body: JSON, or YAML for an apply patch (YAML being a superset of JSON)."""
    if request.mimetype != APPLY:
        return request_json(request)
    try:
        body = YAML(typ="safe", pure=True).load(request.get_data(as_text=True) or "{}")
    except YAMLError as exc:
        raise MalformedBody(f"error decoding YAML: {exc}") from None
    if not isinstance(body, dict):
        raise MalformedBody("the apply patch must be an object")
    return body


class KubeHandlers(WorkloadHandlers):
    def __init__(self, clusters: KubeClusters):
        self.clusters = clusters

    def checked(self, endpoint: str) -> Any:
        handler = getattr(self, endpoint)

        def check_then_handle(request: Request, cluster: str, **args: Any) -> Response:
            if request.headers.get("Authorization", "") != f"Bearer {TOKEN}":
                raise Unauthorized("Unauthorized")
            return handler(request, self.clusters[cluster], **args)

        return check_then_handle

    def version(self, request: Request, cluster: KubeCluster) -> Response:
        return json_response(versions.version_info(cluster.kubernetes_version))

    # Discovery, as kubectl reads it before any request

    def api_versions(self, request: Request, cluster: KubeCluster) -> Response:
        return json_response(discovery.api_versions(request.host))

    def api_groups(self, request: Request, cluster: KubeCluster) -> Response:
        return json_response(discovery.api_groups(cluster.serves_resource_api))

    def core_resources(self, request: Request, cluster: KubeCluster) -> Response:
        return json_response(discovery.core_resources())

    def openapi_root(self, request: Request, cluster: KubeCluster) -> Response:
        prefix = request.path.removesuffix("/openapi/v3")
        return json_response(discovery.openapi_root(prefix, cluster.serves_resource_api))

    def openapi_v1(self, request: Request, cluster: KubeCluster) -> Response:
        return json_response(discovery.openapi_v1())

    def resource_group(self, request: Request, cluster: KubeCluster) -> Response:
        return json_response(discovery.resource_group() if _served(cluster) else {})

    def resource_resources(self, request: Request, cluster: KubeCluster) -> Response:
        return json_response(discovery.resource_resources() if _served(cluster) else {})

    def openapi_resource_v1(self, request: Request, cluster: KubeCluster) -> Response:
        return json_response(discovery.openapi_resource_v1() if _served(cluster) else {})

    def list_namespaces(self, request: Request, cluster: KubeCluster) -> Response:
        """The namespaces something is in (every name is one: see get_namespace)."""
        names = sorted({"default", *cluster.namespaces()})
        return _list("Namespace", cluster, [self._namespace(name) for name in names])

    def list_events(self, request: Request, cluster: KubeCluster, namespace: str | None = None) -> Response:
        """What the scheduler and the autoscaler recorded (kubectl describe pod asks by
        involvedObject fields)."""
        events = cluster.list_events(
            namespace, request.args.get("labelSelector", ""), request.args.get("fieldSelector", "")
        )
        return _list("Event", cluster, events, request)

    # Nodes

    def list_nodes(self, request: Request, cluster: KubeCluster) -> Response:
        return _list("Node", cluster, cluster.list_nodes(request.args.get("labelSelector", "")), request)

    def get_node(self, request: Request, cluster: KubeCluster, name: str) -> Response:
        return _one("Node", cluster, cluster.node(name), request)

    def patch_node(self, request: Request, cluster: KubeCluster, name: str) -> Response:
        if request.mimetype not in MERGE_PATCHES:
            raise UnsupportedMediaType(
                f"the sandbox patches nodes with {' or '.join(MERGE_PATCHES)}, not {request.mimetype}", {}
            )
        return json_response(cluster.patch_node(name, request_json(request)))

    def get_namespace(self, request: Request, cluster: KubeCluster, namespace: str) -> Response:
        """Namespaces exist implicitly: every name is an Active namespace."""
        return json_response(self._namespace(namespace))

    @staticmethod
    def _namespace(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }

    # Pods

    def patch_pod(self, request: Request, cluster: KubeCluster, namespace: str, name: str) -> Response:
        """kubectl apply, label and annotate: a merge (or strategic merge) patch of the pod's metadata."""
        if request.mimetype not in MERGE_PATCHES:
            raise UnsupportedMediaType(
                f"the sandbox patches pods with {' or '.join(MERGE_PATCHES)}, not {request.mimetype}", {}
            )
        return json_response(cluster.patch_pod(namespace, name, request_json(request)))

    def list_pods(self, request: Request, cluster: KubeCluster, namespace: str | None = None) -> Response:
        pods = cluster.list_pods(
            namespace, request.args.get("labelSelector", ""), request.args.get("fieldSelector", "")
        )
        return _list("Pod", cluster, pods, request)

    def create_pod(self, request: Request, cluster: KubeCluster, namespace: str) -> Response:
        return json_response(cluster.create_pod(namespace, request_json(request)), 201)

    def get_pod(self, request: Request, cluster: KubeCluster, namespace: str, name: str) -> Response:
        return _one("Pod", cluster, cluster.pod(namespace, name), request)

    def delete_pod(self, request: Request, cluster: KubeCluster, namespace: str, name: str) -> Response:
        return json_response(cluster.delete_pod(namespace, name))

    # ConfigMaps

    def list_config_maps(
        self, request: Request, cluster: KubeCluster, namespace: str | None = None
    ) -> Response:
        found = cluster.list_config_maps(
            namespace, request.args.get("labelSelector", ""), request.args.get("fieldSelector", "")
        )
        return _list("ConfigMap", cluster, found, request)

    def get_config_map(self, request: Request, cluster: KubeCluster, namespace: str, name: str) -> Response:
        return _one("ConfigMap", cluster, cluster.config_map(namespace, name), request)

    def create_config_map(self, request: Request, cluster: KubeCluster, namespace: str) -> Response:
        body = request_json(request)
        return json_response(
            self._maybe_dry(
                request, cluster, lambda: cluster.create_config_map(namespace, body, _field_manager(request))
            ),
            201,
        )

    def replace_config_map(
        self, request: Request, cluster: KubeCluster, namespace: str, name: str
    ) -> Response:
        body = request_json(request)
        manager = _field_manager(request)
        return json_response(
            self._maybe_dry(
                request, cluster, lambda: cluster.replace_config_map(namespace, name, body, manager)
            )
        )

    def patch_config_map(self, request: Request, cluster: KubeCluster, namespace: str, name: str) -> Response:
        body = _body(request)
        if request.mimetype == APPLY:
            manager = request.args.get("fieldManager")
            if not manager:
                raise BadRequest("PATCH with an apply patch requires the fieldManager query parameter")
            force = request.args.get("force", "false").lower() == "true"
            created = not cluster.has_config_map(namespace, name)
            result = self._maybe_dry(
                request, cluster, lambda: cluster.apply_config_map(namespace, name, body, manager, force)
            )
            return json_response(result, 201 if created else 200)
        if request.mimetype in MERGE_PATCHES:
            manager = _field_manager(request)
            return json_response(
                self._maybe_dry(
                    request, cluster, lambda: cluster.merge_patch_config_map(namespace, name, body, manager)
                )
            )
        raise UnsupportedMediaType(
            f"configmaps take {APPLY}, {' or '.join(MERGE_PATCHES)}, not {request.mimetype}",
            {},
        )

    def delete_config_map(
        self, request: Request, cluster: KubeCluster, namespace: str, name: str
    ) -> Response:
        return json_response(cluster.delete_config_map(namespace, name))

    # resource.k8s.io/v1: DeviceClasses, ResourceClaims (with status), ResourceClaimTemplates

    def list_resources(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str | None = None
    ) -> Response:
        _served(cluster)
        found = cluster.list_resources(
            resource, namespace, request.args.get("labelSelector", ""), request.args.get("fieldSelector", "")
        )
        return _list(KINDS[resource].kind, cluster, found, request, GROUP_VERSION)

    def get_resource(
        self, request: Request, cluster: KubeCluster, resource: str, name: str, namespace: str = ""
    ) -> Response:
        _served(cluster)
        return _one(KINDS[resource].kind, cluster, cluster.get_resource(resource, namespace, name), request)

    def create_resource(
        self, request: Request, cluster: KubeCluster, resource: str, namespace: str = ""
    ) -> Response:
        _served(cluster)
        body, manager = request_json(request), _field_manager(request)
        created = self._maybe_dry(
            request, cluster, lambda: cluster.create_resource(resource, namespace, body, manager)
        )
        return json_response(created, 201)

    def replace_resource(
        self, request: Request, cluster: KubeCluster, resource: str, name: str, namespace: str = ""
    ) -> Response:
        _served(cluster)
        body, manager = request_json(request), _field_manager(request)
        return json_response(
            self._maybe_dry(
                request, cluster, lambda: cluster.replace_resource(resource, namespace, name, body, manager)
            )
        )

    def patch_resource(
        self, request: Request, cluster: KubeCluster, resource: str, name: str, namespace: str = ""
    ) -> Response:
        _served(cluster)
        body = _body(request)
        if request.mimetype == APPLY:
            manager = request.args.get("fieldManager")
            if not manager:
                raise BadRequest("PATCH with an apply patch requires the fieldManager query parameter")
            force = request.args.get("force", "false").lower() == "true"
            created = not cluster.has_resource(resource, namespace, name)
            result = self._maybe_dry(
                request,
                cluster,
                lambda: cluster.apply_resource(resource, namespace, name, body, manager, force=force),
            )
            return json_response(result, 201 if created else 200)
        if request.mimetype in MERGE_PATCHES:
            manager = _field_manager(request)
            return json_response(
                self._maybe_dry(
                    request,
                    cluster,
                    lambda: cluster.merge_patch_resource(resource, namespace, name, body, manager),
                )
            )
        raise UnsupportedMediaType(
            f"{resource} take {APPLY}, {' or '.join(MERGE_PATCHES)}, not {request.mimetype}", {}
        )

    def delete_resource(
        self, request: Request, cluster: KubeCluster, resource: str, name: str, namespace: str = ""
    ) -> Response:
        _served(cluster)
        return json_response(cluster.delete_resource(resource, namespace, name))

    def get_claim_status(self, request: Request, cluster: KubeCluster, namespace: str, name: str) -> Response:
        _served(cluster)
        return json_response(cluster.get_resource("resourceclaims", namespace, name))

    def replace_claim_status(
        self, request: Request, cluster: KubeCluster, namespace: str, name: str
    ) -> Response:
        _served(cluster)
        return json_response(cluster.replace_claim_status(namespace, name, request_json(request)))

    def patch_claim_status(
        self, request: Request, cluster: KubeCluster, namespace: str, name: str
    ) -> Response:
        """The scheduler's status write: a merge patch, or an apply patch of the status."""
        _served(cluster)
        if request.mimetype not in (*MERGE_PATCHES, APPLY):
            raise UnsupportedMediaType(
                f"resourceclaims/status take {APPLY}, {' or '.join(MERGE_PATCHES)}, not {request.mimetype}",
                {},
            )
        return json_response(cluster.merge_patch_claim_status(namespace, name, _body(request)))

    # ResourceSlices: what the DRA kubelet plugins publish, read-only to users

    def list_resource_slices(self, request: Request, cluster: KubeCluster) -> Response:
        _served(cluster)
        found = cluster.list_resource_slices(
            request.args.get("labelSelector", ""), request.args.get("fieldSelector", "")
        )
        return _list("ResourceSlice", cluster, found, request, GROUP_VERSION)

    def get_resource_slice(self, request: Request, cluster: KubeCluster, name: str) -> Response:
        _served(cluster)
        return _one("ResourceSlice", cluster, cluster.resource_slice(name), request)

    # The sandbox's own: what `helm install|uninstall dra-driver-nvidia-gpu` does (sandbox commands)

    def get_dra_driver(self, request: Request, cluster: KubeCluster) -> Response:
        release = cluster.dra_driver
        if release is None:
            raise NotFound("no DRA driver release is installed in this cluster", {})
        pods = {
            node: {"scheduled": pod.scheduled, "running": pod.running, "message": pod.message}
            for node, pod in cluster.dra_plugin_pods().items()
        }
        return json_response(_release(release) | {"featureGates": release.feature_gates, "nodes": pods})

    def install_dra_driver(self, request: Request, cluster: KubeCluster) -> Response:
        """Body: {"values": {...}, "namespace": "...", "release": "..."}; helm's error as a 400."""
        body = request_json(request)
        values = body.get("values") or {}
        namespace = str(body.get("namespace") or dra.NAMESPACE)
        try:
            release = cluster.install_dra_driver(values, namespace, str(body.get("release") or dra.RELEASE))
        except dra.ChartError as refused:
            raise BadRequest(str(refused)) from None
        return json_response(_release(release) | {"output": release.describe()}, 201)

    def uninstall_dra_driver(self, request: Request, cluster: KubeCluster) -> Response:
        try:
            done = cluster.uninstall_dra_driver(request.args.get("release") or dra.RELEASE)
        except dra.ChartError as refused:
            raise NotFound(str(refused), {}) from None
        return json_response({"output": done})

    @staticmethod
    def _maybe_dry(request: Request, cluster: KubeCluster, change: Any) -> dict[str, Any]:
        """Run `change`; with ?dryRun=All answer what it would give and keep nothing of it."""
        if request.args.get("dryRun") != "All":
            return change()
        return cluster.dry_run(change)
