"""`catalog serve`'s /api/pools with 50 concurrent clients: requests per second and p99 latency,
beside the same server answering a static JSON file of the same rows.

The server (uvicorn over create_app, as `catalog serve` runs it) is a child process, so the
clients' interpreter is not the server's. The static file is served by the same uvicorn process,
in front of the service app, so the gap is the catalog's own work per request: reading the pools
from the database and encoding them.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.bench_place import catalog
from bench.figures import Figure

CLIENTS = 50
REQUESTS_EACH = 10
CLUSTERS, POOLS = 100, 10  # 1,000 pools: a large fleet's catalog
STATIC = "/static/pools.json"


def _serve(database: str, static: Path, listener: socket.socket) -> None:
    import uvicorn
    from starlette.responses import FileResponse

    from provisioner.catalog.service import create_app
    from provisioner.catalog.store import Store

    service = create_app(Store(database))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == STATIC:
            await FileResponse(static, media_type="application/json")(scope, receive, send)
        else:
            await service(scope, receive, send)

    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[listener])


def _load(port: int, path: str) -> tuple[float, list[float]]:
    """CLIENTS clients, each on its own kept-alive connection, REQUESTS_EACH requests each:
    (requests per second, every request's seconds)."""
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS + 1)

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine = []
        start.wait()
        for _ in range(REQUESTS_EACH):
            began = time.perf_counter()
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            assert response.status == 200 and body, (response.status, body[:200])
            mine.append(time.perf_counter() - began)
        connection.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return len(latencies) / (time.perf_counter() - began), latencies


def _p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98]


def run() -> list[Figure]:
    directory = Path(tempfile.mkdtemp(prefix="provisioner-bench-serve-"))
    store = catalog(directory, CLUSTERS, POOLS)
    rows = store.live_pools()
    static = directory / "pools.json"
    static.write_bytes(json.dumps(rows).encode())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(2048)
    port = listener.getsockname()[1]
    server = multiprocessing.get_context("fork").Process(
        target=_serve, args=(str(store.url), static, listener), daemon=True
    )
    server.start()
    try:
        for path in ("/api/pools", STATIC):  # warm: imports, the first query, the file cache
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            connection.request("GET", path)
            assert connection.getresponse().read()
            connection.close()
        served_rate, served = _load(port, "/api/pools")
        static_rate, static_latencies = _load(port, STATIC)
    finally:
        server.terminate()
        server.join(timeout=10)
    name = f"catalog serve /api/pools ({len(rows):,} pools), {CLIENTS} concurrent clients"
    beside = "the same server, a static JSON file of the same rows"
    return [
        Figure(
            f"{name}: requests per second", round(served_rate, 1), "requests/s", round(static_rate, 1), beside
        ),
        Figure(
            f"{name}: p99 latency",
            round(_p99(served) * 1000),
            "ms",
            round(_p99(static_latencies) * 1000),
            beside,
        ),
    ]
