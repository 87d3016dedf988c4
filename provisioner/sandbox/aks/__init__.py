"""The AKS emulator, split as moto splits a service: `models` holds the state and rules (one
AksBackend per subscription and resource group), `exceptions` one class per ARM error code,
`responses` the ARM wire format and `urls` the routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.sandbox.engine import BackendDict, Engine

if TYPE_CHECKING:
    from provisioner.sandbox import ClusterAddress
    from provisioner.sandbox.aks.models import AksBackend
    from provisioner.sandbox.quotas import QuotaSettings
    from provisioner.sandbox.versions import Release


class AksEmulator:
    def __init__(self, engine: Engine, latency: float = 0.0):
        from provisioner.sandbox.aks import responses
        from provisioner.sandbox.aks.models import KUBERNETES_VERSIONS, AksBackend

        self.kubernetes_versions = KUBERNETES_VERSIONS  # how ARM writes a cluster's version
        self.engine = engine  # its clock and op_seconds (the Kubernetes API's autoscaler reads them)
        self.backends: BackendDict[AksBackend] = BackendDict(
            lambda subscription, group: AksBackend(engine, subscription, group)
        )
        self.app: Any = responses.app(engine, self.backends, latency)

    def backend(self, subscription: str, resource_group: str) -> AksBackend:
        from provisioner.sandbox.aks.models import backend_for

        return backend_for(self.backends, subscription, resource_group)

    def enforce_quotas(self, settings: QuotaSettings) -> None:
        """From now on, count each request against AKS's row of sandbox/quotas.py and refuse those past it."""
        from provisioner.sandbox.aks import quotas as aks_quotas
        from provisioner.sandbox.quotas import QuotaGate

        self.app.quotas = QuotaGate("aks", aks_quotas.WIRE, settings)

    def add_cluster(self, cluster: ClusterAddress, url: str, release: Release) -> None:
        backend = self.backend(cluster.account, cluster.location)
        backend.add_cluster(cluster.name, self.kubernetes_versions.spell(release))
        backend.seed_system_pool(cluster.name)
