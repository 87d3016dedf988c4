"""`provisioner sandbox serve`: one emulator per cloud on loopback, their addresses in DIR/endpoints.json,
and a Kubernetes API per seeded cluster (on one more port), its contexts in DIR/kubeconfig."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from provisioner.sandbox import EMULATORS, ClusterAddress, Emulator, SeededCluster
from provisioner.sandbox.endpoints import remove_endpoints, write_endpoints
from provisioner.sandbox.engine import Engine
from provisioner.sandbox.kube import KUBECONFIG_FILE, SCALE_DOWN_DELAY, SCAN_INTERVAL, KubeEmulator
from provisioner.sandbox.kube.tls import make_certificate
from provisioner.sandbox.quotas import QuotaSettings
from provisioner.sandbox.serving import RunningServer, serve_in_thread
from provisioner.sandbox.versions import DEFAULT_KUBERNETES_VERSION, Release, parse_release


@dataclass
class SandboxSettings:
    latency_ms: float = 0.0  # added to every request
    op_seconds: float = 0.0  # how long each pool operation takes
    fault_rate: float = 0.0  # share of requests answered 429 (with Retry-After) or 503
    seed: int | None = None  # for the fault draws, so a flaky run can be repeated
    scan_interval: float = SCAN_INTERVAL  # seconds between the clusters' autoscaler scans
    scale_down_delay: float = SCALE_DOWN_DELAY  # seconds a node is idle before the autoscaler removes it
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION  # X.Y[.Z] every seeded cluster runs ...
    kubernetes_versions: Mapping[str, str] = field(default_factory=dict)  # ... but these, by fleet name
    quotas: bool = False  # enforce each cloud's published API quotas (sandbox/quotas.py), after seeding
    quota_scale: float = 1.0  # every quota's count and refill rate multiplied by it
    quota_speedup: float = 1.0  # every quota's refill rate multiplied, and window length divided, by it


@dataclass(frozen=True)
class Seeded:
    """A seeded cluster as the emulators hold it: the fleet's name, cloud and address, and the
    Kubernetes version it runs (major.minor.patch), which its API server reports in /version."""

    name: str
    cloud: str
    ref: ClusterAddress
    kubernetes_version: str


@dataclass
class Sandbox:
    """Running emulators, one per cloud in the capability table, and the clusters' Kubernetes API
    (`kube`, served as endpoint "kube")."""

    directory: Path
    settings: SandboxSettings
    engines: dict[str, Engine] = field(default_factory=dict)
    emulators: dict[str, Emulator] = field(default_factory=dict)
    servers: dict[str, RunningServer] = field(default_factory=dict)
    kube: KubeEmulator | None = None
    seeded: dict[str, Seeded] = field(default_factory=dict)  # by fleet name

    @property
    def kubeconfig(self) -> Path:
        return self.directory / KUBECONFIG_FILE

    @property
    def endpoints(self) -> dict[str, str]:
        return {cloud: server.url for cloud, server in self.servers.items()}

    def start(self, clusters: Sequence[SeededCluster] = ()) -> Sandbox:
        """Serve every emulator; create `clusters`, each with a system pool the tool does not own,
        and serve each one's Kubernetes API under its fleet name, written to DIR/kubeconfig."""
        releases = self._releases(clusters)  # refused before anything is served
        quotas = QuotaSettings(self.settings.quota_scale, self.settings.quota_speedup)  # ... as these are
        for cloud, emulator_class in EMULATORS.items():
            # Faults start after seeding, so the seed itself never fails.
            engine = Engine(op_seconds=0.0, seed=self.settings.seed)
            emulator = _load(emulator_class)(engine, self.settings.latency_ms / 1000)
            self.engines[cloud], self.emulators[cloud] = engine, emulator
            self.servers[cloud] = serve_in_thread(emulator.app)
        # Injected faults are the clouds' (429/503, as their APIs throttle); the Kubernetes API draws none.
        self.kube = KubeEmulator(
            Engine(seed=self.settings.seed),
            self.settings.latency_ms / 1000,
            self.settings.scan_interval,
            self.settings.scale_down_delay,
        )
        for cluster in clusters:
            emulator = self.emulators[cluster.cloud]
            release = emulator.kubernetes_versions.resolve(releases.get(cluster.name, releases[""]))
            emulator.add_cluster(cluster.ref, self.servers[cluster.cloud].url, release)
            seeded = Seeded(cluster.name, cluster.cloud, cluster.ref, str(release))
            self.seeded[cluster.name] = seeded
            self.kube.add_cluster(seeded, emulator)
        certificate = make_certificate()  # an API server speaks TLS: kubectl sends its token only so
        self.servers["kube"] = serve_in_thread(self.kube.app, tls=certificate.context)
        self.kube.write_kubeconfig(self.directory, self.servers["kube"].url, certificate.ca_pem)
        for engine in self.engines.values():
            engine.op_seconds = self.settings.op_seconds
            engine.fault_rate = self.settings.fault_rate
        self.kube.start_autoscaler()
        written: dict[str, object] = dict(self.endpoints)
        if self.settings.quotas:  # like faults, after seeding: the seed itself is never throttled
            for emulator in self.emulators.values():
                emulator.enforce_quotas(quotas)
            written["quotas"] = {"scale": quotas.scale, "speedup": quotas.speedup}  # the tool paces by it
        write_endpoints(self.directory, written)
        return self

    def _releases(self, clusters: Sequence[SeededCluster]) -> dict[str, Release]:
        """The release of each cluster the settings name, and under "" every other's; ValueError
        for a version that is none, or a name no seeded cluster has."""
        named = {name: parse_release(text) for name, text in self.settings.kubernetes_versions.items()}
        unknown = sorted(set(named) - {cluster.name for cluster in clusters})
        if unknown:
            seeded = ", ".join(sorted(cluster.name for cluster in clusters)) or "none"
            raise ValueError(
                f"a Kubernetes version is set for {', '.join(unknown)}, which is no seeded cluster "
                f"(seeded: {seeded})"
            )
        return {"": parse_release(self.settings.kubernetes_version), **named}

    def stop(self) -> None:
        if self.kube is not None:
            self.kube.stop_autoscaler()
        remove_endpoints(self.directory)
        self.kubeconfig.unlink(missing_ok=True)
        # Each server notices a shutdown only at its next poll (half a second): stop them together.
        stopping = [threading.Thread(target=server.stop) for server in self.servers.values()]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        self.servers.clear()


def _load(path: str) -> type[Emulator]:
    """The class a "module:Class" entry names, imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
