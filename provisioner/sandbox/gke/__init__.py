"""The GKE emulator: `models` holds the state and rules, `responses` the REST wire format."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.sandbox.engine import Engine

if TYPE_CHECKING:
    from provisioner.drivers import ClusterRef


class GkeEmulator:
    def __init__(self, engine: Engine, latency: float = 0.0):
        from provisioner.sandbox.gke import responses
        from provisioner.sandbox.gke.models import GkeBackend

        self.backend = GkeBackend(engine)
        self.app: Any = responses.app(self.backend, latency)

    def add_cluster(self, cluster: ClusterRef, url: str) -> None:
        key = self.backend.add_cluster(cluster.account, cluster.location, cluster.name)
        self.backend.seed_system_pool(key)
