"""How drivers wait for an operation (drivers.poll_intervals, drivers.wait_until): quickly at first,
never slower than a ceiling far below the Azure SDK's fixed 30 s, and never past the timeout."""

from __future__ import annotations

import pytest

from provisioner.drivers import poll_intervals, wait_until
from provisioner.errors import OperationTimeout


def test_poll_intervals_grow_to_a_ceiling_far_below_thirty_seconds():
    intervals = poll_intervals()
    first = [next(intervals) for _ in range(20)]
    growing = [0.1 * 1.3**n for n in range(15)]  # 0.1 * 1.3**15 = 5.1: the ceiling from there on
    assert first == pytest.approx([*growing, 5.0, 5.0, 5.0, 5.0, 5.0])


def test_wait_until_returns_the_result_or_times_out():
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    answers = iter([None, None, "done"])
    assert wait_until(lambda: next(answers), 10, "op", sleep=sleep, clock=lambda: now[0]) == "done"
    assert sleeps == [0.1, pytest.approx(0.13)]
    with pytest.raises(OperationTimeout, match="op did not finish within 1 s"):
        wait_until(lambda: None, 1, "op", sleep=sleep, clock=lambda: now[0])
