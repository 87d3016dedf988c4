"""The drivers pace themselves by each cloud's quota (provisioner.quotas, clouds.yaml `quota`): a
burst beyond the bucket waits for its refill rather than being refused.

Per cloud, over the wire against a sandbox that enforces the clouds' quotas from their own
documentation (provisioner/sandbox/quotas.py), scaled down and sped up alike on both sides (the
endpoints file says how), so that a burst of 30 requests is past every limit. The same burst sent
without pacing is throttled by the sandbox: it is beyond the bucket; paced, it is not. Paced by
quotas looser than the sandbox's, the 429s it answers reach each driver's hook and empty the
request's bucket until their Retry-After.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from provisioner import hardware, quotas
from provisioner.clusters import ClusterRef, Target
from provisioner.drivers.registry import connect
from provisioner.errors import Throttled
from provisioner.sandbox.quotas import QuotaSettings
from provisioner.sandbox.server import Sandbox, SandboxSettings

BURST = 100
# One request each: a pool listing, and for EKS (whose listing is a list, then describes) its
# DescribeCluster.
READS = {
    "aks": lambda driver, ref: driver.list_pools(ref),
    "gke": lambda driver, ref: driver.list_pools(ref),
    "eks": lambda driver, ref: driver.kubernetes_version(ref),
    "ack": lambda driver, ref: driver.list_pools(ref),
}
EKS_EXTRAS = {"node_role": "arn:aws:iam::123456789012:role/eks-nodes", "subnets": ["subnet-0p"]}
CLUSTERS = {
    "aks": ClusterRef("aks", "00000000-0000-0000-0000-0000000000b1", "ml", "paced-aks"),
    "gke": ClusterRef("gke", "pacing-project", "us-central1", "paced-gke"),
    "eks": ClusterRef("eks", "", "us-west-2", "paced-eks", EKS_EXTRAS),
    "ack": ClusterRef("ack", "", "cn-hangzhou", "c00000000000000000000000000pace01"),
}
# (scale, speedup) under which BURST requests at once are past each cloud's limit in the sandbox,
# and the waits short: AKS's read bucket 50, refilled 20 a second; GKE's window 80 requests a
# second; EKS's DescribeCluster bucket 50, refilled 20 a second; ACK's window 80 per 4 s, long
# beside a loaded machine's lateness (a window anchored at a late first request admits fewer).
KNOBS = {"aks": (0.2, 4.0), "gke": (0.016, 100.0), "eks": (0.5, 2.0), "ack": (8.0, 0.25)}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    targets = [Target(ref.name, ref) for ref in CLUSTERS.values()]
    running = Sandbox(tmp_path_factory.mktemp("pacing"), SandboxSettings(quotas=True)).start(targets)
    yield running
    running.stop()
    quotas.set_pacing(quotas.Pacing())


def burst(sandbox: Sandbox, cloud: str, paced: bool) -> tuple[list[Any], dict[str, Any], float]:
    """BURST reads (READS) of the cloud's cluster at once, through its driver; what each returned or
    raised, the sandbox's counts for them and the seconds they took."""
    scale, speedup = KNOBS[cloud]
    sandbox.emulators[cloud].enforce_quotas(QuotaSettings(scale, speedup))  # afresh, counts at zero
    driver = connect(cloud, sandbox.directory)
    quotas.set_pacing(quotas.Pacing(scale, speedup) if paced else None)
    ref, read = CLUSTERS[cloud], READS[cloud]

    def attempt(_: int) -> Any:
        try:
            return read(driver, ref)
        except Throttled as error:
            return error

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=BURST) as pool:
        results = list(pool.map(attempt, range(BURST)))
    elapsed = time.monotonic() - started
    report = requests.get(sandbox.endpoints[cloud] + "/sandbox/quotas", timeout=10).json()
    return results, report, elapsed


