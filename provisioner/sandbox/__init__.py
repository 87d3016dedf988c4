"""Local emulators of the AKS, GKE and EKS node-pool APIs, for the demo, tests and benchmarks.

Each emulator keeps its state apart from its wire glue, as moto does: `engine` is the
cloud-neutral part (clusters, one pool operation per cluster at a time, operations that take
time, injected faults); each cloud's models and its HTTP layer sit on top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from provisioner.drivers import ClusterRef


class Emulator(Protocol):
    """One cloud's emulator, as `sandbox serve` runs it (the classes are in drivers.registry)."""

    app: Any  # the WSGI application serving the cloud's API

    def add_cluster(self, cluster: ClusterRef, url: str) -> None:
        """Create `cluster` with the system pool every real cluster has, which the tool does not own."""
        ...
