"""Each driver, through its real SDK, against its emulator: the same contract for all three."""

from __future__ import annotations

import dataclasses

from provisioner.pools import Scaling, Taint
from tests.drivers.contract import DriverContract


class TestAksDriver(DriverContract):
    cloud = "aks"
    cluster_name = "aks-contract"
    system_pool = "system"


class TestGkeDriver(DriverContract):
    cloud = "gke"
    cluster_name = "gke-contract"
    system_pool = "default-pool"

    def test_the_listing_read_as_json_equals_each_pool_read_through_the_sdks_messages(
        self, driver, cluster, desired
    ):
        """list_pools reads the listing's JSON itself; get_node_pool goes through the SDK's
        protobuf messages: every pool, whatever it holds, must read the same both ways."""
        varied = dataclasses.replace(
            desired["ts"],
            name="varied",
            labels=(("stage", "canary"),),
            taints=(*desired["ts"].taints, Taint("extra", "yes", "PreferNoSchedule")),
            scaling=Scaling.fixed(2),
            spot=True,
        )
        made = [driver.create_pool(cluster, pool) for pool in (*desired.values(), varied)]
        try:
            listed = driver.list_pools(cluster)
            assert {p.name for p in listed} == {self.system_pool, *(p.name for p in made)}
            assert listed == [driver._read(cluster, p.name) for p in listed]
            assert {p.name: p.owned for p in listed}[self.system_pool] is False
        finally:
            for pool in made:
                driver.delete_pool(cluster, pool.name)


class TestEksDriver(DriverContract):
    cloud = "eks"
    cluster_name = "eks-contract"
    system_pool = "system"


class TestAckDriver(DriverContract):
    cloud = "ack"
    cluster_name = "ack-contract"
    system_pool = "default-nodepool"
    kinds = ("whole", "cgpu", "coremem", "share")
