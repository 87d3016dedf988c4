"""The ACK emulator, split as moto splits a service: `models` holds the state and rules (one
AckBackend per account and region), `exceptions` one class per ACK error code, `responses` the
ROA JSON wire format and `urls` the routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.sandbox.engine import Engine

if TYPE_CHECKING:
    from provisioner.sandbox import ClusterAddress
    from provisioner.sandbox.ack.models import AckBackend, AckBackends
    from provisioner.sandbox.quotas import QuotaSettings
    from provisioner.sandbox.versions import Release


class AckEmulator:
    def __init__(self, engine: Engine, latency: float = 0.0):
        from provisioner.sandbox.ack import responses
        from provisioner.sandbox.ack.models import KUBERNETES_VERSIONS, AckBackends

        self.kubernetes_versions = KUBERNETES_VERSIONS  # how ACK writes a cluster's version
        self.engine = engine  # its clock and op_seconds (the Kubernetes API's autoscaler reads them)
        self.backends: AckBackends = AckBackends(engine)
        self.app: Any = responses.app(self.backends, latency)

    def backend(self, account: str, region: str) -> AckBackend:
        return self.backends[(account, region)]

    def enforce_quotas(self, settings: QuotaSettings) -> None:
        """From now on, count each request against ACK's row of sandbox/quotas.py and refuse those past it."""
        from provisioner.sandbox.ack import quotas as ack_quotas
        from provisioner.sandbox.quotas import QuotaGate

        self.app.quotas = QuotaGate("ack", ack_quotas.wire(self.backends), settings)

    def add_cluster(self, cluster: ClusterAddress, url: str, release: Release) -> None:
        """The cluster (location = region, name = cluster ID) at `release`, with its unowned
        default node pool."""
        backend = self.backend(cluster.account, cluster.location)
        backend.add_cluster(cluster.name, self.kubernetes_versions.spell(release))
        backend.seed_system_pool(cluster.name)
