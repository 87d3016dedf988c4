"""The AKS driver beyond the shared contract: what ARM's whole-pool PUT and AKS's Spot additions ask
of it, through the real SDK against the emulator."""

from __future__ import annotations


def test_an_aks_label_change_keeps_the_autoscalers_node_count(sandbox, contract_fleet):
    """ARM's PUT replaces the whole pool: the count the autoscaler reached must survive an update."""
    import dataclasses

    from provisioner.compile import desired_state
    from provisioner.drivers.registry import connect

    compiled = contract_fleet.cluster("aks-contract")
    driver = connect("aks", sandbox.directory)
    want = dataclasses.replace(desired_state(compiled.pools[0]), name="keepcount")  # autoscaled 0-3
    driver.create_pool(compiled.target.ref, want)
    ref = compiled.target.ref
    backend = sandbox.emulators["aks"].backend(ref.account, ref.location)  # type: ignore[attr-defined]
    backend.cluster(ref.name).pools["keepcount"]["count"] = 2  # the autoscaler added two nodes
    updated = driver.update_pool(compiled.target.ref, dataclasses.replace(want, labels=(("team", "ml"),)))
    assert updated.nodes == 2
    driver.delete_pool(compiled.target.ref, "keepcount")


def test_an_aks_spot_pool_reads_back_as_desired_and_keeps_what_aks_added(sandbox, contract_fleet):
    """AKS writes its Spot label and taint into the pool's own nodeLabels / nodeTaints: they are the
    cloud's, so the driver reads the pool back as the fleet wants it, and updates keep them."""
    import dataclasses

    from provisioner.compile import desired_state
    from provisioner.drivers.registry import connect
    from provisioner.pools import Taint

    compiled = contract_fleet.cluster("aks-contract")
    driver = connect("aks", sandbox.directory)
    want = dataclasses.replace(desired_state(compiled.pools[0]), name="spotback")  # spot: true
    assert want.spot
    created = driver.create_pool(compiled.target.ref, want)
    listed = {p.name: p for p in driver.list_pools(compiled.target.ref)}["spotback"]
    for read in (created, listed):
        assert want.differences(read) == []
        assert (read.labels, read.taints) == (want.labels, want.taints)
    changed = dataclasses.replace(want, labels=(("team", "ml"),), taints=(Taint("a", "b", "NoExecute"),))
    updated = driver.update_pool(compiled.target.ref, changed)
    assert changed.differences(updated) == []
    assert (updated.labels, updated.taints) == ((("team", "ml"),), (Taint("a", "b", "NoExecute"),))
    ref = compiled.target.ref
    backend = sandbox.emulators["aks"].backend(ref.account, ref.location)  # type: ignore[attr-defined]
    on_the_cloud = backend.cluster(ref.name).pools["spotback"]
    assert on_the_cloud["nodeLabels"] == {"team": "ml", "kubernetes.azure.com/scalesetpriority": "spot"}
    assert on_the_cloud["nodeTaints"] == [
        "a=b:NoExecute",
        "kubernetes.azure.com/scalesetpriority=spot:NoSchedule",
    ]
    driver.delete_pool(compiled.target.ref, "spotback")
