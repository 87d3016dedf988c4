"""What a sync hands the catalog for one cluster: who the cluster is, the pools it listed with
what each offers, what Kubernetes says of their allocation, and where they drift from the fleet."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from provisioner.capacity import Capacity
from provisioner.pools import PoolState


@dataclass(frozen=True)
class ClusterIdentity:
    name: str
    cloud: str
    account: str
    location: str
    cluster: str
    in_fleet: bool = True


@dataclass(frozen=True)
class ObservedPool:
    state: PoolState
    capacity: Capacity


@dataclass(frozen=True)
class Allocation:
    """What Kubernetes says of a pool: its nodes, and the slices they advertise and pods hold."""

    nodes: int
    advertised: int
    allocated: int


@dataclass(frozen=True)
class DriftFinding:
    pool: str
    kind: str  # missing | extra | changed | conflict
    fields: list[dict[str, Any]]
