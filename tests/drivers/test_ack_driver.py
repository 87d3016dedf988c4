"""The ACK driver through the real alibabacloud-cs20151215 SDK, over HTTP, against the ACK emulator."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.clusters import ClusterRef, Target
from provisioner.drivers.ack import AckDriver
from provisioner.drivers.registry import connect
from provisioner.errors import (
    Busy,
    CloudError,
    InvalidRequest,
    NotFound,
    NotOwned,
    OperationFailed,
    Throttled,
    Unavailable,
)
from provisioner.pools import GPU_TAINT, PoolState, Scaling, Taint
from provisioner.sandbox.ack.models import AckBackend, NodePool
from provisioner.sandbox.server import Sandbox, SandboxSettings

CLUSTER_ID = "c0123456789abcdef0123456789abcdef"
REGION = "cn-hangzhou"
REF = ClusterRef("ack", "", REGION, CLUSTER_ID, extras={"vswitches": ("vsw-bp1a2b3c4d5e6f7g8h9i0",)})
OP_SECONDS = 0.15

CGPU = PoolState(
    name="a10-cgpu",
    instance_type="ecs.gn7i-c8g1.2xlarge",
    gpus_per_node=1,
    mig_setting=None,
    sharing=None,
    spot=False,
    disk_size_gb=None,
    scaling=Scaling(0, 4, autoscaling=True),
    labels=(("ack.node.gpu.schedule", "cgpu"),),
    taints=(GPU_TAINT,),
    edge=False,
)
EDGE = PoolState(
    name="edge-t4",
    instance_type="",
    gpus_per_node=1,
    mig_setting=None,
    sharing=None,
    spot=False,
    disk_size_gb=None,
    scaling=Scaling.fixed(0),
    labels=(
        ("ack.node.gpu.schedule", "share"),
        ("gpu.provisioner.io/model", "T4"),
        ("gpu.provisioner.io/count", "1"),
    ),
    taints=(GPU_TAINT,),
    edge=True,
)
SPOT = dataclasses.replace(
    CGPU,
    name="l20-spot",
    instance_type="ecs.gn8is-2x.8xlarge",
    gpus_per_node=2,
    spot=True,
    disk_size_gb=200,
    scaling=Scaling.fixed(1),
    labels=(("ack.node.gpu.schedule", "default"), ("team", "ml")),
)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    directory: Path = tmp_path_factory.mktemp("ack-sandbox")
    running = Sandbox(directory, SandboxSettings(op_seconds=OP_SECONDS, seed=7)).start(
        [Target(CLUSTER_ID, REF)]
    )
    yield running
    running.stop()


@pytest.fixture
def driver(sandbox: Sandbox) -> AckDriver:
    return connect("ack", sandbox.directory)  # type: ignore[return-value]


@pytest.fixture
def backend(sandbox: Sandbox) -> AckBackend:
    return sandbox.emulators["ack"].backend("", REGION)  # type: ignore[attr-defined]


def on_the_cloud(backend: AckBackend, name: str) -> NodePool:
    """The emulator's own record of a pool: what the driver actually sent."""
    return next(p for p in backend.list_pools(CLUSTER_ID) if p.name == name)


def names(driver: AckDriver) -> set[str]:
    return {p.name for p in driver.list_pools(REF)}


def test_an_ecs_pool_with_a_cgpu_label_is_created_read_back_updated_and_deleted(driver, backend):
    created = driver.create_pool(REF, CGPU)
    assert CGPU.differences(created) == []
    assert (created.owned, created.status, created.edge) == (True, "ready", False)
    assert created.cloud_id is not None and created.cloud_id.startswith("np")
    listed = {p.name: p for p in driver.list_pools(REF)}["a10-cgpu"]
    assert CGPU.differences(listed) == [] and listed.owned and listed.cloud_id == created.cloud_id

    record = on_the_cloud(backend, "a10-cgpu")
    assert record.type == "ess"
    assert dict(record.labels) == {
        "ack.node.gpu.schedule": "cgpu",
        "provisioner.io/managed-by": "provisioner",
    }
    assert record.tags == (("managed-by", "provisioner"),)
    assert record.vswitch_ids == ("vsw-bp1a2b3c4d5e6f7g8h9i0",)
    assert (record.auto_scaling.enable, record.auto_scaling.type) == (True, "gpu")
    assert (record.spot_strategy, record.system_disk_size) == ("NoSpot", 40)  # ACK's default disk

    changed = dataclasses.replace(
        CGPU,
        labels=(*CGPU.labels, ("stage", "canary")),
        taints=(*CGPU.taints, Taint("extra", "yes", "PreferNoSchedule")),
        scaling=Scaling.fixed(2),
    )
    updated = driver.update_pool(REF, changed)
    assert changed.differences(updated) == []
    assert updated.nodes == 2
    record = on_the_cloud(backend, "a10-cgpu")
    assert dict(record.labels)["provisioner.io/managed-by"] == "provisioner"  # kept on modify
    assert record.tags == (("managed-by", "provisioner"),)
    assert (record.auto_scaling.enable, record.desired_size) == (False, 2)

    back = dataclasses.replace(changed, labels=CGPU.labels, taints=CGPU.taints, scaling=CGPU.scaling)
    assert back.differences(driver.update_pool(REF, back)) == []

    driver.delete_pool(REF, "a10-cgpu")
    assert "a10-cgpu" not in names(driver)


