"""The one retry policy, and polls that outlive a throttled or failed status read."""

from __future__ import annotations

import pytest

from provisioner.drivers import wait_until
from provisioner.errors import Busy, InvalidRequest, Throttled, Unavailable, retry_after_seconds
from provisioner.pools import Scaling
from provisioner.retry import RetryPolicy


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def flaky(*outcomes):
    """An action that raises or returns each outcome in turn."""
    remaining = list(outcomes)

    def action():
        outcome = remaining.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return action


def test_transient_errors_are_retried_with_growing_jittered_backoff():
    sleeps = Sleeps()
    policy = RetryPolicy(base=1.0, sleep=sleeps, random=lambda: 1.0)
    action = flaky(Busy("409"), Unavailable("503"), Busy("409"), "done")
    assert policy.call(action) == "done"
    assert sleeps == [1.0, 2.0, 4.0]


def test_throttling_waits_at_least_the_retry_after():
    sleeps = Sleeps()
    policy = RetryPolicy(base=0.1, sleep=sleeps, random=lambda: 0.5)
    assert policy.call(flaky(Throttled("429", retry_after=7.0), "done")) == "done"
    assert sleeps == [7.0]


def test_backoff_stops_at_the_ceiling_and_gives_up_after_the_attempts():
    sleeps = Sleeps()
    policy = RetryPolicy(attempts=4, base=10.0, ceiling=15.0, sleep=sleeps, random=lambda: 1.0)
    with pytest.raises(Busy):
        policy.call(flaky(*[Busy("409")] * 4))
    assert sleeps == [10.0, 15.0, 15.0]


def test_a_refusal_is_never_retried():
    sleeps = Sleeps()
    with pytest.raises(InvalidRequest):
        RetryPolicy(sleep=sleeps).call(flaky(InvalidRequest("400"), "never"))
    assert sleeps == []


def test_a_poll_that_is_throttled_is_polled_again_after_its_retry_after():
    sleeps = Sleeps()
    now = [0.0]
    result = wait_until(
        flaky(Throttled("429", retry_after=3.0), Unavailable("503"), "done"),
        60,
        "op",
        sleep=sleeps,
        clock=lambda: now[0],
    )
    assert result == "done"
    assert sleeps[0] == 3.0


def test_bounds_that_cannot_move_are_a_fixed_size():
    assert Scaling(2, 2, autoscaling=True) == Scaling.fixed(2)
    assert Scaling(1, 3, autoscaling=True).autoscaling


def test_retry_after_in_seconds_or_none_when_a_date_or_absent():
    assert retry_after_seconds("1.5") == 1.5
    assert retry_after_seconds("Wed, 21 Oct 2026 07:28:00 GMT") is None
    assert retry_after_seconds(None) is None
