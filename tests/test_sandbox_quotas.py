"""`sandbox serve --quotas`: each emulator counts requests per quota scope, as its cloud's
documentation says (provisioner/sandbox/quotas.py), and answers past the limit with that cloud's
throttling error and a Retry-After; GET /sandbox/quotas reports the counts.

Over real HTTP against one running sandbox. Each cloud's test enforces that cloud's quota afresh
with knobs that make its limits a few requests and its waits a fraction of a second (the table's
limits times `scale`, refills times `speedup`), as `Sandbox.start` enforces them after seeding.
Bounds that depend on time are taken from the time measured, so a slow machine cannot fail them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from provisioner.clusters import ClusterRef, Target
from provisioner.drivers.registry import read_endpoints
from provisioner.sandbox.quotas import QUOTAS, QuotaSettings
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.conftest import ROOT

SUBSCRIPTIONS = ("00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000a2")
PROJECTS = ("quota-project-1", "quota-project-2")
EKS_CLUSTER, EKS_REGION = "quota-eks", "us-west-2"
ACK_CLUSTER, ACK_REGION = "c0000000000000000000000000000q07a", "cn-hangzhou"
EKS_EXTRAS = {"node_role": "arn:aws:iam::123456789012:role/eks-nodes", "subnets": ["subnet-0q"]}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    clusters = [
        *(Target(f"aks-{i}", ClusterRef("aks", s, "ml", f"aks-{i}")) for i, s in enumerate(SUBSCRIPTIONS)),
        *(
            Target(f"gke-{i}", ClusterRef("gke", p, "us-central1", f"gke-{i}"))
            for i, p in enumerate(PROJECTS)
        ),
        Target(EKS_CLUSTER, ClusterRef("eks", "", EKS_REGION, EKS_CLUSTER, EKS_EXTRAS)),
        Target(ACK_CLUSTER, ClusterRef("ack", "", ACK_REGION, ACK_CLUSTER)),
    ]
    settings = SandboxSettings(quotas=True, quota_scale=0.5, quota_speedup=2)
    running = Sandbox(tmp_path_factory.mktemp("quotas"), settings).start(clusters)
    yield running
    running.stop()


def enforce(sandbox: Sandbox, cloud: str, scale: float, speedup: float) -> dict[str, Any]:
    """`cloud`'s quota enforced afresh with these knobs; its limits as the emulator reports them."""
    sandbox.emulators[cloud].enforce_quotas(QuotaSettings(scale, speedup))
    return counts(sandbox, cloud)["limits"]


def counts(sandbox: Sandbox, cloud: str) -> dict[str, Any]:
    answer = requests.get(sandbox.endpoints[cloud] + "/sandbox/quotas", timeout=10)
    assert answer.status_code == 200
    return answer.json()


def burst(send: Any, times: int) -> tuple[list[requests.Response], float]:
    """`times` requests one after another, and the seconds they took."""
    started = time.monotonic()
    answers = [send() for _ in range(times)]
    return answers, time.monotonic() - started


def last_refused(answers: list[requests.Response]) -> requests.Response:
    """The burst's last refusal: waiting its Retry-After is waiting long enough for the next."""
    return next(a for a in reversed(answers) if a.status_code in (400, 429))


def admitted_at_most(limit: dict[str, Any], elapsed: float) -> int:
    """The most requests a limit can admit within `elapsed` seconds from full."""
    if limit["kind"] == "token_bucket":
        return int(limit["size"] + limit["refill_per_second"] * elapsed) + 1
    return limit["size"] * (int(elapsed / limit["window_seconds"]) + 1)


def test_serve_with_quotas_writes_the_knobs_beside_the_endpoints_and_every_emulator_counts(sandbox: Sandbox):
    written = json.loads((sandbox.directory / "endpoints.json").read_text())
    assert written["quotas"] == {"scale": 0.5, "speedup": 2}
    assert read_endpoints(sandbox.directory)["gke"] == sandbox.endpoints["gke"]  # the clouds' keys as before
    for cloud in ("aks", "gke", "eks", "ack"):
        report = counts(sandbox, cloud)
        assert (report["cloud"], report["enabled"], report["scale"], report["speedup"]) == (
            cloud,
            True,
            0.5,
            2,
        )
        assert report["source"] == QUOTAS[cloud].source


def test_without_quotas_nothing_is_counted(tmp_path):
    running = Sandbox(tmp_path, SandboxSettings()).start()
    try:
        assert requests.get(running.endpoints["aks"] + "/sandbox/quotas", timeout=10).json() == {
            "enabled": False
        }
        assert "quotas" not in json.loads((tmp_path / "endpoints.json").read_text())
    finally:
        running.stop()


