"""`provisioner catalog serve`: the catalog, read-only, over HTTP: a JSON API, Prometheus metrics
and a page a person reads at a glance.

FastAPI (on Starlette, served by uvicorn), not bare Starlette: the project already depends on
pydantic, so FastAPI adds little, and it turns each route's typed query parameters into both the
OpenAPI document (/openapi.json) and the 422 answers for bad parameters, from one declaration.
Bare Starlette would need both written by hand and kept in step with the routes.

Rules every request meets, in an ASGI middleware in front of the routes:
- read-only: a method other than GET or HEAD is 405 (HEAD is answered as GET, without the body);
- with a token (`--token` / PROVISIONER_CATALOG_TOKEN, required to bind beyond loopback), every
  request carries it, as `Authorization: Bearer T` or as the password of HTTP Basic (so a browser
  asks for it), compared in constant time (hmac.compare_digest); else 401;
- an empty query parameter (a form's "any") is no filter; an unknown one is a 422, not ignored,
  and so is one given twice (each takes one value: the last would win unseen).
The database URL is never shown but through `redacted`; a database that fails answers 503 with
the redacted reason, never a 500 with a traceback.

/api/pools and /api/place work from the store's snapshot of the live pools, read again only when
the catalog's change counter moved (one query per request): /api/pools keeps each answer encoded,
per filter, with a strong ETag for If-None-Match. The routes are sync functions, so their database
work runs in Starlette's threadpool, never on the event loop; dependencies that only parse are
async, so a request does not hop threads for them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import hmac
import ipaddress
import signal
import socket
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlencode

import jinja2
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy import exc, text
from starlette.exceptions import HTTPException

from provisioner import render
from provisioner.capacity import ISOLATION_LEVELS
from provisioner.catalog import metrics, openapi, overview
from provisioner.catalog.database import reason_of
from provisioner.catalog.schemas import ALLOCATION_MODES, SHARINGS
from provisioner.catalog.store import Store
from provisioner.catalog.url import CatalogError, redacted
from provisioner.catalog.views import capacity_rows, drift_lines, nodes_text, slicing_text
from provisioner.drivers.registry import DRIVERS
from provisioner.errors import ProvisionerError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

READ_METHODS = ("GET", "HEAD")
LOOPBACK_NAMES = ("localhost",)
REALM = "provisioner catalog"

Cloud = Literal[tuple(DRIVERS)]  # type: ignore[valid-type]
Sharing = Literal[SHARINGS]  # type: ignore[valid-type]
Isolation = Literal[ISOLATION_LEVELS]  # type: ignore[valid-type]
AllocationMode = Literal[ALLOCATION_MODES]  # type: ignore[valid-type]


class BadQuery(Exception):
    """A query parameter no route takes."""


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """The rules every request meets before a route sees it (see the module docstring)."""

    def __init__(self, app: ASGIApp, token: str | None):
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.token is not None and not self._authorised(scope):
            challenge = [
                (b"www-authenticate", f'Basic realm="{REALM}", charset="UTF-8"'.encode()),
                (b"www-authenticate", f'Bearer realm="{REALM}"'.encode()),
            ]
            await _answer(send, 401, {"error": "a valid token is required"}, challenge)
            return
        if scope["method"] not in READ_METHODS:
            message = {"error": f"the catalog is read-only: {scope['method']} is not allowed"}
            await _answer(send, 405, message, [(b"allow", b"GET, HEAD")])
            return
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        scope = {**scope, "query_string": urlencode([(k, v) for k, v in pairs if v != ""]).encode()}
        if scope["method"] == "HEAD":
            await self.app({**scope, "method": "GET"}, receive, _without_body(send))
            return
        await self.app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, credentials = header.partition(b" ")
        given = b""
        if scheme.lower() == b"bearer":
            given = credentials.strip()
        elif scheme.lower() == b"basic":
            try:
                given = base64.b64decode(credentials.strip(), validate=True).partition(b":")[2]
            except binascii.Error:
                given = b""
        assert self.token is not None
        return hmac.compare_digest(given, self.token)  # constant time: the token is not guessed bytewise


def _without_body(send: Send) -> Send:
    async def send_head(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return send_head


async def _answer(send: Send, status: int, document: Any, headers: list[tuple[bytes, bytes]]) -> None:
    body = JSONResponse(document).body
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _known_parameters_only(request: Request) -> None:
    """A misspelt filter (?clod=aks) would list everything: name it instead."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    allowed = sorted(_query_names(dependant))
    unknown = sorted(set(request.query_params) - set(allowed))
    if unknown:
        takes = f"it takes {', '.join(allowed)}" if allowed else "it takes none"
        raise BadQuery(f"unknown query parameter {', '.join(map(repr, unknown))}: {takes}")
    given = [name for name, _ in request.query_params.multi_items()]
    repeated = sorted({name for name in given if given.count(name) > 1})
    if repeated:
        names = ", ".join(map(repr, repeated))
        raise BadQuery(f"query parameter {names} given more than once: it takes one value")


