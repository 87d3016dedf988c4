"""The contract every Driver keeps, as one mixin each driver's test class inherits (as libcloud's
driver tests do). It runs the real SDK over HTTP against the cloud's emulator."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from kubernetes import client, config

from provisioner import hardware
from provisioner.clusters import ClusterRef, KubernetesVersion
from provisioner.compile import CompiledFleet, desired_state
from provisioner.drivers import Driver
from provisioner.drivers.registry import connect
from provisioner.errors import Busy, CloudError, InvalidRequest, NotFound, NotOwned, Throttled, Unavailable
from provisioner.generations import cloud_name, group
from provisioner.pools import POOL_NODE_LABEL, PoolState, Scaling, Taint
from provisioner.sandbox.server import Sandbox
from tests.unowned import USER_TAG, create_unowned, identity


def record_requests(sandbox: Sandbox, cloud: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every request `cloud`'s emulator answers from now until the test ends, as "METHOD path"."""
    seen: list[str] = []
    app = sandbox.emulators[cloud].app
    respond = app.respond

    def recording(request: Any) -> Any:
        seen.append(f"{request.method} {request.path}")
        return respond(request)

    monkeypatch.setattr(app, "respond", recording)
    return seen


# The contract fleet's pool names: MIG, time-sliced, MPS, MIG + sharing (a class may name its own).
KINDS = ("mig", "ts", "mps", "migts")