# AKS: ARM's token buckets per subscription


def _aks_list(sandbox: Sandbox, subscription: str, index: int) -> requests.Response:
    path = (
        f"/subscriptions/{subscription}/resourceGroups/ml/providers/Microsoft.ContainerService"
        f"/managedClusters/aks-{index}/agentPools"
    )
    return requests.get(
        sandbox.endpoints["aks"] + path,
        params={"api-version": "2025-01-01"},
        headers={"Authorization": "Bearer sandbox"},
        timeout=10,
    )


def test_aks_reads_past_the_subscription_bucket_are_throttled_as_arm_throttles(sandbox: Sandbox):
    reads = enforce(sandbox, "aks", scale=0.02, speedup=10)["reads"]  # 5 tokens, refilled 5/s
    answers, elapsed = burst(lambda: _aks_list(sandbox, SUBSCRIPTIONS[0], 0), reads["size"] + 15)
    statuses = [a.status_code for a in answers]
    assert statuses[: reads["size"]] == [200] * reads["size"]  # within the bucket: none refused
    assert [a.headers["x-ms-ratelimit-remaining-subscription-reads"] for a in answers[:3]] == ["4", "3", "2"]
    assert set(statuses) == {200, 429}
    assert statuses.count(200) <= admitted_at_most(reads, elapsed)
    refused = next(a for a in answers if a.status_code == 429)
    assert refused.json()["error"]["code"] == "SubscriptionRequestsThrottled"
    assert f"requests for subscription '{SUBSCRIPTIONS[0]}' exceeded" in refused.json()["error"]["message"]
    retry_after = float(refused.headers["Retry-After"])
    assert 0 < retry_after <= 1 / reads["refill_per_second"] + 0.001
    # Another subscription has a bucket of its own.
    assert _aks_list(sandbox, SUBSCRIPTIONS[1], 1).status_code == 200
    time.sleep(float(last_refused(answers).headers["Retry-After"]))
    assert _aks_list(sandbox, SUBSCRIPTIONS[0], 0).status_code == 200
    report = counts(sandbox, "aks")["scopes"]
    assert report[SUBSCRIPTIONS[0]] == {"requests": len(answers) + 1, "throttled": statuses.count(429)}
    assert report[SUBSCRIPTIONS[1]] == {"requests": 1, "throttled": 0}


def test_aks_writes_count_in_their_own_bucket(sandbox: Sandbox):
    limits = enforce(sandbox, "aks", scale=0.02, speedup=10)
    path = (
        f"/subscriptions/{SUBSCRIPTIONS[0]}/resourceGroups/ml/providers/Microsoft.ContainerService"
        "/managedClusters/aks-0/agentPools/nosuchpool"
    )
    url, headers = sandbox.endpoints["aks"] + path, {"Authorization": "Bearer sandbox"}
    deletes = [
        requests.delete(url, params={"api-version": "2025-01-01"}, headers=headers, timeout=10)
        for _ in range(limits["deletes"]["size"] + 10)
    ]
    assert 429 in [d.status_code for d in deletes]  # the deletes' bucket is drained ...
    assert _aks_list(sandbox, SUBSCRIPTIONS[0], 0).status_code == 200  # ... the reads' is not


# GKE: the Kubernetes Engine API's requests per 100 s per project


def _gke_list(sandbox: Sandbox, project: str, index: int) -> requests.Response:
    path = f"/v1/projects/{project}/locations/us-central1/clusters/gke-{index}/nodePools"
    return requests.get(sandbox.endpoints["gke"] + path, timeout=10)