def test_an_edge_pool_carries_no_instance_type_nor_scaling_and_reads_back_equal(driver, backend):
    created = driver.create_pool(REF, EDGE)
    assert EDGE.differences(created) == []
    assert (created.edge, created.gpus_per_node, created.instance_type, created.nodes) == (True, 1, "", 0)
    record = on_the_cloud(backend, "edge-t4")
    assert (record.type, record.instance_types, record.vswitch_ids, record.tags) == ("edge", (), (), ())
    assert (record.auto_scaling.enable, record.desired_size) == (False, 0)

    relabelled = dataclasses.replace(EDGE, labels=(*EDGE.labels, ("site", "shop-12")))
    assert relabelled.differences(driver.update_pool(REF, relabelled)) == []
    record = on_the_cloud(backend, "edge-t4")
    assert (record.instance_types, record.auto_scaling.enable, record.desired_size) == ((), False, 0)
    assert dict(record.labels)["site"] == "shop-12"

    driver.delete_pool(REF, "edge-t4")
    assert "edge-t4" not in names(driver)


def test_a_spot_pool_with_a_disk_size_reads_back_equal(driver, backend):
    created = driver.create_pool(REF, SPOT)
    assert SPOT.differences(created) == []
    assert (created.spot, created.disk_size_gb, created.gpus_per_node, created.nodes) == (True, 200, 2, 1)
    record = on_the_cloud(backend, "l20-spot")
    assert (record.spot_strategy, record.system_disk_size, record.desired_size) == ("SpotAsPriceGo", 200, 1)
    on_demand = dataclasses.replace(SPOT, spot=False, disk_size_gb=300)
    assert on_demand.differences(driver.update_pool(REF, on_demand)) == []
    record = on_the_cloud(backend, "l20-spot")
    assert (record.spot_strategy, record.system_disk_size) == ("NoSpot", 300)
    driver.delete_pool(REF, "l20-spot")


def test_the_system_pool_is_listed_unowned_and_never_changed(driver, backend):
    system = {p.name: p for p in driver.list_pools(REF)}["default-nodepool"]
    assert (system.owned, system.instance_type, system.labels, system.nodes) == (
        False,
        "ecs.g7.xlarge",
        (),
        2,
    )
    before = on_the_cloud(backend, "default-nodepool")
    with pytest.raises(NotOwned, match="default-nodepool was not created by provisioner"):
        driver.update_pool(REF, dataclasses.replace(system, labels=(("taken", "over"),)))
    with pytest.raises(NotOwned):
        driver.delete_pool(REF, "default-nodepool")
    assert on_the_cloud(backend, "default-nodepool") == before


def test_an_operation_on_a_pool_whose_last_one_still_runs_is_busy(driver, backend, sandbox):
    want = dataclasses.replace(CGPU, name="busy")
    driver.create_pool(REF, want)
    nodepool_id = on_the_cloud(backend, "busy").nodepool_id
    engine = sandbox.engines["ack"]
    engine.op_seconds = 3600  # another client's change, which will not end by itself
    try:
        task = backend.modify_pool(CLUSTER_ID, nodepool_id, {"desired_size": 1})
    finally:
        engine.op_seconds = OP_SECONDS
    with pytest.raises(Busy, match="ErrorNodePoolStatusInvalid"):
        driver.update_pool(REF, dataclasses.replace(want, scaling=Scaling.fixed(3)))
    with pytest.raises(Busy):
        driver.delete_pool(REF, "busy")
    task.done_at = engine.now()  # the other change ends
    driver.delete_pool(REF, "busy")
    assert "busy" not in names(driver)


