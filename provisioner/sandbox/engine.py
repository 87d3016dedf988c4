"""What every emulated cloud shares: clusters of pools, long-running operations, faults, and
backends keyed by account and location. Cloud-neutral: no cloud's rules or codes live here."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar

OperationKind = Literal["create", "update", "delete"]
B = TypeVar("B")


class ClusterBusy(Exception):
    """A pool operation is already running on the cluster; each cloud answers it with its own error."""

    def __init__(self, running: Operation):
        super().__init__(f"operation {running.id} ({running.kind} {running.pool}) is in progress")
        self.running = running


class UnknownCluster(Exception):
    pass


@dataclass
class Operation:
    id: str
    cluster: str
    kind: OperationKind
    pool: str
    done_at: float
    finish: Callable[[], None]  # applies the operation's end state (pool ready, pool gone)
    done: bool = False
    started_at: float = 0.0  # on the engine's clock, as done_at


@dataclass
class ClusterState:
    key: str
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> the cloud's record
    running: Operation | None = None


@dataclass(frozen=True)
class Fault:
    status: int  # 429 or 503
    retry_after: float | None


class Engine:
    """Cluster state behind one lock; operations finish `op_seconds` after they start."""

    def __init__(
        self,
        op_seconds: float = 0.0,
        fault_rate: float = 0.0,
        seed: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.op_seconds = op_seconds
        self.fault_rate = fault_rate
        self.seed = seed  # for draws of their own (the MIG manager's failures), apart from requests'
        self._random = random.Random(seed)
        self._clock = clock
        self._skipped = 0.0  # seconds `advance` moved the clock on
        self._epoch = time.time() - clock()  # wall time at the engine clock's zero
        self._lock = threading.RLock()
        self._clusters: dict[str, ClusterState] = {}
        self._operations: dict[str, Operation] = {}
        self._ids = itertools.count(1)

    @property
    def lock(self) -> threading.RLock:
        """Held by a cloud's models for the whole of a request, so each request is atomic."""
        return self._lock

    def now(self) -> float:
        return self._clock() + self._skipped

    def advance(self, seconds: float) -> None:
        """Move the emulated clock on, as if `seconds` had passed: a test ends a long operation
        when it chooses, whatever the machine's speed."""
        with self._lock:
            self._skipped += seconds

    def wall(self, at: float) -> datetime:
        """The UTC time of `at` on the engine's clock, for the times the APIs report: one offset from
        the engine's start, so an operation's reported start and end lie exactly its length apart."""
        return datetime.fromtimestamp(self._epoch + at, UTC)

    def add_cluster(self, key: str) -> ClusterState:
        with self._lock:
            return self._clusters.setdefault(key, ClusterState(key))

    def cluster(self, key: str) -> ClusterState:
        with self._lock:
            self.settle()
            try:
                return self._clusters[key]
            except KeyError:
                raise UnknownCluster(key) from None

    def clusters(self) -> list[str]:
        with self._lock:
            return sorted(self._clusters)

    def begin(
        self,
        key: str,
        kind: OperationKind,
        pool: str,
        finish: Callable[[], None] = lambda: None,
        start: Callable[[], None] = lambda: None,
    ) -> Operation:
        """Start a pool operation on cluster `key`, or raise ClusterBusy while one runs.

        `start` applies the operation's first state (pool creating, stopping...) once the cluster
        is known to be free, so a refused operation changes nothing.
        """
        with self._lock:
            cluster = self.cluster(key)
            if cluster.running is not None:
                raise ClusterBusy(cluster.running)
            start()
            now = self.now()
            operation = Operation(
                id=f"op-{next(self._ids)}",
                cluster=key,
                kind=kind,
                pool=pool,
                done_at=now + self.op_seconds,
                finish=finish,
                started_at=now,
            )
            cluster.running = operation
            self._operations[operation.id] = operation
            self.settle()  # with op_seconds 0 the operation is done at once
            return operation

    def operation(self, operation_id: str) -> Operation | None:
        with self._lock:
            self.settle()
            return self._operations.get(operation_id)

    def history(self, key: str, pool: str) -> list[OperationKind]:
        """The kinds of the operations started on `pool` of cluster `key`, oldest first: tests ask
        whether a pool was only ever updated, never deleted and made anew."""
        with self._lock:
            return [o.kind for o in self._operations.values() if (o.cluster, o.pool) == (key, pool)]

    def settle(self) -> None:
        """Finish every operation whose time has come."""
        with self._lock:
            now = self.now()
            for cluster in self._clusters.values():
                operation = cluster.running
                if operation is not None and now >= operation.done_at:
                    operation.finish()
                    operation.done = True
                    cluster.running = None

    def fault(self) -> Fault | None:
        """The fault to answer this request with, drawn at `fault_rate`: throttling or unavailable."""
        if self.fault_rate <= 0 or self._random.random() >= self.fault_rate:
            return None
        if self._random.random() < 0.5:
            return Fault(429, retry_after=round(self._random.uniform(0.05, 0.5), 2))
        return Fault(503, retry_after=None)


class _Locations(dict[str, B]):
    def __init__(self, make: Callable[[str], B], lock: threading.Lock):
        super().__init__()
        self._make = make
        self._lock = lock

    def __missing__(self, location: str) -> B:
        with self._lock:
            return self.setdefault(location, self._make(location))


class BackendDict(dict[str, "_Locations[B]"], Generic[B]):
    """One cloud's backends, `backends[account][location]`, each made on first use: moto's
    BackendDict, which keys a service's backends by account and region. What account and location
    are is the cloud's resource hierarchy (AKS subscription and resource group, GKE project and
    location, EKS account and region). A cloud's backends share its Engine, so one lock, one
    operation clock and one fault draw cover them all."""

    def __init__(self, make: Callable[[str, str], B]):
        super().__init__()
        self._make = make
        self._lock = threading.Lock()

    def __missing__(self, account: str) -> _Locations[B]:
        with self._lock:
            made = _Locations(lambda location: self._make(account, location), self._lock)
            return self.setdefault(account, made)
