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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from provisioner.sandbox.quotas import QuotaSettings
    from provisioner.sandbox.versions import Release, VersionFormat

# cloud -> "module:Class" of its emulator (an Emulator)
EMULATORS = {
    "aks": "provisioner.sandbox.aks:AksEmulator",
    "gke": "provisioner.sandbox.gke:GkeEmulator",
    "eks": "provisioner.sandbox.eks:EksEmulator",
    "ack": "provisioner.sandbox.ack:AckEmulator",
}


class ClusterAddress(Protocol):
    """Where a cluster to seed lives, in its cloud's resource path: the two levels above it
    (AKS subscription and resource group, GKE project and location, EKS account and region, ACK
    account and region) and its name; `extras` what its cloud needs beyond them. The sandbox's
    own shape, so that it imports nothing of the tool, not even its types."""

    @property
    def account(self) -> str: ...
    @property
    def location(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def extras(self) -> Mapping[str, Any]: ...


class SeededCluster(Protocol):
    """A cluster to seed: its cloud, its name (the kubeconfig context's) and its address."""

    @property
    def name(self) -> str: ...
    @property
    def cloud(self) -> str: ...
    @property
    def ref(self) -> ClusterAddress: ...


class Emulator(Protocol):
    """One cloud's emulator, as `sandbox serve` runs it."""

    app: Any  # the WSGI application serving the cloud's API
    engine: Any  # its Engine: the clock and op_seconds its pools' nodes join by
    kubernetes_versions: VersionFormat  # how its API writes a cluster's version

    def add_cluster(self, cluster: ClusterAddress, url: str, release: Release) -> None:
        """Create `cluster`, running Kubernetes `release` (its patch given), with the system pool
        every real cluster has, which the tool does not own."""
        ...

    def enforce_quotas(self, settings: QuotaSettings) -> None:
        """From now on, count each request against the cloud's API quota (sandbox/quotas.py) and
        answer those past it with the cloud's throttling error."""
        ...