def test_a_pool_that_fails_while_being_created_ends_the_wait_at_once(driver, backend, sandbox):
    engine = sandbox.engines["ack"]
    engine.op_seconds = 3600
    outcome: list[BaseException] = []

    def create() -> None:
        try:
            driver.create_pool(REF, dataclasses.replace(CGPU, name="doomed"))
        except BaseException as error:  # handed to the test thread
            outcome.append(error)

    creating = threading.Thread(target=create)
    creating.start()
    try:
        deadline = time.monotonic() + 10
        while not any(p.name == "doomed" for p in backend.list_pools(CLUSTER_ID)):
            assert time.monotonic() < deadline, "the pool never appeared"
            time.sleep(0.01)
        with engine.lock:
            pool = on_the_cloud(backend, "doomed")
            backend.clusters[CLUSTER_ID].pools[pool.nodepool_id] = dataclasses.replace(pool, state="failed")
    finally:
        creating.join(timeout=30)
        engine.op_seconds = OP_SECONDS
    assert not creating.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], OperationFailed), outcome
    assert "creating node pool doomed" in str(outcome[0])
    assert {p.name: p for p in driver.list_pools(REF)}["doomed"].status == "failed"
    driver.delete_pool(REF, "doomed")  # a failed pool can be deleted
    assert "doomed" not in names(driver)


def test_throttling_and_outages_become_typed_errors_with_retry_after_in_seconds(driver, sandbox):
    engine = sandbox.engines["ack"]
    engine.fault_rate = 1.0
    try:
        errors = []
        for _ in range(12):
            with pytest.raises(CloudError) as caught:
                driver.list_pools(REF)
            errors.append(caught.value)
    finally:
        engine.fault_rate = 0.0
    assert {type(e) for e in errors} == {Throttled, Unavailable}
    throttled = [e for e in errors if isinstance(e, Throttled)]
    # The engine draws 0.05 to 0.5 s; the wire carries milliseconds (x-acs-retry-after).
    assert all(0.05 <= e.retry_after <= 0.5 for e in throttled), [e.retry_after for e in throttled]
    assert all("Throttling.User" in str(e) for e in throttled)
    assert all("ServiceUnavailable" in str(e) for e in errors if isinstance(e, Unavailable))


def test_an_invalid_request_carries_acks_message(driver):
    with pytest.raises(InvalidRequest, match=r"Invalid node pool name 'Not A Name!'.*1 to 63 characters"):
        driver.create_pool(REF, dataclasses.replace(CGPU, name="Not A Name!"))
    with pytest.raises(
        InvalidRequest, match="system_disk_size 10 is out of range: valid values are 20 to 2048"
    ):
        driver.create_pool(REF, dataclasses.replace(CGPU, name="tiny-disk", disk_size_gb=10))
    assert {"Not A Name!", "tiny-disk"}.isdisjoint(names(driver))


def test_missing_pools_and_clusters_are_not_found(driver):
    with pytest.raises(NotFound, match="nosuchpool"):
        driver.delete_pool(REF, "nosuchpool")
    with pytest.raises(NotFound):
        driver.update_pool(REF, dataclasses.replace(CGPU, name="nosuchpool"))
    other = dataclasses.replace(REF, name="c" + "f" * 32)
    with pytest.raises(NotFound, match="ErrorClusterNotFound"):
        driver.list_pools(other)


def test_discover_lists_every_cluster_of_the_region_across_pages(driver, sandbox):
    emulator = sandbox.emulators["ack"]
    beijing = emulator.backend("", "cn-beijing")  # type: ignore[attr-defined]
    ids = [f"c{n:032x}" for n in range(1, 151)]  # more than one page of 100
    for cluster_id in ids:
        beijing.add_cluster(cluster_id)
    scope = ClusterRef("ack", "", "cn-beijing", "")
    found = driver.discover(scope)
    assert sorted(ref.name for ref in found) == ids
    assert {(ref.cloud, ref.account, ref.location) for ref in found} == {("ack", "", "cn-beijing")}
    assert driver.discover(dataclasses.replace(scope, location=REGION)) == [
        ClusterRef("ack", "", REGION, CLUSTER_ID)
    ]