def _query_names(dependant: Any) -> set[str]:
    """The query parameters a route takes, its dependencies' included."""
    names = {p.alias for p in dependant.query_params}
    for inner in dependant.dependencies:
        names |= _query_names(inner)
    return names


async def _pool_filter(
    *,
    cloud: Annotated[Cloud | None, Query(description="Only this cloud.")] = None,
    cluster: Annotated[str | None, Query(max_length=200, description="Only this cluster.")] = None,
    gpu: Annotated[str | None, Query(max_length=100, description="GPU model, e.g. `A100 80GB`.")] = None,
    mig: Annotated[str | None, Query(max_length=32, description="MIG profile, e.g. `1g.10gb`.")] = None,
    sharing: Annotated[Sharing | None, Query(description="How a GPU is shared.")] = None,
    isolation: Annotated[Isolation | None, Query(description="What a slice isolates.")] = None,
    min_free_slices: Annotated[
        int | None,
        Query(ge=0, description="At least this many free slices (in the pool's unit) to its maximum size."),
    ] = None,
    allocation_mode: Annotated[
        AllocationMode | None,
        Query(description="How GPUs reach pods: the device plugin, or DRA (ResourceClaims)."),
    ] = None,
) -> overview.PoolFilter:
    return overview.PoolFilter(cloud, cluster, gpu, mig, sharing, isolation, min_free_slices, allocation_mode)


PoolQuery = Annotated[overview.PoolFilter, Depends(_pool_filter)]
ClusterQuery = Annotated[str | None, Query(max_length=200, description="Only this cluster.")]


