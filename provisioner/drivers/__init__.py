"""The Driver protocol: the only code that knows a cloud SDK lives in this package's modules.

Each driver module imports its SDK inside itself, turns the SDK's errors into the few typed
errors below, and returns PoolStates; nothing of the SDK leaves the module.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from provisioner import hardware
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


class Unavailable(DriverError):
    """The cloud answered 5xx or did not answer: worth trying again later."""


class InvalidRequest(DriverError):
    pass


class NotOwned(DriverError):
    """The pool exists but this tool did not create it, so it is never changed or deleted."""


class AuthenticationFailed(DriverError):
    pass


class OperationTimeout(DriverError):
    pass


class Unreachable(DriverError):
    """The endpoint stayed unreachable (no answer, or 5xx) for longer than the outage window."""


class OperationFailed(DriverError):
    """The cloud accepted the request, then its long-running operation failed."""


def retry_after_seconds(header: str | None) -> float | None:
    """A Retry-After header's delay in seconds; None where absent or not a number (an HTTP date)."""
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None


# Errors that say "later", not "no": callers retry them with backoff, honouring retry_after.
TRANSIENT = (Busy, Throttled, Unavailable)

# The taint effects as EKS and GKE spell them.
TAINT_EFFECT_CONSTANTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}
TAINT_EFFECTS_BY_CONSTANT = {constant: effect for effect, constant in TAINT_EFFECT_CONSTANTS.items()}

# How long a pool operation may take before OperationTimeout: GPU pools take minutes on real clouds.
OPERATION_TIMEOUT = 1800.0
# How long an endpoint may stay unreachable (refused, reset, 5xx) before a wait or a retry gives up
# with Unreachable (`apply --outage-timeout`). Throttling and busy clusters are answers, not outages:
# they keep the operation timeout's and the retry policy's longer patience.
OUTAGE_WINDOW = 180.0


@dataclass(frozen=True)
class Patience:
    """This thread's outage window, and who hears of each retry (apply's progress line)."""

    outage_window: float = OUTAGE_WINDOW
    on_retry: Callable[[DriverError, float], None] | None = None


# Per thread, so the waits inside a driver (which knows nothing of apply) report to the cluster's
# own progress line and keep apply's window: apply works each cluster in one thread.
_patience = threading.local()


def patience() -> Patience:
    return getattr(_patience, "value", None) or Patience()


@contextlib.contextmanager
def patient(value: Patience) -> Iterator[None]:
    """Waits and retries in this thread use `value` until the block ends."""
    previous = getattr(_patience, "value", None)
    _patience.value = value
    try:
        yield
    finally:
        _patience.value = previous


class Outage:
    """A streak of Unavailable answers; Unreachable once it outlasts this thread's outage window."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.since: float | None = None

    def failed(self, error: DriverError, what: str = "") -> None:
        if not isinstance(error, Unavailable):
            self.since = None  # throttled or busy: the endpoint answers
            return
        now = self.clock()
        self.since = now if self.since is None else self.since
        window = patience().outage_window
        if now - self.since >= window:
            raise Unreachable(
                f"{what + ': ' if what else ''}gave up: unreachable for {now - self.since:.0f} s, "
                f"past the outage window of {window:g} s (apply --outage-timeout): {error}"
            ) from error

    def answered(self) -> None:
        self.since = None

    def remaining(self) -> float:
        """Seconds left of the window in this streak (the whole window where none is running)."""
        window = patience().outage_window
        return window if self.since is None else max(0.0, window - (self.clock() - self.since))


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

    def discover(self, scope: Cluster) -> list[Cluster]:
        """Every cluster the credentials see where `scope` lives (its subscription, project or
        region), named `cloud/account/location/cluster`; for `sync --discover`."""
        ...


def discovered_name(cloud: str, account: str, location: str, cluster: str) -> str:
    return f"{cloud}/{account}/{location}/{cluster}"


def poll_intervals(first: float = 0.1, factor: float = 1.3, ceiling: float = 5.0) -> Iterator[float]:
    """Sleeps between polls: short at first (sandbox and quick operations finish fast), then
    growing to a ceiling, never the Azure SDK's fixed 30 seconds. Growing by 1.3, a poll notices
    an operation's end within about a quarter of its time (up to the ceiling)."""
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
    """Call `done` until it returns a value other than None, or raise OperationTimeout.

    A transient error while polling (throttled, unavailable) is not the operation's outcome: the
    poll is repeated, no sooner than the cloud's Retry-After, and reported to this thread's
    Patience; an endpoint unreachable for longer than its outage window raises Unreachable.
    """
    deadline = clock() + timeout
    outage = Outage(clock)
    for interval in poll_intervals():
        wait = interval
        try:
            result = done()
        except (Throttled, Unavailable) as exc:
            outage.failed(exc, what)
            result = None
            wait = max(interval, getattr(exc, "retry_after", None) or 0.0)
            if (report := patience().on_retry) is not None:
                report(exc, wait)
        else:
            outage.answered()
        if result is not None:
            return result
        remaining = deadline - clock()
        if remaining <= 0:
            raise OperationTimeout(f"{what} did not finish within {timeout:g} s")
        sleep(min(wait, remaining))
    raise AssertionError("unreachable")  # poll_intervals never ends


_IMPORT_LOCK = threading.Lock()


def import_sdk(*modules: str) -> None:
    """Import a driver's SDK modules now, from one thread: SDKs import more on first use, and first
    imports racing in worker threads can deadlock (importlib's _DeadlockError)."""
    with _IMPORT_LOCK:
        for module in modules:
            importlib.import_module(module)


ENDPOINTS_FILE = "endpoints.json"


class SandboxNotRunning(DriverError):
    pass


def sandbox_endpoints(directory: str | Path) -> dict[str, str]:
    """The emulator addresses `provisioner sandbox serve --dir DIR` wrote, by cloud."""
    path = Path(directory) / ENDPOINTS_FILE
    try:
        endpoints = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SandboxNotRunning(
            f"no sandbox at {directory}: {path} does not exist; start one with "
            f"`provisioner sandbox serve --dir {directory}`"
        ) from None
    except ValueError as exc:
        raise SandboxNotRunning(f"{path} is not JSON: {exc}") from None
    return endpoints


def connect(cloud: str, sandbox: str | Path | None = None) -> Driver:
    """The driver for `cloud`, talking to the real cloud or, given a sandbox directory, its emulator."""
    profile = hardware.load().clouds[cloud]
    endpoint = sandbox_endpoints(sandbox)[cloud] if sandbox is not None else None
    return hardware.import_class(profile.driver)(endpoint)
