"""The client's CPU per cluster listing, per cloud: what each driver spends, through its SDK, to
list one cluster's pools (examples/fleet.yaml's clusters, their pools created in the sandbox).

Beside it, one kept-alive GET with Python's own http.client to the same sandbox: what an HTTP
request costs this interpreter at least. EKS lists node groups, then describes each (one request
per pool more); the others answer in one request. CPU is the calling thread's, so the in-process
emulators' work is not counted.
"""

from __future__ import annotations

import http.client
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.figures import Figure
from provisioner.compile import compile_file, desired_state
from provisioner.observe import Drivers
from provisioner.sandbox.server import Sandbox, SandboxSettings

FLEET = Path(__file__).resolve().parent.parent / "examples" / "fleet.yaml"
LISTINGS = 200


def _cpu_ms(action: object, runs: int = LISTINGS) -> float:
    for _ in range(20):  # connections, imports and caches warm
        action()  # type: ignore[operator]
    started = time.thread_time()
    for _ in range(runs):
        action()  # type: ignore[operator]
    return (time.thread_time() - started) / runs * 1000


def run() -> list[Figure]:
    compiled = compile_file(FLEET)
    sandbox = Sandbox(Path(tempfile.mkdtemp(prefix="provisioner-bench-listing-")), SandboxSettings()).start(
        [c.target for c in compiled.clusters]
    )
    try:
        drivers = Drivers(sandbox.directory)
        for cluster in compiled.clusters:
            for pool in cluster.pools:
                drivers(cluster.cloud.key).create_pool(cluster.target.ref, desired_state(pool))
        url = urlsplit(sandbox.servers["gke"].url)
        connection = http.client.HTTPConnection(url.hostname, url.port)

        def raw_get() -> None:
            connection.request("GET", "/")
            connection.getresponse().read()

        raw = _cpu_ms(raw_get)
        figures = []
        for cluster in compiled.clusters:
            ref, driver = cluster.target.ref, drivers(cluster.cloud.key)
            ours = _cpu_ms(lambda driver=driver, ref=ref: driver.list_pools(ref))
            figures.append(
                Figure(
                    f"client CPU per listing, {cluster.cloud.key.upper()} ({len(cluster.pools)} pools)",
                    round(ours, 2),
                    "ms",
                    round(raw, 2),
                    "one kept-alive GET with http.client",
                )
            )
        connection.close()
        return figures
    finally:
        sandbox.stop()
