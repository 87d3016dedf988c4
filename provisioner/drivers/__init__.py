"""The Driver protocol: the only code that knows a cloud SDK lives in this package's modules.

Each driver module imports its SDK inside itself, turns the SDK's errors into the few typed
errors below, and returns PoolStates; nothing of the SDK leaves the module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from provisioner.fleet import Cluster
from provisioner.pools import PoolState

T = TypeVar("T")


class DriverError(Exception):
    """A cloud call failed; the message is the cloud's own, credentials never in it."""


class NotFound(DriverError):
    pass


class Busy(DriverError):
    """Another operation runs on the cluster (AKS 409 OperationNotAllowed, GKE FAILED_PRECONDITION)."""


class Throttled(DriverError):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after  # seconds, from the cloud's Retry-After where it sent one


class InvalidRequest(DriverError):
    pass


class AuthenticationFailed(DriverError):
    pass


class OperationTimeout(DriverError):
    pass


class Driver(Protocol):
    """One cloud's node pools. Create, update and delete return when the cloud's operation is done."""

    def list_pools(self, cluster: Cluster) -> list[PoolState]:
        """Every pool of the cluster in one listing (pages followed); unowned ones marked so."""
        ...

    def create_pool(self, cluster: Cluster, desired: PoolState) -> PoolState: ...

    def update_pool(self, cluster: Cluster, desired: PoolState) -> PoolState:
        """Change the cloud's in-place fields of an owned pool to `desired`'s."""
        ...

    def delete_pool(self, cluster: Cluster, name: str) -> None:
        """Delete an owned pool; NotFound where it is gone already."""
        ...


def poll_intervals(first: float = 0.2, factor: float = 1.5, ceiling: float = 5.0) -> Iterator[float]:
    """Sleeps between polls: short at first (sandbox and quick operations finish fast), then
    growing to a ceiling, never the Azure SDK's fixed 30 seconds."""
    interval = first
    while True:
        yield interval
        interval = min(interval * factor, ceiling)


def wait_until(
    done: Callable[[], T | None],
    timeout: float,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call `done` until it returns a value other than None, or raise OperationTimeout."""
    deadline = clock() + timeout
    for interval in poll_intervals():
        result = done()
        if result is not None:
            return result
        remaining = deadline - clock()
        if remaining <= 0:
            raise OperationTimeout(f"{what} did not finish within {timeout:g} s")
        sleep(min(interval, remaining))
    raise AssertionError("unreachable")  # poll_intervals never ends
