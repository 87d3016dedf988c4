"""One retry policy for every cloud call: exponential backoff with full jitter, never sooner than
the cloud's Retry-After, for the errors that mean "later" (throttled, busy, unavailable). An
endpoint unavailable for longer than the thread's outage window ends it with Unreachable."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from provisioner.drivers import TRANSIENT, DriverError, Outage, Unavailable, patience

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8
    base: float = 0.5  # seconds before the first retry, at most
    ceiling: float = 30.0  # the longest backoff
    sleep: Callable[[float], None] = time.sleep
    random: Callable[[], float] = random.random
    clock: Callable[[], float] = time.monotonic

    def delay(self, attempt: int, error: DriverError) -> float:
        """Full jitter (AWS's "Exponential Backoff and Jitter"), floored at the Retry-After."""
        backoff = self.random() * min(self.ceiling, self.base * 2**attempt)
        return max(backoff, getattr(error, "retry_after", None) or 0.0)

    def call(
        self, action: Callable[[], T], on_retry: Callable[[DriverError, float], None] | None = None
    ) -> T:
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
