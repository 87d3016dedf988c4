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


def test_aks_generation_markers_someone_changed_read_as_the_rule_says(sandbox, contract_fleet):
    """A generation tag edited to no number reads as generation 1 of the same fleet pool; without
    the fleet tag the pool is nobody's generation; and the markers never show as drift."""
    import dataclasses

    from provisioner.compile import desired_state
    from provisioner.drivers.registry import connect
    from provisioner.pools import FLEET_POOL_TAG_KEY, GENERATION_TAG_KEY

    compiled = contract_fleet.cluster("aks-contract")
    ref = compiled.target.ref
    driver = connect("aks", sandbox.directory)
    want = dataclasses.replace(
        desired_state(compiled.pools[1]), name="markg3", fleet_name="mark", generation=3
    )
    driver.create_pool(ref, want)
    tags = (
        sandbox.emulators["aks"].backend(ref.account, ref.location).cluster(ref.name).pools["markg3"]["tags"]
    )  # type: ignore[attr-defined]
    assert (tags[FLEET_POOL_TAG_KEY], tags[GENERATION_TAG_KEY]) == ("mark", "3")

    def read() -> tuple[str | None, int]:
        found = {p.name: p for p in driver.list_pools(ref)}["markg3"]
        assert want.differences(found) == []
        return found.fleet_name, found.generation

    assert read() == ("mark", 3)
    tags[GENERATION_TAG_KEY] = "three"
    assert read() == ("mark", 1)
    del tags[FLEET_POOL_TAG_KEY]
    assert read() == (None, 1)
    driver.delete_pool(ref, "markg3")
