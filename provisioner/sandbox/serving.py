"""The sandbox's HTTP/1.1 server: kept-alive connections, each served by a kept thread, every
answer in one write.

Each emulator stands in for a remote API whose serving costs the tool nothing, yet here it shares
the machine's cores with the tool that the benches measure. So requests are parsed here, in a few
lines, not by http.server (whose header parsing goes through the email package) and werkzeug's
development server, which cost about 60% more CPU per request (a GKE listing's, bench `plan`) and
made the 300-cluster plan's wall time a third longer. The emulators stay WSGI apps, with
werkzeug's requests, routing and responses.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import queue
import re
import socket
import socketserver
import ssl
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_MAX_LINE = 65536  # bytes in the request line or in one header line
_MAX_HEADERS = 100
_LOCAL_ONLY = "127.0.0.1"
_SET_HERE = ("content-length", "connection", "date")  # response headers this server writes itself
_DECIMAL = re.compile(rb"[0-9]+")  # a Content-Length (RFC 9110 8.6): no sign, no 0x, no _
_HEX = re.compile(rb"[0-9A-Fa-f]+")  # a chunk size (RFC 9112 7.1)


class _BadRequest(Exception):
    """A request this server cannot read: answered 400, and the connection closed."""


class _Workers:
    """Daemon threads that serve one connection each at a time and then wait for the next: a
    thread started per connection costs more CPU than answering a request (a command's clients
    connect afresh on every run). A thread is started only when none is idle, so a connection
    never waits for another to close; threads are kept until the server stops, as many as
    connections were ever open at once. Daemon, so a connection left open never holds up an exit."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._idle = 0
        self._started = 0
        self._lock = threading.Lock()

    def run(self, work: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if start:
                self._started += 1
            else:
                self._idle -= 1  # that worker takes this work, or another idle one does
        self._work.put(work)
        if start:
            threading.Thread(target=self._serve, name="sandbox-connection", daemon=True).start()

    @property
    def idle(self) -> int:
        """Threads free for the next connection."""
        return self._idle

    def stop(self) -> None:
        """End every thread once its connection has closed (the server closes them all)."""
        with self._lock:
            for _ in range(self._started):
                self._work.put(None)
            self._started = self._idle = 0

    def _serve(self) -> None:
        while (work := self._work.get()) is not None:
            work()
            with self._lock:
                self._idle += 1


class _Server(socketserver.TCPServer):
    allow_reuse_address = True
    request_queue_size = 1024  # the benches open hundreds of connections at once

    def __init__(self, app: WsgiApp, port: int, tls: ssl.SSLContext | None = None):
        self.app = app
        self.tls = tls  # where given, each connection is TLS, its handshake in its worker's thread
        self.open_connections: set[socket.socket] = set()
        self.workers = _Workers()
        self._stopping = False
        self._connections_lock = threading.Lock()
        super().__init__((_LOCAL_ONLY, port), _Connection)

    def track(self, connection: socket.socket) -> bool:
        """Count a connection as open; False once the server is stopping (it is to be closed)."""
        with self._connections_lock:
            if not self._stopping:
                self.open_connections.add(connection)
            return not self._stopping

    def close_connections(self) -> None:
        """Close every open connection, and each one accepted from now on as it is taken up: a
        kept-alive connection would otherwise go on being answered by a stopped server."""
        with self._connections_lock:
            self._stopping = True
            closing = list(self.open_connections)
        for connection in closing:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.workers.run(lambda: self._serve_connection(request, client_address))

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            if self.tls is not None:
                try:
                    request = self.tls.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError):  # a client that hung up or spoke no TLS
                    return
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    @property
    def server_port(self) -> int:
        return int(self.server_address[1])


