"""HTTP glue every emulator shares: latency, injected faults, and errors in the cloud's format.

Cloud-neutral: what each cloud answers (its error codes, its wire format) is that cloud's own
`exceptions` and `responses`; this module only knows that an error has a status and a code.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from provisioner.sandbox.engine import Engine


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
    """A WSGI app: routes to handlers, sleeps `latency` per request, answers a share with faults,
    and renders every ApiError in the cloud's format (`render_error`)."""

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

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self.respond(Request(environ))(environ, start_response)

    def respond(self, request: Request) -> Response:
        if self.latency:
            time.sleep(self.latency)
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
        # A kept-alive connection would go on being answered by a stopped server.
        for connection in list(self.server.open_connections):  # type: ignore[attr-defined]
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self.thread.join()


class _KeepAliveHandler(WSGIRequestHandler):
    """HTTP/1.1 with kept-alive connections, as the clouds' front ends serve: werkzeug's own
    handler closes every connection, so each client request would pay a new one."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: Nagle's algorithm would hold the body back until the
    # client's delayed ACK, 40 ms later, on every kept-alive request.
    disable_nagle_algorithm = True
    timeout = 60  # seconds an idle kept-alive connection holds its thread

    def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per request drowns the output
        pass

    def log_error(self, format: str, *args: Any) -> None:
        if format.startswith("Request timed out"):  # an idle kept-alive connection closed: routine
            return
        super().log_error(format, *args)

    def setup(self) -> None:
        super().setup()
        self.server.open_connections.add(self.connection)  # type: ignore[attr-defined]

    def finish(self) -> None:
        self.server.open_connections.discard(self.connection)  # type: ignore[attr-defined]
        super().finish()

    def run_wsgi(self) -> None:
        if self.headers.get("Expect", "").lower().strip() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        environ = self.make_environ()
        stream = environ["wsgi.input"]
        # The whole body is read before answering, so the next request line starts the stream.
        if environ.get("wsgi.input_terminated"):
            body = stream.read()
        else:
            body = stream.read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        environ.pop("wsgi.input_terminated", None)
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return lambda data: None  # every app here returns its body, none writes it

        try:
            chunks = self.server.app(environ, start_response)  # type: ignore[attr-defined]
            try:
                content = b"".join(chunks)
            finally:
                getattr(chunks, "close", lambda: None)()
        except Exception:  # a bug in an emulator: answer 500 rather than hang the client
            self.server.log("error", "an emulator failed:\n%s", traceback.format_exc())  # type: ignore[attr-defined]
            started[:] = ["500 Internal Server Error", [("Content-Type", "text/plain")]]
            content = b"emulator error"
        code, _, reason = str(started[0]).partition(" ")
        self.send_response(int(code), reason)
        headers = [(k, v) for k, v in started[1] if k.lower() not in ("content-length", "connection")]
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(content)))
        try:
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(content)
            self.wfile.flush()
        except (ConnectionError, TimeoutError):  # the client left: nothing to answer, no traceback
            self.close_connection = True


def serve_in_thread(app: Callable[..., Any], port: int = 0) -> RunningServer:
    """Serve `app` on 127.0.0.1 (never another interface) from a daemon thread."""
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=_KeepAliveHandler)
    server.open_connections = set()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, name=f"sandbox:{server.server_port}", daemon=True)
    thread.start()
    return RunningServer(server, thread)
