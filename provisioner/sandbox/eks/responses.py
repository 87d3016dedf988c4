"""The EKS emulator's wire glue: moto's EKS server, behind a layer that checks what moto does not,
makes node-group operations take time, answers describe_update, and adds latency and faults.

Errors are AWS rest-json: the code in `x-amzn-ErrorType`, `{"message": ...}` in the body.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from typing import Any

from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request, Response

from provisioner.sandbox.eks.autoscaling import AutoScalingHandlers, is_auto_scaling
from provisioner.sandbox.eks.autoscaling import app as auto_scaling_app
from provisioner.sandbox.eks.exceptions import (
    InvalidRequestException,
    NotFoundException,
    ResourceNotFoundException,
    ServiceUnavailableException,
    ThrottlingException,
)
from provisioner.sandbox.eks.models import EksBackend, check_create, check_update, with_cluster_version
from provisioner.sandbox.eks.urls import ROUTES
from provisioner.sandbox.engine import BackendDict, Engine
from provisioner.sandbox.wire import ApiError, EmulatorApp, WireErrors, json_response, request_json

# A SigV4 Authorization header's credential scope: AKID/date/region/service/aws4_request.
_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/,]+/\d{8}/(?P<region>[^/,]+)/")
DEFAULT_REGION = "us-east-1"  # moto's, for a request that is not signed


def region_of(request: Request) -> str:
    """The region a request is signed for, as moto reads it."""
    found = _CREDENTIAL_SCOPE.search(request.headers.get("Authorization", ""))
    return found["region"] if found else DEFAULT_REGION


class EksApp:
    """EKS's REST API and, on the same address, the Auto Scaling API of its node groups' groups."""

    def __init__(self, eks: EmulatorApp, auto_scaling: EmulatorApp):
        self.eks = eks
        self.auto_scaling = auto_scaling

    @property
    def latency(self) -> float:
        return self.eks.latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        # One address, two APIs: a latency given to EKS is the Auto Scaling API's too.
        self.eks.latency = self.auto_scaling.latency = seconds

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self.respond(Request(environ))(environ, start_response)

    def respond(self, request: Request) -> Response:
        return (self.auto_scaling if is_auto_scaling(request) else self.eks).respond(request)


def app(engine: Engine, backends: BackendDict[EksBackend], latency: float = 0.0) -> EksApp:
    from moto.core import DEFAULT_ACCOUNT_ID

    def backend(request: Request) -> EksBackend:
        return backends[DEFAULT_ACCOUNT_ID][region_of(request)]

    handlers = AutoScalingHandlers(
        lambda request: backend(request).groups, lambda request, group: backend(request).group_sizes(group)
    )
    return EksApp(eks_app(engine, backends, latency), auto_scaling_app(engine, handlers, latency))


def eks_app(engine: Engine, backends: BackendDict[EksBackend], latency: float = 0.0) -> EmulatorApp:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.moto_server.werkzeug_app import create_backend_app

    # moto answers every access key it did not issue as its default account.
    handlers = EksHandlers(create_backend_app("eks"), backends, DEFAULT_ACCOUNT_ID)
    return EmulatorApp(
        engine,
        routes=ROUTES,
        handlers={rule.endpoint: getattr(handlers, rule.endpoint) for rule in ROUTES.iter_rules()},
        render_error=render_error,
        errors=WireErrors(
            malformed=InvalidRequestException,
            no_route=lambda what: NotFoundException(f"No route serves {what}."),
            faults={
                429: lambda: ThrottlingException("Rate exceeded"),
                503: lambda: ServiceUnavailableException("Service unavailable, try again later."),
            },
        ),
        latency=latency,
    )


def render_error(error: ApiError) -> Response:
    headers = {"x-amzn-ErrorType": error.code}
    if error.retry_after is not None:
        headers["Retry-After"] = f"{error.retry_after:g}"
    return json_response({"message": error.message}, error.status, headers)


class EksHandlers:
    def __init__(self, moto: Callable[..., Any], backends: BackendDict[EksBackend], account: str):
        self._moto = moto
        self.backends = backends
        self.account = account

    def _backend(self, request: Request) -> EksBackend:
        return self.backends[self.account][region_of(request)]

    def moto(self, request: Request, **_: Any) -> Response:
        return self._forward(request)

    def create(self, request: Request, cluster: str) -> Response:
        body = request_json(request)
        check_create(body)
        backend = self._backend(request)
        backend.ensure_idle((cluster, body["nodegroupName"]))  # a namesake still DELETING
        version = backend.cluster_version(cluster)
        if version is not None:  # else moto answers ResourceNotFoundException for the cluster
            body = with_cluster_version(body, version)
        response = self._forward(request, json.dumps(body).encode())
        if response.status_code == 200:
            name = body["nodegroupName"]
            for group in json.loads(response.get_data())["nodegroup"]["resources"]["autoScalingGroups"]:
                backend.add_group(group["name"], cluster, name)
            backend.start((cluster, name), "CREATING")
            return self._patched(backend, response, cluster, name)
        return response

    def list(self, request: Request, cluster: str) -> Response:
        response = self._forward(request)
        deleting = self._backend(request).deleting(cluster)
        if response.status_code != 200 or not deleting:
            return response
        body = json.loads(response.get_data())
        body["nodegroups"] = sorted(set(body.get("nodegroups", [])) | set(deleting))
        return json_response(body)

    def describe(self, request: Request, cluster: str, nodegroup: str) -> Response:
        backend = self._backend(request)
        transition = backend.current((cluster, nodegroup))
        if transition is not None and transition.ghost is not None:
            return json_response({"nodegroup": {**transition.ghost, "status": "DELETING"}})
        return self._patched(backend, self._forward(request), cluster, nodegroup)

    def update(self, request: Request, cluster: str, nodegroup: str) -> Response:
        key, backend = (cluster, nodegroup), self._backend(request)
        current = self._describe(request, cluster, nodegroup)
        backend.ensure_idle(key)
        check_update(request_json(request), current)
        response = self._forward(request)
        if response.status_code != 200:
            return response
        transition = backend.start(key, "UPDATING")
        body = json.loads(response.get_data())
        status = backend.update_status(key, transition.update_id or "")
        body["update"].update(id=transition.update_id, status=status)
        return json_response(body)

    def describe_update(self, request: Request, cluster: str, update: str) -> Response:
        nodegroup = request.args.get("nodegroupName", "")
        status = self._backend(request).update_status((cluster, nodegroup), update)
        if status is None:
            raise ResourceNotFoundException(f"No update found for ID: {update}.")
        return json_response(
            {"update": {"id": update, "status": status, "type": "ConfigUpdate", "errors": []}}
        )

    def tag(self, request: Request, arn: str) -> Response:
        if self._backend(request).tag_nodegroup(arn, request_json(request).get("tags")):
            return json_response({})
        return self._forward(request)

    def untag(self, request: Request, arn: str) -> Response:
        if self._backend(request).untag_nodegroup(arn, request.args.getlist("tagKeys")):
            return json_response({})
        return self._forward(request)

    def delete(self, request: Request, cluster: str, nodegroup: str) -> Response:
        key, backend = (cluster, nodegroup), self._backend(request)
        backend.ensure_idle(key)
        response = self._forward(request)
        if response.status_code != 200:
            return response
        ghost = json.loads(response.get_data())["nodegroup"]
        backend.start(key, "DELETING", ghost=ghost)
        backend.drop_groups(cluster, nodegroup)
        return json_response({"nodegroup": {**ghost, "status": "DELETING"}})

    # moto

    def _forward(self, request: Request, data: bytes | None = None) -> Response:
        """The request to moto as sent, or with `data` as its body."""
        environ = dict(request.environ)
        data = request.get_data() if data is None else data
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
            raise ResourceNotFoundException(body.get("message", "not found"))
        return body["nodegroup"]

    def _patched(self, backend: EksBackend, response: Response, cluster: str, nodegroup: str) -> Response:
        """moto's answer with the status the node group has while its transition runs."""
        transition = backend.current((cluster, nodegroup))
        if response.status_code != 200 or transition is None:
            return response
        body = json.loads(response.get_data())
        body["nodegroup"]["status"] = transition.status
        return json_response(body)
