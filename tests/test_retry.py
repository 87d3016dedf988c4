"""The one retry policy, and polls that outlive a throttled or failed status read."""

from __future__ import annotations

import pytest

from provisioner.drivers import wait_until
from provisioner.errors import Busy, InvalidRequest, Throttled, Unavailable, retry_after_seconds
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


def test_retry_after_in_seconds_or_none_when_a_date_or_absent():
    assert retry_after_seconds("1.5") == 1.5
    assert retry_after_seconds("Wed, 21 Oct 2026 07:28:00 GMT") is None
    assert retry_after_seconds(None) is None


class Clock:
    """A clock that the sleeps it is given move on: waits without waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def test_a_poll_gives_up_once_the_endpoint_is_unreachable_past_the_outage_window():
    from provisioner.errors import Unreachable
    from provisioner.retry import Patience, patient

    clock = Clock()
    refused = Unavailable("GKE API unreachable: ConnectionError")
    with patient(Patience(outage_window=10)), pytest.raises(Unreachable) as raised:
        wait_until(flaky(*[refused] * 1000), 1800, "creating node pool mig", sleep=clock.sleep, clock=clock)
    assert str(raised.value).startswith("creating node pool mig: gave up: unreachable for 1")
    assert 10 <= clock.now < 16  # the window and at most one poll interval past it, not 1800 s


def test_throttling_and_an_answer_between_outages_keep_the_poll_going():
    from provisioner.retry import Patience, patient

    clock = Clock()
    refused, throttled = Unavailable("503"), Throttled("429", retry_after=6)
    outcomes = [refused] * 3 + [None] + [refused] * 3 + [throttled] * 20 + ["done"]
    with patient(Patience(outage_window=1)):
        assert wait_until(flaky(*outcomes), 1800, "polling", sleep=clock.sleep, clock=clock) == "done"
    assert clock.now > 120  # throttling was waited out far past the outage window


def test_the_retry_policy_gives_up_on_an_unreachable_endpoint_after_the_window():
    from provisioner.errors import Unreachable
    from provisioner.retry import Patience, patient

    clock = Clock()
    policy = RetryPolicy(attempts=50, base=1.0, sleep=clock.sleep, clock=clock, random=lambda: 1.0)
    with (
        patient(Patience(outage_window=20)),
        pytest.raises(Unreachable, match="past the outage window of 20 s"),
    ):
        policy.call(flaky(*[Unavailable("connection refused")] * 50))
    assert clock.now == 20  # the last try as the window closes
