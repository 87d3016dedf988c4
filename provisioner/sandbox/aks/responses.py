"""The AKS emulator's wire glue: ARM's agentPools API as azure-mgmt-containerservice speaks it.

Long-running PUT and DELETE answer 201/200/202 with an `Azure-AsyncOperation` status URL and a
`Retry-After` while the operation runs; lists come in pages joined by `nextLink`; errors are
ARM's `{"error": {"code", "message"}}`.

Sources: learn.microsoft.com/azure/azure-resource-manager/management/async-operations (the
headers; the status body's status, startTime and endTime); the SDK's generated AgentPools
create_or_update and delete read Azure-AsyncOperation and Retry-After from a 201 and a 202
(azure-mgmt-containerservice operations/_operations.py).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

from werkzeug.wrappers import Request, Response

from provisioner.sandbox.aks.exceptions import (
    AuthenticationFailed,
    InvalidRequestContent,
    MissingApiVersionParameter,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
)
from provisioner.sandbox.aks.models import AksBackend, backend_for, find_operation
from provisioner.sandbox.aks.urls import ROUTES
from provisioner.sandbox.engine import BackendDict, Engine, Operation
from provisioner.sandbox.wire import ApiError, EmulatorApp, WireErrors, json_response, request_json

PAGE_SIZE = 5  # agent pools per page of a list, so paging is exercised
# ARM leaves Retry-After's value to the resource provider. This one promises no more than 2 s
# ahead: its operations last seconds, and a test may end one early (Engine.advance).
RETRY_AFTER_HORIZON = 2


def app(
    engine: Engine, backends: BackendDict[AksBackend], latency: float = 0.0, page_size: int = PAGE_SIZE
) -> EmulatorApp:
    handlers = AksHandlers(engine, backends, page_size)
    return EmulatorApp(
        engine,
        routes=ROUTES,
        handlers={rule.endpoint: handlers.checked(rule.endpoint) for rule in ROUTES.iter_rules()},
        render_error=render_error,
        errors=WireErrors(
            malformed=InvalidRequestContent,
            no_route=lambda what: NotFound(f"No route serves {what}."),
            faults={
                429: lambda: TooManyRequests("The request was throttled: too many requests."),
                503: lambda: ServiceUnavailable("The service is temporarily unavailable."),
            },
        ),
        latency=latency,
    )


def render_error(error: ApiError) -> Response:
    headers = {"Retry-After": f"{error.retry_after:g}"} if error.retry_after is not None else None
    return json_response({"error": {"code": error.code, "message": error.message}}, error.status, headers)


class AksHandlers:
    def __init__(self, engine: Engine, backends: BackendDict[AksBackend], page_size: int):
        self.engine = engine
        self.backends = backends
        self.page_size = page_size

    def _backend(self, subscription: str, group: str) -> AksBackend:
        return backend_for(self.backends, subscription, group)

    def checked(self, endpoint: str) -> Any:
        """The handler, behind the checks ARM makes of every request."""
        handler = getattr(self, endpoint)

        def check_then_handle(request: Request, **args: Any) -> Response:
            if not request.headers.get("Authorization", "").startswith("Bearer "):
                raise AuthenticationFailed("Authentication failed: no bearer token.")
            if not request.args.get("api-version"):
                raise MissingApiVersionParameter("The api-version query parameter is required.")
            return handler(request, **args)

        return check_then_handle

    def list_clusters(self, request: Request, subscription: str) -> Response:
        clusters = [
            _cluster(key, backend.get_cluster(key.rsplit("/", 1)[-1]))
            for backend in list(self.backends[subscription.lower()].values())
            for key in backend.clusters()
        ]
        return json_response({"value": clusters})

    def get_cluster(self, request: Request, subscription: str, group: str, cluster: str) -> Response:
        backend = self._backend(subscription, group)
        return json_response(_cluster(backend.cluster_key(cluster), backend.get_cluster(cluster)))

    def list_pools(self, request: Request, subscription: str, group: str, cluster: str) -> Response:
        backend = self._backend(subscription, group)
        key = backend.cluster_key(cluster)
        pools = sorted(backend.list_pools(cluster).items())
        start = int(request.args.get("$skipToken", 0))
        page = pools[start : start + self.page_size]
        body: dict[str, Any] = {"value": [_pool(key, name, properties) for name, properties in page]}
        if start + self.page_size < len(pools):
            query = urlencode(
                {"api-version": request.args["api-version"], "$skipToken": start + self.page_size}
            )
            body["nextLink"] = f"{request.host_url.rstrip('/')}{request.path}?{query}"
        return json_response(body)

    def get_pool(self, request: Request, subscription: str, group: str, cluster: str, pool: str) -> Response:
        backend = self._backend(subscription, group)
        return json_response(_pool(backend.cluster_key(cluster), pool, backend.get_pool(cluster, pool)))

    def put_pool(self, request: Request, subscription: str, group: str, cluster: str, pool: str) -> Response:
        backend = self._backend(subscription, group)
        body = request_json(request)
        properties = body.get("properties")
        if not isinstance(properties, dict):
            raise InvalidRequestContent("The request body must have 'properties'.")
        operation, created = backend.put_pool(cluster, pool, properties)
        headers = {
            "Azure-AsyncOperation": self._operation_url(request, subscription, operation, "operations"),
            **self._retry_after(operation),
        }
        return json_response(
            _pool(backend.cluster_key(cluster), pool, backend.get_pool(cluster, pool)),
            201 if created else 200,
            headers,
        )

    def delete_pool(
        self, request: Request, subscription: str, group: str, cluster: str, pool: str
    ) -> Response:
        operation = self._backend(subscription, group).delete_pool(cluster, pool)
        if operation is None:
            return Response(status=204)
        headers = {
            "Azure-AsyncOperation": self._operation_url(request, subscription, operation, "operations"),
            "Location": self._operation_url(request, subscription, operation, "operationresults"),
            **self._retry_after(operation),
        }
        return Response(status=202, headers=headers)

    def operation_status(
        self, request: Request, subscription: str, location: str, operation: str
    ) -> Response:
        found = find_operation(self.engine, subscription, operation)
        body = {
            "id": request.path,
            "name": operation,
            "status": "Succeeded" if found.done else "InProgress",
            "startTime": self.engine.wall(found.started_at).isoformat(),
        }
        if found.done:
            body["endTime"] = self.engine.wall(found.done_at).isoformat()
        return json_response(body, headers=self._retry_after(found))

    def operation_result(
        self, request: Request, subscription: str, location: str, operation: str
    ) -> Response:
        found = find_operation(self.engine, subscription, operation)
        if found.done:
            return Response(status=204)
        return Response(status=202, headers={"Location": request.url})

    def _retry_after(self, operation: Operation) -> dict[str, str]:
        """When to look again, in the whole seconds Retry-After takes (RFC 9110 delay-seconds): when
        this operation ends, rounded up, at most RETRY_AFTER_HORIZON ahead. None with less than a
        second to go, nor once it is done: ARM's clients then poll on their own schedule."""
        left = operation.done_at - self.engine.now()
        if operation.done or left < 1:
            return {}
        return {"Retry-After": str(min(math.ceil(left), RETRY_AFTER_HORIZON))}

    @staticmethod
    def _operation_url(request: Request, subscription: str, operation: Operation, kind: str) -> str:
        query = urlencode({"api-version": request.args["api-version"]})
        return (
            f"{request.host_url.rstrip('/')}/subscriptions/{subscription}/providers/Microsoft.ContainerService"
            f"/locations/local/{kind}/{operation.id}?{query}"
        )


def _cluster(key: str, properties: dict[str, Any]) -> dict[str, Any]:
    """A ManagedCluster (a TrackedResource: id, name, type, location); the sandbox's clusters live
    in its one location, "local", as its operation URLs do."""
    return {
        "id": key,
        "name": key.rsplit("/", 1)[-1],
        "type": "Microsoft.ContainerService/ManagedClusters",
        "location": "local",
        "properties": properties,
    }


def _pool(key: str, name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"{key}/agentPools/{name}",
        "name": name,
        "type": "Microsoft.ContainerService/managedClusters/agentPools",
        "properties": properties,
    }