class _Connection(socketserver.StreamRequestHandler):
    """One client's kept-alive connection: requests answered in turn until it closes."""

    server: _Server
    timeout = 60  # seconds an idle kept-alive connection holds its thread
    # Nagle's algorithm would hold an answer back until the client's delayed ACK of the last.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        if not self.server.track(self.connection):
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)  # its first read ends it

    def finish(self) -> None:
        self.server.open_connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def handle(self) -> None:
        # An idle connection past the timeout, a client gone, or a stopped server: routine, silent.
        with contextlib.suppress(OSError):
            while self._answer_one():
                pass

    def _answer_one(self) -> bool:
        """Read one request and answer it; False once the connection is to close."""
        line = self.rfile.readline(_MAX_LINE + 1)
        if line in (b"\r\n", b"\n"):  # an empty line before a request is ignored (RFC 9112 2.2)
            line = self.rfile.readline(_MAX_LINE + 1)
        if not line:
            return False
        try:
            environ = self._environ(line)
        except _BadRequest as exc:
            self._send("400 Bad Request", [("Content-Type", "text/plain")], str(exc).encode(), close=True)
            return False
        status, headers, content = self._call(environ)
        asked_to_close = "close" in environ.get("HTTP_CONNECTION", "").lower()
        close = asked_to_close or environ["SERVER_PROTOCOL"] == "HTTP/1.0"
        self._send(status, headers, content, close, head=environ["REQUEST_METHOD"] == "HEAD")
        return not close

    def _environ(self, line: bytes) -> dict[str, Any]:
        if len(line) > _MAX_LINE:
            raise _BadRequest("the request line is too long")
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
            raise _BadRequest(f"not an HTTP/1.x request line: {line[:100]!r}")
        method, target, protocol = parts
        environ: dict[str, Any] = {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "REQUEST_URI": target,
            "RAW_URI": target,
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_PORT": self.client_address[1],
            "SERVER_NAME": _LOCAL_ONLY,
            "SERVER_PORT": str(self.server.server_port),
            "SERVER_PROTOCOL": protocol,
        }
        authority = None
        if target.startswith(("http://", "https://")):  # absolute form: its authority is the host
            absolute = urlsplit(target)
            authority = absolute.netloc
            target = absolute.path + (f"?{absolute.query}" if absolute.query else "")
        path, _, environ["QUERY_STRING"] = target.partition("?")
        # WSGI's strings hold the raw bytes, one character each (PEP 3333).
        environ["PATH_INFO"] = unquote_to_bytes(path).decode("latin-1")
        for name, value in self._headers():
            if "_" in name:  # else X-Foo_Bar could pose as X-Foo-Bar, as werkzeug guards
                continue
            key = name.upper().replace("-", "_")
            if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                key = f"HTTP_{key}"
            environ[key] = f"{environ[key]},{value}" if key in environ else value
        if authority is not None:  # over the Host header (RFC 9112 3.2.2)
            environ["HTTP_HOST"] = authority
        if protocol == "HTTP/1.1" and environ.get("HTTP_EXPECT", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = self._body(environ)
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)  # the body is read whole: its length is known
        return environ

    def _headers(self) -> list[tuple[str, str]]:
        headers = []
        while True:
            line = self.rfile.readline(_MAX_LINE + 1)
            if line in (b"\r\n", b"\n", b""):
                return headers
            if len(line) > _MAX_LINE or len(headers) == _MAX_HEADERS:
                raise _BadRequest("the request's headers are too long")
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon or not name or name != name.strip():  # folded lines included (RFC 9112 5.2)
                raise _BadRequest(f"not a header line: {line[:100]!r}")
            headers.append((name, value.strip()))

    def _body(self, environ: dict[str, Any]) -> bytes:
        """The whole body, read before answering, so that the next request starts the stream."""
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            return self._dechunked()
        length = environ.get("CONTENT_LENGTH", "").encode("latin-1")
        if length and not _DECIMAL.fullmatch(length):
            raise _BadRequest(f"Content-Length is not a number of bytes: {length[:100]!r}")
        return self.rfile.read(int(length or 0))

    def _dechunked(self) -> bytes:
        chunks = []
        while True:
            size_line = self.rfile.readline(_MAX_LINE + 1)
            digits = size_line.split(b";", 1)[0].strip()  # a chunk extension is ignored
            if not _HEX.fullmatch(digits):
                raise _BadRequest(f"not a chunk size: {size_line[:100]!r}")
            size = int(digits, 16)
            if size == 0:
                self._headers()  # trailers, unused
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline(_MAX_LINE + 1)  # the CRLF that ends the chunk

    def _call(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return lambda data: None  # every app here returns its body, none writes it

        try:
            chunks = self.server.app(environ, start_response)
            try:
                content = b"".join(chunks)
            finally:
                getattr(chunks, "close", lambda: None)()
        except Exception:  # a bug in an emulator: answer 500 rather than hang the client
            _log.error("an emulator failed:\n%s", traceback.format_exc())
            return "500 Internal Server Error", [("Content-Type", "text/plain")], b"emulator error"
        return started[0], started[1], content

    def _send(
        self, status: str, headers: list[tuple[str, str]], content: bytes, close: bool, head: bool = False
    ) -> None:
        """The answer in one write; to a HEAD request, the headers only, with the length the app
        gave (werkzeug's responses send no body to a HEAD, and give a GET's Content-Length)."""
        lines = [f"HTTP/1.1 {status}", f"Date: {formatdate(usegmt=True)}"]
        lines += [f"{k}: {v}" for k, v in headers if k.lower() not in _SET_HERE]
        given = [v for k, v in headers if k.lower() == "content-length"]
        lines.append(f"Content-Length: {given[0] if head and given else len(content)}")
        if close:
            lines.append("Connection: close")
        self.wfile.write("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (b"" if head else content))


@dataclass
class RunningServer:
    server: _Server
    thread: threading.Thread

    @property
    def url(self) -> str:
        scheme = "https" if self.server.tls is not None else "http"
        return f"{scheme}://{_LOCAL_ONLY}:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.server.close_connections()
        self.server.workers.stop()
        self.thread.join()


def serve_alone() -> None:
    """Tune this process, its sandbox started and seeded, for serving it and nothing else
    (`sandbox serve`, a bench's emulator process). Never in a process that also runs the tool.

    - The interpreter lock passes between threads every 20 ms, not 5: hundreds of connections'
      threads wake together once their latency has passed, and at 5 ms they take the lock from
      each other mid-request, about 15% more CPU for the same answers (bench `kube`).
    - What the process holds now (the seeded state, the imports) is kept out of full garbage
      collections: one that walked a 300-cluster sandbox paused every answer for 50-80 ms, a
      plan's listings all waiting on it (bench `plan`)."""
    sys.setswitchinterval(0.02)
    gc.freeze()


def serve_in_thread(app: WsgiApp, port: int = 0, tls: ssl.SSLContext | None = None) -> RunningServer:
    """Serve `app` on 127.0.0.1 (never another interface) from a daemon thread, over TLS with `tls`."""
    server = _Server(app, port, tls)
    thread = threading.Thread(target=server.serve_forever, name=f"sandbox:{server.server_port}", daemon=True)
    thread.start()
    return RunningServer(server, thread)


_log = logging.getLogger(__name__)
