"""`provisioner sandbox serve`: the three emulators on loopback, their addresses in DIR/endpoints.json."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from provisioner import hardware
from provisioner.drivers import ENDPOINTS_FILE
from provisioner.fleet import Cluster
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
    emulators: dict[str, object] = field(default_factory=dict)
    servers: dict[str, RunningServer] = field(default_factory=dict)

    @property
    def endpoints(self) -> dict[str, str]:
        return {cloud: server.url for cloud, server in self.servers.items()}

    def start(self, clusters: Sequence[Cluster] = ()) -> Sandbox:
        """Serve every emulator; create `clusters`, each with a system pool the tool does not own."""
        for cloud, profile in hardware.load().clouds.items():
            # Faults start after seeding, so the seed itself never fails.
            engine = Engine(op_seconds=0.0, seed=self.settings.seed)
            emulator = hardware.import_class(profile.emulator)(engine, self.settings.latency_ms / 1000)
            self.engines[cloud], self.emulators[cloud] = engine, emulator
            self.servers[cloud] = serve_in_thread(emulator.app)  # type: ignore[attr-defined]
        for cluster in clusters:
            self.emulators[cluster.cloud].add_cluster(cluster, self.servers[cluster.cloud].url)  # type: ignore[attr-defined]
        for engine in self.engines.values():
            engine.op_seconds = self.settings.op_seconds
            engine.fault_rate = self.settings.fault_rate
        self.directory.mkdir(parents=True, exist_ok=True)
        # Written whole then renamed, so a command starting meanwhile never reads half a file.
        partial = self.directory / f".{ENDPOINTS_FILE}.partial"
        partial.write_text(json.dumps(self.endpoints, indent=2) + "\n", encoding="utf-8")
        partial.replace(self.directory / ENDPOINTS_FILE)
        return self

    def stop(self) -> None:
        (self.directory / ENDPOINTS_FILE).unlink(missing_ok=True)
        for server in self.servers.values():
            server.stop()
        self.servers.clear()
