"""HTTP glue every emulator shares: latency, injected faults, and errors in the cloud's format.

Cloud-neutral: what each cloud answers (its error codes, its wire format) is that cloud's own
`exceptions` and `responses`; this module only knows that an error has a status and a code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map
from werkzeug.wrappers import Request, Response

from provisioner.sandbox.engine import Engine
from provisioner.sandbox.quotas import QUOTAS_PATH, QuotaGate


class ApiError(Exception):
    """What a cloud's models reject a request with; its responses module renders it.

    Each cloud's `exceptions` module subclasses it once per error code the cloud answers, the
    class carrying the code and its HTTP status (as moto's per-service exceptions do).
    """

    status: int = 400  # HTTP status
    code: str = ""  # the cloud's error code: OperationNotAllowed, FAILED_PRECONDITION, ...

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after  # seconds, sent as Retry-After

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class MalformedBody(Exception):
    """A request body that is not a JSON object; each cloud answers it with its own error."""


@dataclass(frozen=True)
class WireErrors:
    """How one cloud answers what this shared layer finds wrong, in the cloud's own errors:
    a body that is not JSON, a path or method it does not serve, and the faults the engine draws
    (by status: 429 throttled, 503 unavailable)."""

    malformed: Callable[[str], ApiError]
    no_route: Callable[[str], ApiError]
    faults: dict[int, Callable[[], ApiError]]


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status=status, headers=headers, content_type="application/json")


def request_json(request: Request) -> dict[str, Any]:
    if not request.data:
        return {}
    try:
        body = json.loads(request.data)
    except ValueError as exc:
        raise MalformedBody(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise MalformedBody("the body must be a JSON object")
    return body


Handler = Callable[..., Response]
ErrorRenderer = Callable[[ApiError], Response]


class EmulatorApp:
    """A WSGI app: routes to handlers, sleeps `latency` per request, refuses what its cloud's quota
    does not admit (`quotas`, None while not enforced), answers a share with faults, and renders
    every ApiError in the cloud's format (`render_error`)."""

    def __init__(
        self,
        engine: Engine,
        *,
        routes: Map,
        handlers: dict[str, Handler],
        render_error: ErrorRenderer,
        errors: WireErrors,
        latency: float = 0.0,
    ):
        self.engine = engine
        self.routes = routes
        self.handlers = handlers
        self.render_error = render_error
        self.errors = errors
        self.latency = latency
        self.quotas: QuotaGate | None = None  # set by the emulator's enforce_quotas, after seeding

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self.respond(Request(environ))(environ, start_response)

    def respond(self, request: Request) -> Response:
        if request.path == QUOTAS_PATH and request.method == "GET":
            return json_response(self.quotas.report() if self.quotas else {"enabled": False})
        if self.latency:
            time.sleep(self.latency)
        if self.quotas is None:
            return self._answer(request)
        # The quota is counted before anything else, as a cloud's gateway throttles before its service.
        verdict = self.quotas.admit(request)
        if verdict is not None and not verdict.admitted:
            return self.render_error(self.quotas.wire.throttled(verdict))
        response = self._answer(request)
        if verdict is not None:
            self.quotas.annotate(response, verdict)
        return response

    def _answer(self, request: Request) -> Response:
        fault = self.engine.fault()
        if fault is not None:
            error = self.errors.faults[fault.status]()
            error.retry_after = fault.retry_after
            return self.render_error(error)
        try:
            endpoint, args = self.routes.bind_to_environ(request.environ).match()
            return self.handlers[endpoint](request, **args)
        except ApiError as error:
            return self.render_error(error)
        except (NotFound, MethodNotAllowed):
            return self.render_error(self.errors.no_route(f"{request.method} {request.path}"))
        except (MalformedBody, HTTPException) as exc:
            message = exc.description if isinstance(exc, HTTPException) else str(exc)
            return self.render_error(self.errors.malformed(message or "bad request"))
