"""The AKS emulator's wire glue: ARM's agentPools API as azure-mgmt-containerservice speaks it.

Long-running PUT and DELETE answer 201/200/202 with an `Azure-AsyncOperation` status URL; lists
come in pages joined by `nextLink`; errors are ARM's `{"error": {"code", "message"}}`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from provisioner.sandbox.aks.models import AksBackend, cluster_key
from provisioner.sandbox.engine import Operation
from provisioner.sandbox.wire import ApiError, EmulatorApp, json_response, request_json

_PROVIDER = "/subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.ContainerService"
_OPERATIONS = "/subscriptions/<subscription>/providers/Microsoft.ContainerService/locations/<location>"
ROUTES = Map(
    [
        Rule(
            "/subscriptions/<subscription>/providers/Microsoft.ContainerService/managedClusters",
            endpoint="list_clusters",
        ),
        Rule(f"{_PROVIDER}/managedClusters/<cluster>/agentPools", endpoint="list_pools"),
        Rule(
            f"{_PROVIDER}/managedClusters/<cluster>/agentPools/<pool>", methods=["GET"], endpoint="get_pool"
        ),
        Rule(
            f"{_PROVIDER}/managedClusters/<cluster>/agentPools/<pool>", methods=["PUT"], endpoint="put_pool"
        ),
        Rule(
            f"{_PROVIDER}/managedClusters/<cluster>/agentPools/<pool>",
            methods=["DELETE"],
            endpoint="delete_pool",
        ),
        Rule(f"{_OPERATIONS}/operations/<operation>", endpoint="operation_status"),
        Rule(f"{_OPERATIONS}/operationresults/<operation>", endpoint="operation_result"),
    ],
    strict_slashes=False,
)
PAGE_SIZE = 5  # agent pools per page of a list, so paging is exercised


def app(backend: AksBackend, latency: float = 0.0, page_size: int = PAGE_SIZE) -> EmulatorApp:
    handlers = AksHandlers(backend, page_size)
    return EmulatorApp(
        backend.engine,
        routes=ROUTES,
        handlers={rule.endpoint: handlers.checked(rule.endpoint) for rule in ROUTES.iter_rules()},
        render_error=render_error,
        faults={
            429: ApiError(429, "TooManyRequests", "The request was throttled: too many requests."),
            503: ApiError(503, "ServiceUnavailable", "The service is temporarily unavailable."),
        },
        latency=latency,
    )


def render_error(error: ApiError) -> Response:
    headers = {"Retry-After": f"{error.retry_after:g}"} if error.retry_after is not None else None
    return json_response({"error": {"code": error.code, "message": error.message}}, error.status, headers)


class AksHandlers:
    def __init__(self, backend: AksBackend, page_size: int):
        self.backend = backend
        self.page_size = page_size

    def checked(self, endpoint: str) -> Any:
        """The handler, behind the checks ARM makes of every request."""
        handler = getattr(self, endpoint)

        def check_then_handle(request: Request, **args: Any) -> Response:
            if not request.headers.get("Authorization", "").startswith("Bearer "):
                raise ApiError(401, "AuthenticationFailed", "Authentication failed: no bearer token.")
            if not request.args.get("api-version"):
                raise ApiError(
                    400, "MissingApiVersionParameter", "The api-version query parameter is required."
                )
            return handler(request, **args)

        return check_then_handle

    def list_clusters(self, request: Request, subscription: str) -> Response:
        clusters = [
            {"id": key, "name": key.rsplit("/", 1)[-1], "type": "Microsoft.ContainerService/ManagedClusters"}
            for key in self.backend.clusters(subscription)
        ]
        return json_response({"value": clusters})

    def list_pools(self, request: Request, subscription: str, group: str, cluster: str) -> Response:
        key = cluster_key(subscription, group, cluster)
        pools = sorted(self.backend.list_pools(key).items())
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
        key = cluster_key(subscription, group, cluster)
        return json_response(_pool(key, pool, self.backend.get_pool(key, pool)))

    def put_pool(self, request: Request, subscription: str, group: str, cluster: str, pool: str) -> Response:
        key = cluster_key(subscription, group, cluster)
        body = request_json(request)
        properties = body.get("properties")
        if not isinstance(properties, dict):
            raise ApiError(400, "InvalidRequestContent", "The request body must have 'properties'.")
        operation, created = self.backend.put_pool(key, pool, properties)
        headers = {
            "Azure-AsyncOperation": self._operation_url(request, subscription, operation, "operations")
        }
        return json_response(
            _pool(key, pool, self.backend.get_pool(key, pool)), 201 if created else 200, headers
        )

    def delete_pool(
        self, request: Request, subscription: str, group: str, cluster: str, pool: str
    ) -> Response:
        operation = self.backend.delete_pool(cluster_key(subscription, group, cluster), pool)
        if operation is None:
            return Response(status=204)
        headers = {
            "Azure-AsyncOperation": self._operation_url(request, subscription, operation, "operations"),
            "Location": self._operation_url(request, subscription, operation, "operationresults"),
        }
        return Response(status=202, headers=headers)

    def operation_status(
        self, request: Request, subscription: str, location: str, operation: str
    ) -> Response:
        found = self.backend.operation(operation)
        status = "Succeeded" if found.done else "InProgress"
        return json_response({"id": request.path, "name": operation, "status": status})

    def operation_result(
        self, request: Request, subscription: str, location: str, operation: str
    ) -> Response:
        found = self.backend.operation(operation)
        if found.done:
            return Response(status=204)
        return Response(status=202, headers={"Location": request.url})

    @staticmethod
    def _operation_url(request: Request, subscription: str, operation: Operation, kind: str) -> str:
        query = urlencode({"api-version": request.args["api-version"]})
        return (
            f"{request.host_url.rstrip('/')}/subscriptions/{subscription}/providers/Microsoft.ContainerService"
            f"/locations/local/{kind}/{operation.id}?{query}"
        )


def _pool(key: str, name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"{key}/agentPools/{name}",
        "name": name,
        "type": "Microsoft.ContainerService/managedClusters/agentPools",
        "properties": properties,
    }
