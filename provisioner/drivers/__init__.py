"""The Driver protocol: the only code that knows a cloud SDK lives in this package's modules.

Each driver module imports its SDK inside itself, turns the SDK's errors into the CloudErrors of
provisioner.errors (through `errors.cloud_error` and its own ErrorCodes), and returns
PoolStates; nothing of the SDK leaves the module. Drivers are told which cluster by a ClusterRef
(provisioner.clusters), never by the fleet file's models.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from provisioner import hardware
from provisioner.clusters import ClusterRef, KubernetesVersion
from provisioner.errors import CloudError, OperationTimeout, Throttled, Unavailable
from provisioner.hardware import PollSchedule
from provisioner.pools import PoolState
from provisioner.retry import Outage, patience

T = TypeVar("T")


# The taint effects as EKS and GKE spell them.
TAINT_EFFECT_CONSTANTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}
TAINT_EFFECTS_BY_CONSTANT = {constant: effect for effect, constant in TAINT_EFFECT_CONSTANTS.items()}

# How long a pool operation may take before OperationTimeout: GPU pools take minutes on real clouds.
OPERATION_TIMEOUT = 1800.0
# Waits that are no one cloud's operation (a cluster's running operations, seen by listing it).
DEFAULT_SCHEDULE = PollSchedule()


def requests_at_once(cloud: str) -> int:
    """Clusters one run lists on `cloud` at the same time, over all its processes (clouds.yaml
    `requestsAtOnce`, sourced there): each driver keeps that many connections open."""
    return hardware.load().clouds[cloud].requests_at_once


def size_connection_pool(session: Any, size: int) -> None:
    """Keep `size` connections open on a `requests` session, one per request in flight: it keeps
    10 by default, so every wide listing would open and drop the rest again. Each adapter the SDK
    mounted is resized in place, so its own kind (google-auth's mutual-TLS adapter, azure-core's
    larger read blocks) and settings stay."""
    for adapter in session.adapters.values():
        adapter._pool_maxsize = size  # requests keeps it for pickling
        adapter.init_poolmanager(adapter._pool_connections, size, block=adapter._pool_block)


def raise_open_file_limit() -> None:
    """Let this process hold a connection per listing in flight to every cloud at once (the sum
    of their `requestsAtOnce`): the soft limit on open files is 1024 on Linux and 256 on macOS by
    default, below the hard limit."""
    import resource

    wanted = sum(cloud.requests_at_once for cloud in hardware.load().clouds.values())
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):  # a limit we may not raise: keep the soft one
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class Driver(Protocol):
    """One cloud's node pools. Create, update and delete return when the cloud's operation is done.

    Retries happen at one layer, on the smallest unit that failed: observe retries a listing and
    apply each step of an action, so drivers retry nothing themselves, except the calls of a
    listing made of several (EKS), which then reports a partial listing rather than have it
    retried whole. Waiting for an operation to end is not a retry: `wait_until` polls.
    """

    def prepare(self, clusters: Sequence[ClusterRef]) -> None:
        """Make the SDK clients these clusters need now, before threads share the driver: made
        later, on a thread among hundreds, a client's seconds of CPU would hold back every
        request of its region. A client that cannot be made is left for the listing to report."""
        ...

    def list_pools(self, cluster: ClusterRef) -> list[PoolState]:
        """Every pool of the cluster in one listing (pages followed); unowned ones marked so."""
        ...

    def create_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState: ...

    def update_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        """Change the cloud's in-place fields of an owned pool to `desired`'s."""
        ...

    def delete_pool(self, cluster: ClusterRef, name: str) -> None:
        """Delete an owned pool; NotFound where it is gone already."""
        ...

    def adopt_pool(self, cluster: ClusterRef, name: str) -> PoolState:
        """Add the ownership marker to a pool the tool did not create, and change nothing else: the
        pool keeps its identity, nodes and workloads. A pool already owned is returned as it is (a
        retry after the cloud took the first request)."""
        ...

    def discover(self, scope: ClusterRef) -> list[ClusterRef]:
        """Every cluster the credentials see where `scope` lives (its subscription, project or
        region); for `sync --discover`."""
        ...

    def kubernetes_version(self, cluster: ClusterRef) -> KubernetesVersion:
        """The Kubernetes version the cluster's control plane runs, as its cloud's API reports it:
        one request, made only when a caller asks (list_pools never does); NotFound for a
        cluster the cloud does not have."""
        ...


def reported_version(text: str | None, cluster: ClusterRef, field: str) -> KubernetesVersion:
    """The version a cloud's `field` gives for `cluster`; CloudError where it gives none readable."""
    try:
        return KubernetesVersion.parse(text or "")
    except ValueError:
        raise CloudError(
            f"{cluster.cloud} cluster {cluster.name}: {field} is {text!r}, not a Kubernetes version"
        ) from None


