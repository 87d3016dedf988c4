"""Each driver, through its real SDK, against its emulator: the same contract for all three."""

from __future__ import annotations

from tests.drivers.contract import DriverContract


class TestAksDriver(DriverContract):
    cloud = "aks"
    cluster_name = "aks-contract"
    system_pool = "system"


class TestGkeDriver(DriverContract):
    cloud = "gke"
    cluster_name = "gke-contract"
    system_pool = "default-pool"


class TestEksDriver(DriverContract):
    cloud = "eks"
    cluster_name = "eks-contract"
    system_pool = "system"


def test_an_aks_label_change_keeps_the_autoscalers_node_count(sandbox, contract_fleet):
    """ARM's PUT replaces the whole pool: the count the autoscaler reached must survive an update."""
    import dataclasses

    from provisioner.drivers.registry import connect
    from provisioner.sharing import desired_state

    compiled = contract_fleet.cluster("aks-contract")
    driver = connect("aks", sandbox.directory)
    want = dataclasses.replace(desired_state(compiled.pools[0]), name="keepcount")  # autoscaled 0-3
    driver.create_pool(compiled.target.ref, want)
    backend = sandbox.emulators["aks"].backend
    key = next(k for k in backend.engine.clusters() if k.endswith("/contract-aks"))
    backend.engine.cluster(key).pools["keepcount"]["count"] = 2  # the autoscaler added two nodes
    updated = driver.update_pool(compiled.target.ref, dataclasses.replace(want, labels=(("team", "ml"),)))
    assert updated.nodes == 2
    driver.delete_pool(compiled.target.ref, "keepcount")
