"""HTTP glue every emulator shares: latency, injected faults, and errors in the cloud's format."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from provisioner.sandbox.engine import Engine


@dataclass
class ApiError(Exception):
    """What a cloud's models reject a request with; its responses module renders it."""

    status: int  # HTTP status
    code: str  # the cloud's error code: OperationNotAllowed, FAILED_PRECONDITION, ...
    message: str
    retry_after: float | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status=status, headers=headers, content_type="application/json")


def request_json(request: Request) -> dict[str, Any]:
    if not request.data:
        return {}
    try:
        body = json.loads(request.data)
    except ValueError as exc:
        raise ApiError(400, "InvalidRequestContent", f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "InvalidRequestContent", "the body must be a JSON object")
    return body


Handler = Callable[..., Response]
ErrorRenderer = Callable[[ApiError], Response]


class EmulatorApp:
    """A WSGI app: routes to handlers, sleeps `latency` per request, answers a share with faults.

    `faults` maps the engine's drawn fault status (429 or 503) to the cloud's own error.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        routes: Map,
        handlers: dict[str, Handler],
        render_error: ErrorRenderer,
        faults: dict[int, ApiError],
        latency: float = 0.0,
    ):
        self.engine = engine
        self.routes = routes
        self.handlers = handlers
        self.render_error = render_error
        self.faults = faults
        self.latency = latency

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self.respond(Request(environ))(environ, start_response)

    def respond(self, request: Request) -> Response:
        if self.latency:
            time.sleep(self.latency)
        fault = self.engine.fault()
        if fault is not None:
            error = self.faults[fault.status]
            return self.render_error(
                ApiError(error.status, error.code, error.message, retry_after=fault.retry_after)
            )
        try:
            endpoint, args = self.routes.bind_to_environ(request.environ).match()
            return self.handlers[endpoint](request, **args)
        except ApiError as error:
            return self.render_error(error)
        except (NotFound, MethodNotAllowed) as exc:
            return self.render_error(
                ApiError(exc.code or 404, "NotFound", f"{request.method} {request.path}")
            )
        except HTTPException as exc:
            return self.render_error(ApiError(exc.code or 400, "BadRequest", exc.description or ""))


@dataclass
class RunningServer:
    server: BaseWSGIServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per request drowns the output
        pass


def serve_in_thread(app: Callable[..., Any], port: int = 0) -> RunningServer:
    """Serve `app` on 127.0.0.1 (never another interface) from a daemon thread."""
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name=f"sandbox:{server.server_port}", daemon=True)
    thread.start()
    return RunningServer(server, thread)