@dataclass(frozen=True)
class Pending:
    """A poll's answer that the operation still runs, with the API's own word on when to ask again
    (ARM's Retry-After on an operation's status), where it gave one."""

    retry_after: float | None = None


class OperationTimes:
    """How long a cloud's operations of each kind took, by the start and end times the API itself
    reports: the first poll of the next one of that kind is timed at the shortest of the last few,
    so it is neither asked about while it surely still runs nor noticed late. Shared by a driver's
    threads."""

    KEEP = 8  # operations remembered per kind: recent enough to follow the cloud, enough to be steady

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, deque[float]] = {}

    def record(self, kind: str, seconds: float | None) -> None:
        if seconds is None or seconds < 0:  # no times in the answer, or clocks that disagree
            return
        with self._lock:
            self._seconds.setdefault(kind, deque(maxlen=self.KEEP)).append(seconds)

    def expected(self, kind: str) -> float | None:
        with self._lock:
            seen = self._seconds.get(kind)
            return min(seen) if seen else None

    def first_poll(self, kind: str, schedule: PollSchedule, retry_after: float | None = None) -> float:
        """Seconds before the first poll of an operation of `kind` that has just started: when earlier
        ones of its kind ended (up to the schedule's ceiling), else the schedule's first interval;
        never sooner than the API's Retry-After (itself heeded up to the ceiling)."""
        expected = self.expected(kind)
        hint = min(retry_after or 0.0, schedule.ceiling)
        # Never later than the cloud's own tool would first look: an operation that fails early
        # (a quota, a bad request) is reported within that, not after the usual duration.
        learned = schedule.first if expected is None else min(expected, schedule.ceiling)
        return max(hint, learned)


def seconds_between(start: str | None, end: str | None) -> float | None:
    """The seconds from one RFC 3339 time to another (an operation's startTime and endTime), or None
    where either is missing or unreadable."""
    if not start or not end:
        return None
    try:
        return (_rfc3339(end) - _rfc3339(start)).total_seconds()
    except ValueError:
        return None


def _rfc3339(text: str) -> datetime:
    """datetime.fromisoformat takes at most microseconds: GKE gives nanoseconds."""
    head, dot, rest = text.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        rest = rest[: min(digits, 6)] + rest[digits:]
    return datetime.fromisoformat(head + dot + rest)


def wait_until(
    done: Callable[[], T | Pending | None],
    timeout: float,
    what: str,
    *,
    schedule: PollSchedule = DEFAULT_SCHEDULE,
    first_poll: float = 0.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call `done` until it returns a value other than None or Pending, or raise OperationTimeout:
    the one loop that waits for an operation, whatever the cloud.

    The first call comes `first_poll` seconds in (0: at once), the next ones at the schedule's
    intervals for the time waited so far; where `done` answered Pending with the API's
    Retry-After, no sooner than that, and never later than the schedule's ceiling (a hint far
    off is not waited out past the interval the cloud's own tool polls at).

    A transient error while polling (throttled, unavailable) is not the operation's outcome: the
    poll is repeated, no sooner than the cloud's Retry-After, and reported to this thread's
    Patience (provisioner.retry); an endpoint unreachable for longer than its outage window
    raises Unreachable. Any other error `done` raises (an operation that failed, say) ends the
    wait at once.
    """
    started = clock()
    deadline = started + timeout
    outage = Outage(clock)
    wait = first_poll
    while True:
        if wait > 0:
            remaining = deadline - clock()
            if remaining <= 0:
                raise OperationTimeout(f"{what} did not finish within {timeout:g} s")
            sleep(min(wait, remaining))
        interval = schedule.interval(clock() - started)
        try:
            result = done()
        except (Throttled, Unavailable) as exc:
            outage.failed(exc, what)
            result = None
            interval = max(interval, getattr(exc, "retry_after", None) or 0.0)
            if (report := patience().on_retry) is not None:
                report(exc, interval)
        else:
            outage.answered()
        if isinstance(result, Pending) and result.retry_after is not None:
            interval = min(schedule.ceiling, max(interval, result.retry_after))
        elif result is not None and not isinstance(result, Pending):
            return result
        if deadline - clock() <= 0:
            raise OperationTimeout(f"{what} did not finish within {timeout:g} s")
        wait = interval
