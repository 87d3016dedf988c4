"""`provisioner sandbox serve`: one emulator per cloud on loopback, their addresses in DIR/endpoints.json."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from provisioner.drivers import ClusterRef
from provisioner.drivers.registry import EMULATORS, load_class
from provisioner.sandbox import Emulator
from provisioner.sandbox.endpoints import remove_endpoints, write_endpoints
from provisioner.sandbox.engine import Engine
from provisioner.sandbox.wire import RunningServer, serve_in_thread


@dataclass
class SandboxSettings:
    latency_ms: float = 0.0  # added to every request
    op_seconds: float = 0.0  # how long each pool operation takes
    fault_rate: float = 0.0  # share of requests answered 429 (with Retry-After) or 503
    seed: int | None = None  # for the fault draws, so a flaky run can be repeated


@dataclass
class Sandbox:
    """Running emulators, one per cloud in the capability table."""

    directory: Path
    settings: SandboxSettings
    engines: dict[str, Engine] = field(default_factory=dict)
    emulators: dict[str, Emulator] = field(default_factory=dict)
    servers: dict[str, RunningServer] = field(default_factory=dict)

    @property
    def endpoints(self) -> dict[str, str]:
        return {cloud: server.url for cloud, server in self.servers.items()}

    def start(self, clusters: Sequence[ClusterRef] = ()) -> Sandbox:
        """Serve every emulator; create `clusters`, each with a system pool the tool does not own."""
        for cloud, emulator_class in EMULATORS.items():
            # Faults start after seeding, so the seed itself never fails.
            engine = Engine(op_seconds=0.0, seed=self.settings.seed)
            emulator = load_class(emulator_class)(engine, self.settings.latency_ms / 1000)
            self.engines[cloud], self.emulators[cloud] = engine, emulator
            self.servers[cloud] = serve_in_thread(emulator.app)
        for cluster in clusters:
            self.emulators[cluster.cloud].add_cluster(cluster, self.servers[cluster.cloud].url)
        for engine in self.engines.values():
            engine.op_seconds = self.settings.op_seconds
            engine.fault_rate = self.settings.fault_rate
        write_endpoints(self.directory, self.endpoints)
        return self

    def stop(self) -> None:
        remove_endpoints(self.directory)
        for server in self.servers.values():
            server.stop()
        self.servers.clear()
