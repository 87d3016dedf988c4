"""The pacer's token buckets (provisioner.quotas), on a clock the test holds: a burst of the
bucket's size goes at once, then one request per refill; a 429 holds the bucket until its
Retry-After and halves its refill; scopes and actions count apart as their cloud counts them."""

from __future__ import annotations

import bisect
import json

import pytest

from provisioner import hardware, quotas
from provisioner.clusters import ClusterRef
from provisioner.drivers.registry import pacing_for
from provisioner.errors import SandboxNotRunning
from provisioner.sandbox.quotas import QUOTAS


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pacer(clock: Clock) -> quotas.Pacer:
    return quotas.Pacer(quotas.Pacing(), clock=clock)


def waits(
    pacer: quotas.Pacer, scope: tuple[str, ...], count: int, kind: str = "read", action: str = ""
) -> list[float]:
    return [pacer.delay(scope, kind, action) for _ in range(count)]


AKS = quotas.quota_scope(ClusterRef("aks", "sub-1", "rg", "c"))


def test_a_burst_of_the_bucket_goes_at_once_then_one_per_refill() -> None:
    bucket = hardware.load().clouds["aks"].quota.buckets["read"]
    burst = bucket.size * quotas.BURST_HEADROOM  # 225 of ARM's 250
    size, rate = int(burst), bucket.per_second * quotas.HEADROOM
    found = waits(pacer(Clock()), AKS, size + 3)
    assert found[:size] == [0.0] * size
    assert found[size:] == pytest.approx([(k + 1 - (burst - size)) / rate for k in range(3)])


@pytest.mark.parametrize(
    ("cloud", "scope"), [("ack", ("ack", "", "cn-hangzhou")), ("gke", ("gke", "project-1"))]
)
def test_a_burst_paced_by_a_window_quota_stays_in_the_window_though_requests_arrive_late(
    cloud: str, scope: tuple[str, ...]
) -> None:
    """However each request's lateness falls (up to WINDOW_LATENESS), no window of the cloud's
    clock, as the sandbox counts it from the clouds' documentation, gets more than its count.
    (ACK's 1 s window is what the allowance is for; GKE's 100 s one had room for it already.)"""
    window = QUOTAS[cloud].limits["requests"]  # the sandbox's: ACK 10 a second, GKE 5,000 per 100 s
    burst = waits(pacer(Clock()), scope, 3 * int(window.size), action="Describe")
    sent = sorted(100.0 + wait for wait in burst)  # when each may go, all asked for at 100 s
    reach = window.window + hardware.WINDOW_LATENESS  # sent this far apart, two may land in one window
    most = max(bisect.bisect_left(sent, start + reach) - i for i, start in enumerate(sent))
    assert most <= window.size


def test_a_scope_another_process_drained_starts_empty_its_other_scopes_untouched() -> None:
    clock = Clock()
    paced = pacer(clock)
    waits(paced, AKS, 3)  # a bucket of the scope that this process used already
    paced.drained([AKS])
    buckets = hardware.load().clouds["aks"].quota.buckets
    interval = {kind: 1 / (buckets[kind].per_second * quotas.HEADROOM) for kind in ("read", "write")}
    assert paced.delay(AKS, "read") == pytest.approx(interval["read"])  # refilled from empty
    assert paced.delay(AKS, "write") == pytest.approx(interval["write"])  # one not used here yet
    other = quotas.quota_scope(ClusterRef("aks", "sub-2", "rg", "c"))
    assert paced.delay(other, "read") == 0.0


def test_a_hook_that_sees_only_the_request_names_its_scope_as_the_cluster_would() -> None:
    assert quotas.scope_of("aks", account="sub-1") == AKS  # the subscription: ARM's scope
    eks = ClusterRef("eks", "111122223333", "us-west-2", "c")
    assert quotas.scope_of("eks", account=eks.account, location=eks.location) == quotas.quota_scope(eks)
    with pytest.raises(KeyError):  # EKS counts by region too: an account alone is no scope
        quotas.scope_of("eks", account=eks.account)


def test_the_bucket_refills_while_nobody_asks() -> None:
    clock = Clock()
    paced = pacer(clock)
    waits(paced, AKS, 400)
    clock.now += 60  # ARM's 250 refill in 10 s at 25 a second
    assert paced.delay(AKS, "read") == 0.0


