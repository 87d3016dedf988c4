"""One retry policy for every cloud call: exponential backoff with full jitter, never sooner than
the cloud's Retry-After, for the errors that mean "later" (throttled, busy, unavailable)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from provisioner.errors import TRANSIENT, CloudError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8
    base: float = 0.5  # seconds before the first retry, at most
    ceiling: float = 30.0  # the longest backoff
    sleep: Callable[[float], None] = time.sleep
    random: Callable[[], float] = random.random

    def delay(self, attempt: int, error: CloudError) -> float:
        """Full jitter (AWS's "Exponential Backoff and Jitter"), floored at the Retry-After."""
        backoff = self.random() * min(self.ceiling, self.base * 2**attempt)
        return max(backoff, getattr(error, "retry_after", None) or 0.0)

    def call(self, action: Callable[[], T], on_retry: Callable[[CloudError, float], None] | None = None) -> T:
        for attempt in range(self.attempts):
            try:
                return action()
            except TRANSIENT as error:
                if attempt == self.attempts - 1:
                    raise
                delay = self.delay(attempt, error)
                if on_retry is not None:
                    on_retry(error, delay)
                self.sleep(delay)
        raise AssertionError("unreachable")