@pytest.mark.parametrize("cloud", list(CLUSTERS))
def test_a_burst_beyond_the_bucket_is_refused_unpaced(sandbox: Sandbox, cloud: str) -> None:
    _, report, _ = burst(sandbox, cloud, paced=False)
    assert report["throttled"] > 0


@pytest.mark.parametrize("cloud", list(CLUSTERS))
def test_a_burst_beyond_the_bucket_is_paced_not_refused(sandbox: Sandbox, cloud: str) -> None:
    results, report, elapsed = burst(sandbox, cloud, paced=True)
    assert report["throttled"] == 0, report["scopes"]
    assert report["requests"] == BURST
    assert not [r for r in results if isinstance(r, Exception)]
    # The requests past the tool's own bucket waited for its refill: the last one this long.
    scale, speedup = KNOBS[cloud]
    quota = hardware.load().clouds[cloud].quota
    bucket = quota.buckets["all" if quota.counted_by == "all" else "read"]
    size = max(1.0, bucket.size * scale * quotas.BURST_HEADROOM)
    rate = bucket.per_second * scale * speedup * quotas.HEADROOM
    assert elapsed >= 0.9 * (BURST - size) / rate


# The bucket each READS request takes from, by the action its driver names it with (ARM and the
# Kubernetes Engine API count by kind or all, so none).
ACTIONS = {"aks": "", "gke": "", "eks": "DescribeCluster", "ack": "describe_cluster_node_pools"}
THROTTLED_BURST = 40  # past the quarter quotas below, all of them; the fewer, the sooner all are sent
LOOSER = 100  # the tool's buckets 100 times the sandbox's size (refilled alike): another client's, say


@pytest.mark.parametrize("cloud", list(CLUSTERS))
def test_a_429_over_the_wire_empties_that_requests_bucket_until_its_retry_after(
    sandbox: Sandbox, cloud: str
) -> None:
    """Each driver's hook hears the cloud's throttling answer: the burst fits the tool's (too
    large) bucket, which without the hook would still hold most of its tokens after it; after a
    429 it is empty, its first token no sooner than the Retry-After, its refill slowed."""
    scale, speedup = KNOBS[cloud]
    # A quarter of the unpaced test's quotas, so that the burst is surely past them, however slowly
    # this machine sends it; counts at zero.
    sandbox.emulators[cloud].enforce_quotas(QuotaSettings(scale / 4, speedup))
    driver = connect(cloud, sandbox.directory)
    quotas.set_pacing(quotas.Pacing(scale * LOOSER, speedup / LOOSER))
    ref, read = CLUSTERS[cloud], READS[cloud]
    scope = quotas.quota_scope(ref)
    quota = hardware.load().clouds[cloud].quota
    bucket = quota.buckets["all" if quota.counted_by == "all" else "read"]
    left = bucket.size * scale * LOOSER * quotas.BURST_HEADROOM - THROTTLED_BURST
    assert left > 50  # tokens the tool's bucket would hold after the burst, unthrottled

    def attempt(_: int) -> tuple[float, Any]:
        started = time.monotonic()
        try:
            return started, read(driver, ref)
        except Throttled as error:
            return started, error

    with ThreadPoolExecutor(max_workers=THROTTLED_BURST) as pool:
        results = list(pool.map(attempt, range(THROTTLED_BURST)))
    throttled = [(started, error) for started, error in results if isinstance(error, Throttled)]
    assert throttled, "the sandbox throttled none of the burst"
    delays = [quotas.PACER.delay(scope, "read", ACTIONS[cloud])]
    while delays[-1] == 0 and len(delays) < left:
        delays.append(quotas.PACER.delay(scope, "read", ACTIONS[cloud]))
    now = time.monotonic()
    # Empty: only what its slowed refill gave since the 429s goes at once, a few tokens at most.
    assert len(delays) - 1 < left / 2, f"{len(delays) - 1} tokens left after the 429s"
    # ... and its first token no sooner than the latest Retry-After the hook heard
    latest = max((error.retry_after or 0.0) - (now - started) for started, error in throttled)
    assert delays[0] >= latest - 1e-3
