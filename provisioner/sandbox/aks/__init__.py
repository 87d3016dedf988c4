"""The AKS emulator: `models` holds the state and rules, `responses` the ARM wire format."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.sandbox.engine import Engine

if TYPE_CHECKING:
    from provisioner.drivers import ClusterRef


class AksEmulator:
    def __init__(self, engine: Engine, latency: float = 0.0):
        from provisioner.sandbox.aks import responses
        from provisioner.sandbox.aks.models import AksBackend

        self.backend = AksBackend(engine)
        self.app: Any = responses.app(self.backend, latency)

    def add_cluster(self, cluster: ClusterRef, url: str) -> None:
        key = self.backend.add_cluster(cluster.account, cluster.location, cluster.name)
        self.backend.seed_system_pool(key)
