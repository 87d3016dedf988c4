"""The GKE emulator, split as moto splits a service: `models` holds the state and rules (one
GkeBackend per project and location), `exceptions` one class per google.rpc code, `responses`
the REST wire format and `urls` the routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.sandbox.engine import BackendDict, Engine

if TYPE_CHECKING:
    from provisioner.sandbox import ClusterAddress
    from provisioner.sandbox.gke.models import GkeBackend
    from provisioner.sandbox.quotas import QuotaSettings
    from provisioner.sandbox.versions import Release


class GkeEmulator:
    def __init__(self, engine: Engine, latency: float = 0.0):
        from provisioner.sandbox.gke import responses
        from provisioner.sandbox.gke.models import KUBERNETES_VERSIONS, GkeBackend

        self.kubernetes_versions = KUBERNETES_VERSIONS  # how GKE writes a cluster's version
        self.engine = engine  # its clock and op_seconds (the Kubernetes API's autoscaler reads them)
        self.backends: BackendDict[GkeBackend] = BackendDict(
            lambda project, location: GkeBackend(engine, project, location)
        )
        self.app: Any = responses.app(engine, self.backends, latency)

    def backend(self, project: str, location: str) -> GkeBackend:
        return self.backends[project][location]

    def enforce_quotas(self, settings: QuotaSettings) -> None:
        """From now on, count each request against GKE's row of sandbox/quotas.py and refuse those past it."""
        from provisioner.sandbox.gke import quotas as gke_quotas
        from provisioner.sandbox.quotas import QuotaGate

        self.app.quotas = QuotaGate("gke", gke_quotas.WIRE, settings)

    def add_cluster(self, cluster: ClusterAddress, url: str, release: Release) -> None:
        backend = self.backend(cluster.account, cluster.location)
        backend.add_cluster(cluster.name, master_version=self.kubernetes_versions.spell(release))
        backend.seed_system_pool(cluster.name)
