"""A sandbox of a large fleet on every cloud, its pools created, in a child process, with the
clouds' quotas switched on once the pools exist (`sandbox serve --quotas` as a user starts it,
but for the pools: making 12,000 of them through the quotas would take the benchmark an hour).

The pools are created through the tool's own drivers, all at once with no latency and no quotas,
so the clouds hold what `apply` would have made; the quotas start afresh after that.
"""

from __future__ import annotations

import json
import tempfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

from bench import world
from provisioner.compile import CompiledFleet, compile_file, desired_state
from provisioner.observe import Drivers
from provisioner.sandbox.endpoints import write_endpoints
from provisioner.sandbox.quotas import QUOTAS_PATH, QuotaSettings
from provisioner.sandbox.server import Sandbox, SandboxSettings
from provisioner.sandbox.serving import serve_alone

CREATING_AT_ONCE = 64  # threads creating pools: the emulators', not the network's, pace


class FleetWorld(world.BenchWorld):
    """A BenchWorld of every cloud whose child also takes commands: quotas on, latency."""

    def ask(self, command: object) -> object:
        self.control.send(command)
        return self.control.recv()

    def quotas_on(self, scale: float = 1.0, speedup: float = 1.0) -> None:
        """The clouds' quotas from now on, their buckets full and their counts at zero."""
        self.ask(("quotas", scale, speedup))

    def latency(self, milliseconds: float) -> None:
        self.ask(("latency", milliseconds))

    def quota_reports(self) -> dict[str, dict]:
        """Each emulator's GET /sandbox/quotas: requests counted and throttled, by scope."""
        endpoints = json.loads((self.sandbox_dir / "endpoints.json").read_text(encoding="utf-8"))
        reports = {}
        for cloud in ("aks", "gke", "eks", "ack"):
            with urllib.request.urlopen(endpoints[cloud] + QUOTAS_PATH, timeout=30) as answer:
                reports[cloud] = json.loads(answer.read())
        return reports

    def stop(self) -> None:
        self.ask(("stop",))
        self.process.join(timeout=60)


def start(fleet_text: str, *, create_pools: bool = True) -> FleetWorld:
    directory = Path(tempfile.mkdtemp(prefix="provisioner-bench-fleet-"))
    fleet = directory / "fleet.yaml"
    fleet.write_text(fleet_text, encoding="utf-8")
    compiled = compile_file(fleet)
    process, parent = world.fork_sandbox(_serve, directory=directory / "sandbox", compiled=compiled)
    started = FleetWorld(directory, fleet, compiled, process, parent)
    if create_pools:
        _create_pools(started)
    return started


def _create_pools(world: FleetWorld) -> None:
    drivers = Drivers(world.sandbox_dir)
    drivers.prepare([c.target for c in world.compiled.clusters])
    work = [(c.target.ref, desired_state(p)) for c in world.compiled.clusters for p in c.pools]
    with ThreadPoolExecutor(max_workers=CREATING_AT_ONCE) as pool:
        list(pool.map(lambda item: drivers(item[0].cloud).create_pool(*item), work))


def _serve(*, directory: Path, compiled: CompiledFleet, control: Connection) -> None:
    sandbox = Sandbox(directory, SandboxSettings()).start([c.target for c in compiled.clusters])
    serve_alone()
    control.send("ready")
    while True:
        command, *args = control.recv()
        if command == "stop":
            control.send("done")
            break
        if command == "quotas":
            settings = QuotaSettings(*args)
            for emulator in sandbox.emulators.values():
                emulator.enforce_quotas(settings)
            written = {**sandbox.endpoints, "quotas": {"scale": settings.scale, "speedup": settings.speedup}}
            write_endpoints(directory, written)
        if command == "latency":
            for emulator in sandbox.emulators.values():
                emulator.app.latency = args[0] / 1000  # type: ignore[attr-defined]
            sandbox.kube.app.latency = args[0] / 1000  # type: ignore[union-attr]
        control.send("done")
    sandbox.stop()
