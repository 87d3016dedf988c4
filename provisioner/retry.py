"""One retry policy for every cloud call: exponential backoff with full jitter, never sooner than
the cloud's Retry-After, for the errors that mean "later" (throttled, busy, unavailable). An
endpoint unavailable for longer than the thread's outage window ends it with Unreachable."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from provisioner.errors import TRANSIENT, CloudError, Unavailable, Unreachable

T = TypeVar("T")

# How long an endpoint may stay unreachable (refused, reset, 5xx) before a wait or a retry gives up
# with Unreachable (`apply --outage-timeout`). Throttling and busy clusters are answers, not outages:
# they keep the operation timeout's and the retry policy's longer patience.
OUTAGE_WINDOW = 180.0


@dataclass(frozen=True)
class Patience:
    """This thread's outage window, and who hears of each retry (apply's progress line)."""

    outage_window: float = OUTAGE_WINDOW
    on_retry: Callable[[CloudError, float], None] | None = None


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

    def failed(self, error: CloudError, what: str = "") -> None:
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


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8
    base: float = 0.5  # seconds before the first retry, at most
    ceiling: float = 30.0  # the longest backoff
    sleep: Callable[[float], None] = time.sleep
    random: Callable[[], float] = random.random
    clock: Callable[[], float] = time.monotonic

    def delay(self, attempt: int, error: CloudError) -> float:
        """Full jitter (AWS's "Exponential Backoff and Jitter"), floored at the Retry-After."""
        backoff = self.random() * min(self.ceiling, self.base * 2**attempt)
        return max(backoff, getattr(error, "retry_after", None) or 0.0)

    def call(self, action: Callable[[], T], on_retry: Callable[[CloudError, float], None] | None = None) -> T:
        outage = Outage(self.clock)
        report = on_retry or patience().on_retry
        for attempt in range(self.attempts):
            try:
                return action()
            except TRANSIENT as error:
                outage.failed(error)
                if attempt == self.attempts - 1:
                    raise
                delay = self.delay(attempt, error)
                if isinstance(error, Unavailable):  # one last try as the window closes, not long after
                    delay = min(delay, max(outage.remaining(), 0.01))
                if report is not None:
                    report(error, delay)
                self.sleep(delay)
        raise AssertionError("unreachable")