def create_app(
    store: Store, token: str | None = None, *, stale_after: timedelta = overview.STALE_AFTER
) -> ASGIApp:
    """The service over `store`; every request must carry `token` where one is given."""
    app = FastAPI(
        title="provisioner catalog",
        summary="Fractional-GPU node pools and their capacity, as the nightly sync found them. Read-only.",
        version=_version(),
        docs_url=None,  # Swagger UI loads its scripts from a CDN; /openapi.json is the document
        redoc_url=None,
        dependencies=[Depends(_known_parameters_only)],
    )
    generated = app.openapi  # FastAPI's document of the routes' declarations

    @functools.cache
    def document() -> dict[str, Any]:
        return openapi.exact(generated(), guarded=token is not None)

    app.openapi = document  # type: ignore[method-assign]  # /openapi.json serves it
    registry = metrics.registry_for(store)
    page = _templates().get_template("catalog-page.html.j2")

    @app.exception_handler(RequestValidationError)
    async def bad_parameters(request: Request, error: RequestValidationError) -> Response:
        problems = [_problem(e) for e in error.errors()]
        return _bad_request(request, "; ".join(problems), problems)

    @app.exception_handler(BadQuery)
    async def unknown_parameter(request: Request, error: BadQuery) -> Response:
        return _bad_request(request, str(error), [str(error)])

    @app.exception_handler(HTTPException)
    async def not_routed(request: Request, error: HTTPException) -> Response:
        # the router's own 404 (a path no route matches, e.g. with a newline): the API's shape
        message = f"nothing at {request.scope['path']!r}"  # the path as routed: url.path drops newlines
        return JSONResponse({"error": message}, error.status_code, error.headers)

    @app.exception_handler(exc.SQLAlchemyError)
    async def database_failed(request: Request, error: exc.SQLAlchemyError) -> Response:
        message = str(CatalogError(store.url, "cannot read the catalog", reason_of(error)))
        return JSONResponse({"error": message}, status_code=503)

    @app.get("/healthz", summary="200 when the catalog's database answers, else 503.")
    def healthz() -> Response:
        try:
            with store.reads.connect() as connection:
                connection.execute(text("SELECT 1"))
        except exc.SQLAlchemyError as error:
            message = str(CatalogError(store.url, "cannot connect", reason_of(error)))
            return JSONResponse({"status": "unavailable", "error": message}, status_code=503)
        return JSONResponse({"status": "ok", "catalog": redacted(store.url)})

    @app.get("/api/clusters", summary="Every cluster in the catalog, with its last sync.")
    def clusters() -> Response:
        return JSONResponse(store.clusters())

    @app.get("/api/pools", summary="The live pools: exactly what `catalog ls --json` prints, filtered.")
    def pools(wanted: PoolQuery, request: Request) -> Response:
        body, etag = store.snapshot().derived(EncodedPools).get(wanted)
        if _names_etag(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers={"etag": etag})
        return Response(body, media_type="application/json", headers={"etag": etag})

    @app.get(
        "/api/pools/{cluster_and_pool:path}",
        summary="One live pool: /api/pools/CLUSTER/POOL (a discovered cluster's name holds '/').",
    )
    def one_pool(cluster_and_pool: str) -> Response:
        cluster, _, pool = cluster_and_pool.rpartition("/")  # pool names never hold '/'
        found = [p for p in store.live_pools(cluster=cluster) if p["pool"] == pool] if cluster else []
        if not found:
            return JSONResponse({"error": f"no live pool {pool!r} in cluster {cluster!r}"}, status_code=404)
        return JSONResponse(found[0])

    @app.get(
        "/api/capacity", summary="GPUs and slices per pool, now and at maximum: `catalog inspect --json`."
    )
    def capacity(cluster: ClusterQuery = None) -> Response:
        return JSONResponse(capacity_rows(store.live_pools(cluster=cluster)))

    @app.get("/api/drift", summary="Pools that differ from the fleet: `catalog drift --json`.")
    def drift(cluster: ClusterQuery = None) -> Response:
        return JSONResponse(store.drift(cluster))

    @app.get("/api/place", summary="Where a fractional-GPU request lands: `place --json`.")
    def place(
        *,
        mig: Annotated[str | None, Query(max_length=32, description="A MIG profile, e.g. 1g.10gb.")] = None,
        gpu_memory: Annotated[str | None, Query(max_length=32, description="GPU memory, e.g. 4GB.")] = None,
        gpus: Annotated[int | None, Query(ge=1, description="Whole GPUs.")] = None,
        isolation: Annotated[Isolation | None, Query(description="The least isolation.")] = None,
        gpu: Annotated[str | None, Query(max_length=100, description="Only this GPU model.")] = None,
        cloud: Annotated[Cloud | None, Query(description="Only this cloud.")] = None,
        cluster: ClusterQuery = None,
        pool: Annotated[str | None, Query(max_length=200, description="Only this pool.")] = None,
    ) -> Response:
        asked = {"mig": mig, "gpu_memory": gpu_memory, "gpus": gpus, "isolation": isolation}
        asked |= {"gpu": gpu, "cloud": cloud, "cluster": cluster, "pool": pool}
        return _placement(store, {k: v for k, v in asked.items() if v is not None})

    @app.get("/metrics", summary="Prometheus metrics: per pool and per cluster.")
    def prometheus() -> Response:
        return Response(metrics.exposition(registry), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", response_class=HTMLResponse, summary="The capacity page.")
    def home(wanted: PoolQuery) -> Response:
        return HTMLResponse(page.render(_page_context(store, wanted, stale_after)))

    return Guard(app, token)


class EncodedPools:
    """/api/pools' answers for one snapshot of the catalog, per filter, with their ETags: encoding
    a thousand rows costs far more than sending them. The answers last asked for are kept, up to
    KEPT_BYTES: query strings are the clients' to vary."""

    KEPT_BYTES = 64 * 2**20

    def __init__(self, pools: Sequence[dict[str, Any]]):
        self.pools = pools
        self._bodies: OrderedDict[overview.PoolFilter, tuple[bytes, str]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # one thread encodes at a time; the others wait, then reuse it

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def get(self, wanted: overview.PoolFilter) -> tuple[bytes, str]:
        """The JSON body (as JSONResponse encodes the filtered rows) and its strong ETag."""
        with self._lock:
            found = self._bodies.get(wanted)
            if found is None:
                body = JSONResponse(overview.filter_pools(self.pools, wanted)).body
                found = (body, f'"{hashlib.blake2b(body, digest_size=16).hexdigest()}"')
                self._bodies[wanted], self._bytes = found, self._bytes + len(body)
                while self._bytes > self.KEPT_BYTES and len(self._bodies) > 1:
                    _, (dropped, _) = self._bodies.popitem(last=False)
                    self._bytes -= len(dropped)
            self._bodies.move_to_end(wanted)
            return found


def _names_etag(if_none_match: str | None, etag: str) -> bool:
    """If-None-Match lists `etag` (weakly compared, RFC 9110 13.1.2), or is `*`."""
    if if_none_match is None:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in tags or etag in tags


def _problem(error: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in error["loc"][1:]) or "request"
    given = f" (got {error['input']!r})" if "input" in error and error["input"] is not None else ""
    return f"{where}: {error['msg']}{given}"


def _bad_request(request: Request, message: str, problems: list[str]) -> Response:
    if request.url.path.startswith("/api/") or request.url.path in ("/metrics", "/healthz"):
        return JSONResponse({"error": message, "problems": problems}, status_code=422)
    text_ = _templates().get_template("catalog-error.html.j2").render(problems=problems)
    return HTMLResponse(text_, status_code=422)


def _placement(store: Store, asked: dict[str, Any]) -> Response:
    """`place --json` over HTTP: the same request, the same choice, the same JSON. A request that
    is not one is a 422; one nothing fits, a 404 naming the closest pools."""
    from provisioner.errors import BadRequest, NoPlacement
    from provisioner.placement import Request, place

    try:
        chosen = place(store, Request(**asked))
    except BadRequest as error:
        return JSONResponse({"error": str(error)}, status_code=422)
    except NoPlacement as error:
        return JSONResponse({"error": str(error), "closest": error.closest}, status_code=404)
    return JSONResponse(chosen.json())


def _version() -> str:
    from provisioner import __version__

    return __version__


_ENVIRONMENT: jinja2.Environment | None = None


def _templates() -> jinja2.Environment:
    """HTML templates beside the manifests' (render.TEMPLATE_DIRS), escaped: every value shown
    comes from a cloud or a user."""
    global _ENVIRONMENT  # noqa: PLW0603 - built once per process
    if _ENVIRONMENT is None:
        _ENVIRONMENT = jinja2.Environment(
            loader=jinja2.FileSystemLoader([str(d) for d in render.TEMPLATE_DIRS if d.is_dir()]),
            undefined=jinja2.StrictUndefined,
            autoescape=True,
        )
    return _ENVIRONMENT


def _page_context(store: Store, wanted: overview.PoolFilter, stale_after: timedelta) -> dict[str, Any]:
    moment = datetime.now(UTC)
    every_pool = store.live_pools()
    shown = overview.filter_pools(every_pool, wanted)
    clusters = store.clusters()
    stale = {c["cluster"] for c in clusters if overview.is_stale(c, moment, stale_after)}
    drift = store.drift()
    drifted = {(d["cluster"], d["pool"]) for d in drift}
    bars = overview.capacity_bars(shown)
    gpu_pools = [p for p in every_pool if p["gpu"]]
    return {
        "now": moment.isoformat(timespec="seconds"),
        "catalog": redacted(store.url),
        "clusters": [{**c, "stale": c["cluster"] in stale} for c in clusters],
        "stale_hours": round(stale_after.total_seconds() / 3600),
        "rows": [
            {
                **p,
                "slicing": slicing_text(p) if p["gpu"] else "-",
                "nodes": nodes_text(p),
                "slices_now": overview.slices_now(p) if p["gpu"] else None,
                "slices_max": overview.slices_max(p) if p["gpu"] else None,
                "allocated": overview.allocated_slices(p),
                "free": overview.free_slices(p),
                "drift": (p["cluster"], p["pool"]) in drifted,
                "stale": p["cluster"] in stale,
            }
            for p in shown
        ],
        "total_pools": len(every_pool),
        "chart": overview.chart_rows(bars),
        "chart_height": 50 + len(bars) * overview.CHART_ROW_HEIGHT,
        "label_width": overview.CHART_LABEL_WIDTH,
        "bar_width": overview.CHART_BAR_WIDTH,
        "drift": drift_lines(drift),
        "wanted": wanted,
        "choices": {
            "cloud": sorted({c["cloud"] for c in clusters}),
            "cluster": [c["cluster"] for c in clusters],
            "gpu": sorted({p["gpu"] for p in gpu_pools}),
            "mig": sorted({p["mig"] for p in gpu_pools if p["mig"]}),
            "sharing": [s for s in SHARINGS if any(p["sharing"] == s for p in gpu_pools)],
            "isolation": [i for i in ISOLATION_LEVELS if any(p["isolation"] == i for p in gpu_pools)],
        },
    }


def serve(store: Store, host: str, port: int, token: str | None, announce: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM; `announce` gets the address once it listens (port 0: any)."""
    import uvicorn

    socket_ = listening(host, port)
    bound = socket_.getsockname()[1]
    shown = f"[{host}]" if socket_.family == socket.AF_INET6 else host
    announce(f"http://{shown}:{bound}/")
    config = uvicorn.Config(create_app(store, token), log_level="warning", access_log=False)
    # uvicorn shuts down gracefully on SIGINT or SIGTERM, then raises the signal again for the
    # handler it found: this one, so the command ends with exit 0, not a KeyboardInterrupt.
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, _stopped)
    with contextlib.suppress(_Stopped):
        uvicorn.Server(config).run(sockets=[socket_])


def listening(host: str, port: int) -> socket.socket:
    """A TCP socket listening on host:port (0: any free port), for uvicorn to serve on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on such sockets, else Nagle holds each
    # answer's body behind its headers for a kept-alive client's delayed ACK (40 ms a request).
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        raise ServeError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    listener.listen(2048)  # connections made once announced wait in the backlog for uvicorn
    return listener


class _Stopped(Exception):
    pass


def _stopped(*_: Any) -> None:
    raise _Stopped


class ServeError(ProvisionerError):
    """The service cannot start: its address is taken, or not this machine's."""