def test_gke_requests_past_the_project_interval_are_resource_exhausted(sandbox: Sandbox):
    window = enforce(sandbox, "gke", scale=0.001, speedup=200)["requests"]  # 5 per 0.5 s
    answers, elapsed = burst(lambda: _gke_list(sandbox, PROJECTS[0], 0), window["size"] + 5)
    statuses = [a.status_code for a in answers]
    assert statuses[: window["size"]] == [200] * window["size"]
    assert set(statuses) == {200, 429}
    assert statuses.count(200) <= admitted_at_most(window, elapsed)
    refused = next(a for a in answers if a.status_code == 429)
    error = refused.json()["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert error["message"].startswith("Quota exceeded for quota metric 'Requests'")
    assert 0 < float(refused.headers["Retry-After"]) <= window["window_seconds"]
    assert _gke_list(sandbox, PROJECTS[1], 1).status_code == 200  # another project's interval
    time.sleep(float(last_refused(answers).headers["Retry-After"]))
    assert _gke_list(sandbox, PROJECTS[0], 0).status_code == 200
    assert counts(sandbox, "gke")["scopes"][PROJECTS[0]]["throttled"] == statuses.count(429)


# EKS: EC2's token buckets, per access key and region and per action, through boto3


def _eks(sandbox: Sandbox, access_key: str) -> Any:
    return boto3.client(
        "eks",
        endpoint_url=sandbox.endpoints["eks"],
        region_name=EKS_REGION,
        aws_access_key_id=access_key,
        aws_secret_access_key="sandbox",
        # Each throttle seen, not retried by botocore.
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def test_eks_actions_past_their_bucket_raise_the_throttling_client_error(sandbox: Sandbox):
    reads = enforce(sandbox, "eks", scale=0.05, speedup=4)["non-mutating"]  # 5 tokens, refilled 4/s
    eks = _eks(sandbox, "AKIAQUOTAONE")
    errors: list[ClientError] = []
    started = time.monotonic()
    for _ in range(reads["size"] + 10):
        try:
            eks.list_nodegroups(clusterName=EKS_CLUSTER)
        except ClientError as exc:
            errors.append(exc)
    elapsed = time.monotonic() - started
    assert errors, "no list past the bucket was throttled"
    assert reads["size"] + 10 - len(errors) <= admitted_at_most(reads, elapsed)
    response = errors[0].response
    assert response["Error"]["Code"] == "ThrottlingException"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert (
        0
        < float(response["ResponseMetadata"]["HTTPHeaders"]["retry-after"])
        <= 1 / reads["refill_per_second"] + 0.001
    )
    # Each action has its own bucket, and each access key and region its own buckets.
    eks.describe_cluster(name=EKS_CLUSTER)
    _eks(sandbox, "AKIAQUOTATWO").list_nodegroups(clusterName=EKS_CLUSTER)
    time.sleep(float(errors[-1].response["ResponseMetadata"]["HTTPHeaders"]["retry-after"]))
    eks.list_nodegroups(clusterName=EKS_CLUSTER)
    scopes = counts(sandbox, "eks")["scopes"]
    assert scopes[f"AKIAQUOTAONE/{EKS_REGION}"]["throttled"] == len(errors)
    assert scopes[f"AKIAQUOTATWO/{EKS_REGION}"] == {"requests": 1, "throttled": 0}


# ACK: the chosen per-action window per AccessKeyId and region


def _ack_pools(sandbox: Sandbox, access_key: str) -> requests.Response:
    headers = {
        "Authorization": f"ACS3-HMAC-SHA256 Credential={access_key},SignedHeaders=host,Signature=0",
        "x-acs-version": "2015-12-15",
        "x-acs-action": "DescribeClusterNodePools",
    }
    return requests.get(
        f"{sandbox.endpoints['ack']}/clusters/{ACK_CLUSTER}/nodepools", headers=headers, timeout=10
    )


def test_ack_calls_past_the_window_are_refused_with_throttling_user(sandbox: Sandbox):
    window = enforce(sandbox, "ack", scale=0.5, speedup=2)["requests"]  # 5 per 0.5 s
    answers, elapsed = burst(lambda: _ack_pools(sandbox, "LTAIquotaone"), window["size"] + 5)
    statuses = [a.status_code for a in answers]
    assert statuses[: window["size"]] == [200] * window["size"]
    assert set(statuses) == {200, 400}
    assert statuses.count(200) <= admitted_at_most(window, elapsed)
    refused = next(a for a in answers if a.status_code == 400)
    assert refused.json()["code"] == "Throttling.User"
    wait_ms = int(refused.headers["x-acs-retry-after"])  # what the SDK reads into ThrottlingException
    assert 0 < wait_ms <= window["window_seconds"] * 1000
    assert _ack_pools(sandbox, "LTAIquotatwo").status_code == 200  # another account
    time.sleep(int(last_refused(answers).headers["x-acs-retry-after"]) / 1000)
    assert _ack_pools(sandbox, "LTAIquotaone").status_code == 200
    assert counts(sandbox, "ack")["scopes"][f"LTAIquotaone/{ACK_REGION}"]["throttled"] == statuses.count(400)


def test_serve_refuses_a_quota_scale_that_is_not_above_zero():
    done = subprocess.run(
        [sys.executable, "-m", "provisioner", "sandbox", "serve", "--quotas", "--quota-scale", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--quota-scale" in done.stderr and "Traceback" not in done.stderr
