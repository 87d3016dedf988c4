"""The pacer's token buckets (provisioner.quotas), on a clock the test holds: a burst of the
bucket's size goes at once, then one request per refill; a 429 holds the bucket until its
Retry-After and halves its refill; scopes and actions count apart as their cloud counts them."""

from __future__ import annotations

import pytest

from provisioner import hardware, quotas
from provisioner.clusters import ClusterRef


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


def test_without_pacing_nothing_waits() -> None:
    assert waits(quotas.Pacer(None), AKS, 1000)[-1] == 0.0