def test_a_429_holds_the_bucket_until_its_retry_after_and_slows_it() -> None:
    clock = Clock()
    paced = pacer(clock)
    paced.throttled(AKS, "read", "", retry_after=7.0)
    first, second = waits(paced, AKS, 2)
    rate = hardware.load().clouds["aks"].quota.buckets["read"].per_second * quotas.HEADROOM
    assert first == pytest.approx(7.0)
    assert second - first == pytest.approx(1 / (rate * quotas.SLOWED_SHARE))
    clock.now += quotas.SLOWED_SECONDS + 3600
    assert waits(paced, AKS, 2) == [0.0, 0.0]  # full again, at its own rate


def test_scopes_kinds_and_actions_count_apart_as_each_cloud_counts_them() -> None:
    clock = Clock()
    paced = pacer(clock)
    waits(paced, AKS, 400)
    assert paced.delay(quotas.quota_scope(ClusterRef("aks", "sub-2", "rg", "c")), "read") == 0.0
    assert paced.delay(AKS, "write") == 0.0  # ARM: a bucket per kind
    eks = quotas.quota_scope(ClusterRef("eks", "", "us-east-1", "c"))
    waits(paced, eks, 200, action="DescribeNodegroup")
    assert paced.delay(eks, "read", "ListNodegroups") == 0.0  # EKS: a bucket per action
    gke = quotas.quota_scope(ClusterRef("gke", "p", "us-central1", "c"))
    waits(paced, gke, 2000)
    assert paced.delay(gke, "write") > 0  # GKE: one count of every request


def test_a_bucket_handed_to_another_process_goes_on_from_where_it_was_left() -> None:
    clock = Clock()
    drained, fresh = pacer(clock), pacer(clock)
    waits(drained, AKS, 300)  # past the burst: the next waits for the refill
    drained.throttled(AKS, "read", "", retry_after=1.0)
    fresh.merge(drained.state())
    assert fresh.delay(AKS, "read") == drained.delay(AKS, "read") > 0
    barely = pacer(clock)
    waits(barely, AKS, 5)
    fresh.merge(barely.state())  # an earlier schedule (a bucket barely drawn) does not refill it
    assert fresh.delay(AKS, "read") == drained.delay(AKS, "read")


def test_two_processes_drawing_on_one_bucket_at_once_add_up() -> None:
    clock = Clock()
    here, helper = pacer(clock), pacer(clock)
    waits(here, AKS, 100)
    sent, since = here.state(), clock.now
    helper.merge(sent)
    clock.now += 1.0
    waits(here, AKS, 200)  # meanwhile, this process drew on the same bucket
    waits(helper, AKS, 300)
    here.add_drawn(helper.drawn_since(sent, since), sent, since)
    # As one process that drew all 600 from one bucket: 600 intervals from the first draw on.
    together = pacer(Clock())
    waits(together, AKS, 600)
    bucket = (*AKS, "read", "read")  # ARM counts by kind: the read bucket
    assert here.state()[bucket][0] == pytest.approx(together.state()[bucket][0])


def test_without_pacing_nothing_waits() -> None:
    assert waits(quotas.Pacer(None), AKS, 1000)[-1] == 0.0


def write_endpoints(directory, quotas_setting) -> None:
    (directory / "endpoints.json").write_text(
        json.dumps({"aks": "http://127.0.0.1:1", "quotas": quotas_setting})
    )


def test_a_sandbox_paces_by_the_scale_its_endpoints_file_says(tmp_path) -> None:
    write_endpoints(tmp_path, {"scale": 0.1, "speedup": 20})
    assert pacing_for(tmp_path) == quotas.Pacing(0.1, 20.0)
    (tmp_path / "endpoints.json").write_text(json.dumps({"aks": "http://127.0.0.1:1"}))
    assert pacing_for(tmp_path) is None  # it enforces none: nothing to pace by


@pytest.mark.parametrize(
    "setting", [{"scale": 0, "speedup": 1}, {"scale": 1, "speedup": -2}, {"scale": "1"}, {"scale": True}]
)
def test_a_scale_that_is_not_a_number_above_zero_is_refused_with_the_file_s_words(tmp_path, setting) -> None:
    write_endpoints(tmp_path, setting)
    with pytest.raises(SandboxNotRunning, match="scale and speedup must be numbers above 0"):
        pacing_for(tmp_path)
