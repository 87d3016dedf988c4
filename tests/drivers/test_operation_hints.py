"""What each API says of an operation's end, and that drivers use it, over the wire: GKE's
Operation startTime and endTime, ARM's Azure-AsyncOperation status (startTime, endTime) and
Retry-After, ACK's task created and updated times. The emulators give them as the real APIs do;
the drivers poll the operation itself, first when the API or earlier operations of the kind say it
ends, so an operation whose length is known is asked about once.

Counts of requests, seen at the emulator, not timings: each sandbox here serves its own clusters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from werkzeug.wrappers import Request

from provisioner.clusters import ClusterRef
from provisioner.compile import CompiledFleet, desired_state
from provisioner.drivers import seconds_between
from provisioner.drivers.registry import connect
from provisioner.pools import PoolState
from provisioner.sandbox.server import Sandbox, SandboxSettings

# Operations long enough to be polled: on AKS over a second, so ARM has a whole second to give
# in Retry-After (2, rounded up); on ACK whole seconds, since its times have no fractions.
OP_SECONDS = {"gke": 0.5, "aks": 1.5, "ack": 1.0}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory, contract_fleet: CompiledFleet) -> Iterator[Sandbox]:
    directory: Path = tmp_path_factory.mktemp("hints")
    # Not EKS: moto keeps one state per process, where the session's sandbox made its cluster.
    clusters = [c.target for c in contract_fleet.clusters if c.target.cloud in OP_SECONDS]
    running = Sandbox(directory, SandboxSettings()).start(clusters)
    for cloud, seconds in OP_SECONDS.items():
        running.engines[cloud].op_seconds = seconds
    yield running
    running.stop()


@pytest.fixture
def seen(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every request the emulators answer while the test runs, as (cloud, "METHOD path")."""
    requests_seen: list[tuple[str, str]] = []
    for cloud, emulator in sandbox.emulators.items():
        app = emulator.app  # type: ignore[attr-defined]

        def recording(request: Request, respond: Any = app.respond, cloud: str = cloud) -> Any:
            requests_seen.append((cloud, f"{request.method} {request.path}"))
            return respond(request)

        monkeypatch.setattr(app, "respond", recording)
    return requests_seen


def target(fleet: CompiledFleet, cloud: str) -> tuple[ClusterRef, dict[str, PoolState]]:
    compiled = next(c for c in fleet.clusters if c.target.cloud == cloud)
    return compiled.target.ref, {p.pool.name: desired_state(p) for p in compiled.pools}


def polls(seen: list[tuple[str, str]], cloud: str, marker: str) -> int:
    return sum(1 for c, request in seen if c == cloud and request.startswith("GET") and marker in request)


def test_gke_operations_carry_their_start_and_end_times(sandbox: Sandbox, contract_fleet: CompiledFleet):
    url = sandbox.endpoints["gke"]
    parent = "/v1/projects/contract-project/locations/us-central1"
    body = {"nodePool": {"name": "timed", "config": {"machineType": "g2-standard-8"}}}
    int_enums = {"$alt": "json;enum-encoding=int"}  # as the SDK asks
    started = requests.post(
        f"{url}{parent}/clusters/contract-gke/nodePools", json=body, params=int_enums
    ).json()
    assert started["status"] == 2 and started["startTime"].endswith("Z") and "endTime" not in started
    done = started
    while done["status"] != 3:  # DONE
        done = requests.get(f"{url}{parent}/operations/{started['name']}", params=int_enums).json()
    assert seconds_between(done["startTime"], done["endTime"]) == pytest.approx(OP_SECONDS["gke"])


def test_arm_says_when_to_look_again_and_aks_follows_the_operation_not_the_pool(
    sandbox: Sandbox, contract_fleet: CompiledFleet, seen: list[tuple[str, str]]
):
    cluster, desired = target(contract_fleet, "aks")
    driver = connect("aks", sandbox.directory)
    pool = dataclasses.replace(desired["ts"], name="hinted")
    driver.create_pool(cluster, pool)
    status_polls = polls(seen, "aks", "/operations/")
    pool_reads = polls(seen, "aks", "/agentPools/hinted")
    assert status_polls == 1  # at the PUT's Retry-After (2 s), when the 1.5 s operation has ended
    assert pool_reads == 1  # the read-back once it ended: the pool itself is never polled

    url = sandbox.endpoints["aks"]
    path = (
        "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/contract/providers"
        "/Microsoft.ContainerService/managedClusters/contract-aks/agentPools/hinted"
    )
    auth = {"Authorization": "Bearer test"}
    deleting = requests.delete(f"{url}{path}", params={"api-version": "2026-08-01"}, headers=auth)
    assert deleting.status_code == 202 and deleting.headers["Retry-After"] == "2"
    running = requests.get(deleting.headers["Azure-AsyncOperation"], headers=auth)
    assert running.json()["status"] == "InProgress" and "endTime" not in running.json()
    assert running.headers["Retry-After"] in ("1", "2")  # the whole seconds left, rounded up
    done = running.json()
    while done["status"] != "Succeeded":
        done = requests.get(deleting.headers["Azure-AsyncOperation"], headers=auth).json()
    assert seconds_between(done["startTime"], done["endTime"]) == pytest.approx(OP_SECONDS["aks"])


# (cloud, a fleet pool of its contract cluster, what its operation polls ask for): GKE's
# Operation by its startTime and endTime, ACK's task by its created and updated times.
LEARNED = [("gke", "ts", "/operations/"), ("ack", "cgpu", "/tasks/")]


@pytest.mark.parametrize("learned", LEARNED, ids=[cloud for cloud, _, _ in LEARNED])
def test_an_operation_is_polled_once_where_earlier_ones_of_its_type_tell_its_length(
    sandbox: Sandbox,
    contract_fleet: CompiledFleet,
    seen: list[tuple[str, str]],
    learned: tuple[str, str, str],
):
    cloud, pool, asked = learned
    cluster, desired = target(contract_fleet, cloud)
    driver = connect(cloud, sandbox.directory)
    first, second = (dataclasses.replace(desired[pool], name=f"learn{i}") for i in range(2))
    driver.create_pool(cluster, first)  # nothing known yet: polled on the schedule, from 0.1 s
    assert polls(seen, cloud, asked) > 1
    seen.clear()
    driver.create_pool(cluster, second)
    assert polls(seen, cloud, asked) == 1  # when the first one took to end: it has
