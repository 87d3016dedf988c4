"""Local emulators of the AKS, GKE, EKS and ACK node-pool APIs and of Kubernetes, for the demo,
tests and benchmarks.

Each emulator is split as moto splits a service: `models` (state and rules, with backends keyed
by account and location), `exceptions` (one class per cloud error code), `responses` (the wire
format) and `urls` (the routes). `engine` and `wire` are the cloud-neutral parts (clusters, one
pool operation per cluster at a time, operations that take time, injected faults, HTTP glue).
`kube` serves each seeded cluster's Kubernetes API, its nodes read from the clouds' emulators.

The emulators are oracles independent of the tool: their rule tables are their own, taken from
each cloud's API reference, and they import nothing of the tool outside this package (at run
time), so a wrong fact in the tool's hardware data fails a test instead of passing twice.
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