class DriverContract:
    cloud: ClassVar[str]
    cluster_name: ClassVar[str]
    system_pool: ClassVar[str]  # the pool the sandbox seeds, which the tool does not own
    kinds: ClassVar[tuple[str, ...]] = KINDS  # its pools in the contract fleet (conftest parametrizes)
    reported_version: ClassVar[str]  # the version conftest seeds, as the cloud's API writes it
    served_version: ClassVar[str]  # ... and as the cluster's own API server gives it in /version
    unknown_cluster: ClassVar[str] = "no-such-cluster"  # a name the cloud takes, of no cluster

    @pytest.fixture
    def driver(self, sandbox: Sandbox) -> Driver:
        return connect(self.cloud, sandbox.directory)

    @pytest.fixture
    def cluster(self, contract_fleet: CompiledFleet) -> ClusterRef:
        return contract_fleet.cluster(self.cluster_name).target.ref  # type: ignore[union-attr]

    @pytest.fixture
    def desired(self, contract_fleet: CompiledFleet) -> dict[str, PoolState]:
        compiled = contract_fleet.cluster(self.cluster_name)
        return {p.pool.name: desired_state(p) for p in compiled.pools}  # type: ignore[union-attr]

    def names(self, driver: Driver, cluster: ClusterRef) -> set[str]:
        return {p.name for p in driver.list_pools(cluster)}

    def generation(self, first: PoolState, n: int, **changes: Any) -> PoolState:
        """Generation `n` of the fleet pool `first` is generation 1 of, under its cloud name."""
        name = cloud_name(first.name, n, hardware.load().clouds[self.cloud])
        return dataclasses.replace(first, name=name, fleet_name=first.name, generation=n, **changes)

    def fleet_pool(self, want: PoolState, name: str) -> PoolState:
        """`want` as fleet pool `name`'s first generation, with the node label the compiler gives
        every pool (its fleet name; ACK reads a replacement's fleet name from it)."""
        return dataclasses.replace(want, name=name, labels=(*want.labels, (POOL_NODE_LABEL, name)))

    def kube_nodes(self, sandbox: Sandbox, pool: PoolState) -> list[str]:
        """The nodes the cluster's Kubernetes API lists for `pool`, by the cloud's own pool label."""
        label = hardware.load().clouds[self.cloud].pool_label
        assert label is not None
        value = pool.cloud_id if label.value == "cloudId" else pool.name
        api = config.new_client_from_config(str(sandbox.kubeconfig), context=self.cluster_name)
        found = client.CoreV1Api(api).list_node(label_selector=f"{label.key}={value}").items
        return sorted(node.metadata.name for node in found)

    def test_a_new_generation_beside_the_first_reads_back_as_the_same_fleet_pool(
        self, driver, cluster, desired, sandbox
    ):
        first = self.fleet_pool(desired[self.kinds[1]], "gen")
        second = self.generation(first, 2, nodes=3)  # a fixed size starts at its size, whatever apply says
        assert driver.create_pool(cluster, first).generation == 1
        made = driver.create_pool(cluster, second)
        assert (made.name, made.pool_name, made.generation) == (second.name, "gen", 2)
        assert second.differences(made) == [] and len(self.kube_nodes(sandbox, made)) == 1

        listed = {p.name: p for p in driver.list_pools(cluster)}
        assert first.differences(listed["gen"]) == [] and second.differences(listed[second.name]) == []
        assert (listed["gen"].fleet_name, listed["gen"].generation) == (None, 1)
        assert (listed[second.name].fleet_name, listed[second.name].generation) == ("gen", 2)
        assert [p.name for p in group(listed.values())["gen"].pools] == ["gen", second.name]

        # An update keeps the markers, even where the desired state it is given names no generation.
        changed = dataclasses.replace(
            second, labels=(*second.labels, ("stage", "canary")), scaling=Scaling(1, 3, autoscaling=True)
        )
        for asked in (changed, dataclasses.replace(changed, fleet_name=None, generation=1)):
            updated = driver.update_pool(cluster, asked)
            assert changed.differences(updated) == [], updated
            assert (updated.pool_name, updated.generation) == ("gen", 2)
        again = {p.name: p for p in driver.list_pools(cluster)}[second.name]
        assert (again.pool_name, again.generation) == ("gen", 2) and changed.differences(again) == []

        driver.delete_pool(cluster, second.name)
        driver.delete_pool(cluster, "gen")
        assert not {"gen", second.name} & self.names(driver, cluster)

    def test_a_new_generation_starts_with_the_nodes_of_the_one_it_replaces(
        self, driver, cluster, desired, sandbox
    ):
        first = self.fleet_pool(desired[self.kinds[0]], "grow")
        want = self.generation(first, 2, scaling=Scaling(0, 5, autoscaling=True), nodes=3)
        created = driver.create_pool(cluster, want)
        assert want.differences(created) == [], created
        assert created.scaling == Scaling(0, 5, autoscaling=True)  # the start is no bound
        assert created.nodes in (3, None)  # None: GKE's NodePool gives no current size
        assert len(self.kube_nodes(sandbox, created)) == 3  # on GKE one in each of the cluster's 3 zones
        listed = {p.name: p for p in driver.list_pools(cluster)}[want.name]
        assert want.differences(listed) == [] and listed.nodes in (3, None)
        driver.delete_pool(cluster, want.name)

    def test_create_read_back_update_delete(self, driver, cluster, desired, kind):
        want = desired[kind]
        created = driver.create_pool(cluster, want)
        assert want.differences(created) == [], created
        assert created.owned

        listed = {p.name: p for p in driver.list_pools(cluster)}
        assert want.differences(listed[kind]) == []
        assert listed[kind].owned

        changed = dataclasses.replace(
            want,
            labels=(*want.labels, ("stage", "canary")),
            taints=(*want.taints, Taint("extra", "yes", "PreferNoSchedule")),
            scaling=Scaling(2, 5, autoscaling=True),
        )
        updated = driver.update_pool(cluster, changed)
        assert changed.differences(updated) == [], updated

        # 3 nodes: a pool of a regional GKE cluster spreads a fixed count over its three zones.
        back = dataclasses.replace(changed, labels=want.labels, taints=want.taints, scaling=Scaling.fixed(3))
        assert back.differences(driver.update_pool(cluster, back)) == []

        driver.delete_pool(cluster, kind)
        assert kind not in self.names(driver, cluster)

    def test_pools_it_did_not_create_are_listed_and_never_changed(self, driver, cluster, desired):
        system = {p.name: p for p in driver.list_pools(cluster)}[self.system_pool]
        assert not system.owned
        with pytest.raises(NotOwned):
            driver.update_pool(cluster, dataclasses.replace(system, labels=(("taken", "over"),)))
        with pytest.raises(NotOwned):
            driver.delete_pool(cluster, self.system_pool)
        after = {p.name: p for p in driver.list_pools(cluster)}[self.system_pool]
        assert after == system

    def test_adopting_adds_the_marker_and_nothing_else(self, driver, cluster, desired, sandbox):
        made = dataclasses.replace(desired[self.kinds[-1]], name="adoptee")
        before = create_unowned(sandbox, cluster, made)
        was = identity(sandbox, cluster, "adoptee")
        with pytest.raises(NotOwned):
            driver.delete_pool(cluster, "adoptee")

        adopted = driver.adopt_pool(cluster, "adoptee")
        assert adopted.owned
        assert adopted == dataclasses.replace(before, owned=True)  # every compared field as it was
        assert (adopted.nodes, adopted.cloud_id) == (before.nodes, before.cloud_id)
        now = identity(sandbox, cluster, "adoptee")
        assert (now["id"], now["created"]) == (was["id"], was["created"])  # the same pool, not a new one
        assert now["tags"] == {**dict([USER_TAG]), "managed-by": "provisioner"}  # the user's tag kept

        assert driver.adopt_pool(cluster, "adoptee") == adopted  # again: nothing to do
        assert identity(sandbox, cluster, "adoptee") == now
        driver.delete_pool(cluster, "adoptee")  # owned now: the tool may delete it
        assert "adoptee" not in self.names(driver, cluster)

    def test_a_second_operation_while_one_runs_is_busy(self, driver, cluster, desired, sandbox):
        want = dataclasses.replace(desired[self.kinds[1]], name="busy")
        engine = sandbox.engines[self.cloud]
        usual, engine.op_seconds = engine.op_seconds, 3600  # runs until the test ends it
        creating = threading.Thread(target=driver.create_pool, args=(cluster, want))
        creating.start()
        try:
            deadline = time.monotonic() + 10
            while "busy" not in self.names(driver, cluster):
                assert time.monotonic() < deadline, "the pool never appeared"
                time.sleep(0.02)
            with pytest.raises(Busy):
                driver.update_pool(cluster, dataclasses.replace(want, scaling=Scaling.fixed(3)))
        finally:
            engine.op_seconds = usual
            engine.advance(3600)  # the creation ends
            creating.join(timeout=30)
        assert not creating.is_alive()
        driver.delete_pool(cluster, "busy")

    def faults(self, sandbox: Sandbox, call: Callable[[], object]) -> list[CloudError]:
        """What `call` raises 12 times over while every request is answered 429 or 503."""
        engine = sandbox.engines[self.cloud]
        engine.fault_rate = 1.0
        try:
            errors = []
            for _ in range(12):
                with pytest.raises(CloudError) as caught:
                    call()
                errors.append(caught.value)
        finally:
            engine.fault_rate = 0.0
        return errors

    def test_throttling_and_outages_become_typed_errors(self, driver, cluster, sandbox):
        errors = self.faults(sandbox, lambda: driver.list_pools(cluster))
        assert {type(e) for e in errors} == {Throttled, Unavailable}
        assert all(e.retry_after and e.retry_after > 0 for e in errors if isinstance(e, Throttled))

    def test_the_kubernetes_version_is_the_clouds_own_read_in_one_request(
        self, driver, cluster, sandbox, monkeypatch
    ):
        seen = record_requests(sandbox, self.cloud, monkeypatch)
        version = driver.kubernetes_version(cluster)
        assert len(seen) == 1, seen
        assert version.text == self.reported_version  # the cloud's own string, as its API gave it
        assert version == KubernetesVersion.parse(self.served_version)  # the release the cluster runs
        assert str(version) == self.served_version.removeprefix("v").rsplit(".", 1)[0]
        # The cluster's own API server reports the same release, as kubectl and the client read it.
        api = config.new_client_from_config(str(sandbox.kubeconfig), context=self.cluster_name)
        info = client.VersionApi(api).get_code()
        assert (info.major, info.minor, info.git_version) == (
            str(version.major),
            str(version.minor),
            self.served_version,
        )

    def test_preparing_makes_no_request(self, driver, cluster, sandbox, monkeypatch):
        """prepare makes clients, not calls: it spends none of the quota, and the listing after
        it goes as without it."""
        seen = record_requests(sandbox, self.cloud, monkeypatch)
        elsewhere = dataclasses.replace(cluster, name=self.unknown_cluster)
        driver.prepare([cluster, elsewhere, cluster])
        assert seen == []
        assert self.system_pool in self.names(driver, cluster)

    def test_the_kubernetes_version_of_a_cluster_the_cloud_lacks_is_not_found(self, driver, cluster):
        with pytest.raises(NotFound):
            driver.kubernetes_version(dataclasses.replace(cluster, name=self.unknown_cluster))

    def test_reading_the_kubernetes_version_throttled_or_down_is_typed(self, driver, cluster, sandbox):
        errors = self.faults(sandbox, lambda: driver.kubernetes_version(cluster))
        assert {type(e) for e in errors} == {Throttled, Unavailable}
        assert all(e.retry_after and e.retry_after > 0 for e in errors if isinstance(e, Throttled))
        assert driver.kubernetes_version(cluster).text == self.reported_version  # and read once it answers

    def test_an_invalid_request_carries_the_clouds_message(self, driver, cluster, desired):
        bad = dataclasses.replace(desired[self.kinds[1]], name="Not A Name!")
        with pytest.raises(InvalidRequest, match="Not A Name!"):
            driver.create_pool(cluster, bad)
        assert "Not A Name!" not in self.names(driver, cluster)

    def test_deleting_a_missing_pool_is_not_found(self, driver, cluster):
        with pytest.raises(NotFound):
            driver.delete_pool(cluster, "nosuchpool")
