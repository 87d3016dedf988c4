"""The emulators' shared engine: operations take time, one per cluster, faults at a rate."""

from __future__ import annotations

import pytest

from provisioner.sandbox.engine import ClusterBusy, Engine, UnknownCluster


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_operation_finishes_after_op_seconds_and_frees_the_cluster():
    clock = Clock()
    engine = Engine(op_seconds=2.0, clock=clock)
    cluster = engine.add_cluster("c1")
    cluster.pools["gpu"] = {"status": "PROVISIONING"}
    operation = engine.begin(
        "c1", "create", "gpu", finish=lambda: cluster.pools["gpu"].update(status="RUNNING")
    )
    assert not engine.operation(operation.id).done
    with pytest.raises(ClusterBusy, match=r"operation op-1 \(create gpu\) is in progress"):
        engine.begin("c1", "update", "other")
    clock.now += 2.0
    assert engine.operation(operation.id).done
    assert engine.cluster("c1").pools["gpu"]["status"] == "RUNNING"
    engine.begin("c1", "update", "gpu")  # free again


def test_advancing_the_clock_ends_what_falls_due_and_only_that():
    engine = Engine(op_seconds=3600, clock=Clock())
    engine.add_cluster("a")
    engine.add_cluster("b")
    first = engine.begin("a", "create", "p")
    engine.advance(1800)
    second = engine.begin("b", "create", "p")  # due an hour after the moved clock
    engine.advance(1800)
    assert engine.operation(first.id).done
    assert not engine.operation(second.id).done
    assert engine.now() == 100.0 + 3600


def test_clusters_do_not_block_each_other():
    engine = Engine(op_seconds=5.0, clock=Clock())
    engine.add_cluster("a")
    engine.add_cluster("b")
    engine.begin("a", "create", "p")
    engine.begin("b", "create", "p")
    assert engine.clusters() == ["a", "b"]


def test_zero_op_seconds_finishes_at_once():
    engine = Engine(clock=Clock())
    engine.add_cluster("c")
    assert engine.begin("c", "delete", "p").done


def test_unknown_cluster():
    with pytest.raises(UnknownCluster):
        Engine().cluster("nope")


def test_faults_come_at_about_the_rate_asked_and_name_a_retry_after_when_throttling():
    engine = Engine(fault_rate=0.3, seed=7)
    faults = [engine.fault() for _ in range(2000)]
    hit = [f for f in faults if f is not None]
    assert 0.25 < len(hit) / len(faults) < 0.35
    assert {f.status for f in hit} == {429, 503}
    assert all(f.retry_after is not None for f in hit if f.status == 429)
    assert Engine(fault_rate=0.0).fault() is None


def test_a_refused_operation_changes_nothing():
    engine = Engine(op_seconds=5.0, clock=Clock())
    cluster = engine.add_cluster("c")
    engine.begin("c", "create", "a", start=lambda: cluster.pools.__setitem__("a", {"status": "creating"}))
    with pytest.raises(ClusterBusy):
        engine.begin("c", "create", "b", start=lambda: cluster.pools.__setitem__("b", {"status": "creating"}))
    assert list(cluster.pools) == ["a"]
