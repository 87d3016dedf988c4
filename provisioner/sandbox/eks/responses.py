"""The EKS emulator's wire glue: moto's EKS server, behind a layer that checks what moto does not,
makes node-group operations take time, answers describe_update, and adds latency and faults.

Errors are AWS rest-json: the code in `x-amzn-ErrorType`, `{"message": ...}` in the body.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

from werkzeug.routing import Map, Rule
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request, Response

from provisioner.sandbox.eks.models import Lifecycles, check_create, check_update
from provisioner.sandbox.engine import Engine
from provisioner.sandbox.wire import ApiError, EmulatorApp, json_response, request_json

_GROUP = "/clusters/<cluster>/node-groups/<nodegroup>"
ROUTES = Map(
    [
        Rule("/clusters/<cluster>/node-groups", methods=["POST"], endpoint="create"),
        Rule("/clusters/<cluster>/node-groups", methods=["GET"], endpoint="list"),
        Rule(_GROUP, methods=["GET"], endpoint="describe"),
        Rule(_GROUP, methods=["DELETE"], endpoint="delete"),
        Rule(f"{_GROUP}/update-config", methods=["POST"], endpoint="update"),
        Rule("/clusters/<cluster>/updates/<update>", methods=["GET"], endpoint="describe_update"),
        Rule("/<path:rest>", endpoint="moto"),
    ],
    strict_slashes=False,
)


def app(engine: Engine, latency: float = 0.0) -> EmulatorApp:
    from moto.moto_server.werkzeug_app import create_backend_app

    handlers = EksHandlers(create_backend_app("eks"), Lifecycles(engine))
    return EmulatorApp(
        engine,
        routes=ROUTES,
        handlers={rule.endpoint: getattr(handlers, rule.endpoint) for rule in ROUTES.iter_rules()},
        render_error=render_error,
        faults={
            429: ApiError(429, "ThrottlingException", "Rate exceeded"),
            503: ApiError(503, "ServiceUnavailableException", "Service unavailable, try again later."),
        },
        latency=latency,
    )


def render_error(error: ApiError) -> Response:
    headers = {"x-amzn-ErrorType": error.code}
    if error.retry_after is not None:
        headers["Retry-After"] = f"{error.retry_after:g}"
    return json_response({"message": error.message}, error.status, headers)


class EksHandlers:
    def __init__(self, moto: Callable[..., Any], lifecycles: Lifecycles):
        self._moto = moto
        self.lifecycles = lifecycles

    def moto(self, request: Request, **_: Any) -> Response:
        return self._forward(request)

    def create(self, request: Request, cluster: str) -> Response:
        body = request_json(request)
        check_create(body)
        self.lifecycles.ensure_idle((cluster, body["nodegroupName"]))  # a namesake still DELETING
        response = self._forward(request)
        if response.status_code == 200:
            name = body["nodegroupName"]
            self.lifecycles.start((cluster, name), "CREATING")
            return self._patched(response, cluster, name)
        return response

    def list(self, request: Request, cluster: str) -> Response:
        response = self._forward(request)
        deleting = self.lifecycles.deleting(cluster)
        if response.status_code != 200 or not deleting:
            return response
        body = json.loads(response.get_data())
        body["nodegroups"] = sorted(set(body.get("nodegroups", [])) | set(deleting))
        return json_response(body)

    def describe(self, request: Request, cluster: str, nodegroup: str) -> Response:
        transition = self.lifecycles.current((cluster, nodegroup))
        if transition is not None and transition.ghost is not None:
            return json_response({"nodegroup": {**transition.ghost, "status": "DELETING"}})
        return self._patched(self._forward(request), cluster, nodegroup)

    def update(self, request: Request, cluster: str, nodegroup: str) -> Response:
        key = (cluster, nodegroup)
        current = self._describe(request, cluster, nodegroup)
        self.lifecycles.ensure_idle(key)
        check_update(request_json(request), current)
        response = self._forward(request)
        if response.status_code != 200:
            return response
        transition = self.lifecycles.start(key, "UPDATING")
        body = json.loads(response.get_data())
        status = self.lifecycles.update_status(key, transition.update_id or "")
        body["update"].update(id=transition.update_id, status=status)
        return json_response(body)

    def describe_update(self, request: Request, cluster: str, update: str) -> Response:
        nodegroup = request.args.get("nodegroupName", "")
        status = self.lifecycles.update_status((cluster, nodegroup), update)
        if status is None:
            raise ApiError(404, "ResourceNotFoundException", f"No update found for ID: {update}.")
        return json_response(
            {"update": {"id": update, "status": status, "type": "ConfigUpdate", "errors": []}}
        )

    def delete(self, request: Request, cluster: str, nodegroup: str) -> Response:
        key = (cluster, nodegroup)
        self.lifecycles.ensure_idle(key)
        response = self._forward(request)
        if response.status_code != 200:
            return response
        ghost = json.loads(response.get_data())["nodegroup"]
        self.lifecycles.start(key, "DELETING", ghost=ghost)
        return json_response({"nodegroup": {**ghost, "status": "DELETING"}})

    # moto

    def _forward(self, request: Request) -> Response:
        environ = dict(request.environ)
        data = request.get_data()
        environ.update({"wsgi.input": io.BytesIO(data), "CONTENT_LENGTH": str(len(data))})
        return Response.from_app(self._moto, environ)

    def _describe(self, request: Request, cluster: str, nodegroup: str) -> dict[str, Any]:
        path = f"/clusters/{cluster}/node-groups/{nodegroup}"
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("content-length", "content-type")
        }
        environ = EnvironBuilder(
            path=path, base_url=request.host_url, method="GET", headers=headers
        ).get_environ()
        response = Response.from_app(self._moto, environ)
        body = json.loads(response.get_data() or b"{}")
        if response.status_code != 200:
            raise ApiError(
                response.status_code, "ResourceNotFoundException", body.get("message", "not found")
            )
        return body["nodegroup"]

    def _patched(self, response: Response, cluster: str, nodegroup: str) -> Response:
        """moto's answer with the status the node group has while its transition runs."""
        transition = self.lifecycles.current((cluster, nodegroup))
        if response.status_code != 200 or transition is None:
            return response
        body = json.loads(response.get_data())
        body["nodegroup"]["status"] = transition.status
        return json_response(body)
