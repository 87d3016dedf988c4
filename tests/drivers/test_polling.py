"""How drivers wait for an operation (drivers.wait_until, hardware.PollSchedule, OperationTimes):
quickly at first, growing with the time waited to each cloud's ceiling, the first poll put off to
when earlier operations of the kind ended or to the API's Retry-After, and never past the timeout.
A fake clock stands in for time: these are schedules, not timings."""

from __future__ import annotations

import pytest

from provisioner import hardware
from provisioner.drivers import OperationTimes, Pending, seconds_between, wait_until
from provisioner.errors import OperationTimeout, Throttled
from provisioner.hardware import PollSchedule


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def answers(*values: object):
    """A `done` that gives `values` one poll at a time, and the times it was asked."""
    asked: list[float] = []
    queue = list(values)

    def done() -> object:
        asked.append(clock.now)
        return queue.pop(0)

    clock = FakeClock()
    return done, asked, clock


def test_intervals_grow_geometrically_with_the_time_waited_up_to_the_ceiling():
    schedule = PollSchedule(first=0.1, factor=1.3, ceiling=5.0)
    waited, intervals = 0.0, []
    for _ in range(20):
        intervals.append(schedule.interval(waited))
        waited += intervals[-1]
    growing = [0.1 * 1.3**n for n in range(15)]  # 0.1 * 1.3**15 = 5.1: the ceiling from there on
    assert intervals == pytest.approx([*growing, 5.0, 5.0, 5.0, 5.0, 5.0])


def test_each_cloud_polls_no_more_often_than_its_own_tool_once_a_wait_is_long():
    ceilings = {key: cloud.polling.ceiling for key, cloud in hardware.load().clouds.items()}
    assert ceilings == {"aks": 30, "gke": 5, "eks": 30, "ack": 10}
    for cloud in hardware.load().clouds.values():
        assert cloud.polling.interval(3600) == cloud.polling.ceiling
        assert cloud.polling.interval(0) == cloud.polling.first < 1


def test_wait_until_returns_the_result_or_times_out():
    done, asked, clock = answers(None, None, "done")
    assert wait_until(done, 10, "op", sleep=clock.sleep, clock=clock) == "done"
    assert asked == pytest.approx([0.0, 0.1, 0.23])
    with pytest.raises(OperationTimeout, match="op did not finish within 1 s"):
        wait_until(lambda: None, 1, "op", sleep=clock.sleep, clock=clock)


def test_the_first_poll_waits_for_first_poll_and_later_ones_go_on_from_the_time_waited():
    done, asked, clock = answers(None, None, "done")
    schedule = PollSchedule(first=0.1, factor=1.5, ceiling=60)
    assert wait_until(done, 60, "op", schedule=schedule, first_poll=10, sleep=clock.sleep, clock=clock)
    # not 10.1 then 10.25: an operation still running after 10 s is asked again in 0.1 + 0.5 * 10
    assert asked == pytest.approx([10.0, 15.1, 15.1 + 0.1 + 0.5 * 15.1])


def test_a_pending_answer_with_retry_after_sets_the_next_poll_and_one_without_leaves_the_schedule():
    done, asked, clock = answers(Pending(retry_after=3), Pending(), "done")
    assert wait_until(done, 60, "op", sleep=clock.sleep, clock=clock) == "done"
    assert asked == pytest.approx([0.0, 3.0, 3.0 + 0.1 + 0.3 * 3])


def test_retry_after_is_heeded_no_sooner_than_the_schedule_nor_later_than_its_ceiling():
    schedule = PollSchedule(first=0.1, factor=1.3, ceiling=30)
    done, asked, clock = answers(None, Pending(retry_after=1), Pending(retry_after=3600), "done")
    assert wait_until(done, 600, "op", schedule=schedule, first_poll=20, sleep=clock.sleep, clock=clock)
    # at 20 s the schedule's interval (6.1 s) outlasts a Retry-After of 1; one of an hour waits 30 s
    assert asked == pytest.approx([20.0, 26.1, 26.1 + 0.1 + 0.3 * 26.1, 26.1 + 0.1 + 0.3 * 26.1 + 30])


def test_throttling_while_polling_waits_at_least_its_retry_after():
    throttled = Throttled("slow down", retry_after=3)

    def done() -> object:
        asked.append(clock.now)
        if len(asked) == 1:
            raise throttled
        return "done"

    asked: list[float] = []
    clock = FakeClock()
    assert wait_until(done, 60, "op", sleep=clock.sleep, clock=clock) == "done"
    assert asked == [0.0, 3.0]


def test_the_first_poll_of_an_operation_comes_when_the_fastest_recent_one_of_its_kind_ended():
    times = OperationTimes()
    schedule = PollSchedule(first=0.1, factor=1.3, ceiling=300)
    assert times.first_poll("CREATE_NODE_POOL", schedule) == 0.1  # nothing known yet
    for seconds in (190.0, 170.0, 185.0):
        times.record("CREATE_NODE_POOL", seconds)
    times.record("CREATE_NODE_POOL", None)  # an answer without times teaches nothing
    assert times.first_poll("CREATE_NODE_POOL", schedule) == 170.0
    assert times.first_poll("DELETE_NODE_POOL", schedule) == 0.1  # each kind on its own
    assert times.first_poll("CREATE_NODE_POOL", schedule, retry_after=4) == 170.0  # known to end later
    assert times.first_poll("DELETE_NODE_POOL", schedule, retry_after=4) == 4  # the API's word first
    assert times.first_poll("DELETE_NODE_POOL", schedule, retry_after=3600) == 300  # up to the ceiling
    for _ in range(OperationTimes.KEEP):  # the cloud got slower: old, faster runs are forgotten
        times.record("CREATE_NODE_POOL", 240.0)
    assert times.first_poll("CREATE_NODE_POOL", schedule) == 240.0


def test_a_learned_first_poll_comes_no_later_than_the_clouds_own_tool_would_look():
    """An operation that fails early (a quota, a bad request) is reported within the ceiling,
    not after the usual duration of its kind."""
    times = OperationTimes()
    times.record("CREATE_NODE_POOL", 170.0)
    assert times.first_poll("CREATE_NODE_POOL", PollSchedule(first=0.1, factor=1.3, ceiling=5)) == 5
    assert times.first_poll("CREATE_NODE_POOL", PollSchedule(first=0.1, factor=1.3, ceiling=30)) == 30


def test_rfc3339_times_read_with_nanoseconds_offsets_or_whole_seconds():
    nanoseconds = seconds_between("2026-05-01T10:00:00.123456789Z", "2026-05-01T10:03:10.623456Z")
    assert nanoseconds == pytest.approx(190.5)
    assert seconds_between("2026-05-01T18:00:00+08:00", "2026-05-01T10:00:02Z") == 2.0
    assert seconds_between("2026-05-01T10:00:00Z", None) is None
    assert seconds_between("yesterday", "2026-05-01T10:00:00Z") is None
