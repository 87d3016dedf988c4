"""Each driver, through its real SDK, against its emulator: the same contract for all three."""

from __future__ import annotations

import dataclasses

from provisioner.pools import Scaling, Taint
from tests.drivers.contract import DriverContract, record_requests


def cluster_path(cluster) -> str:
    return f"projects/{cluster.account}/locations/{cluster.location}/clusters/{cluster.name}"


class TestAksDriver(DriverContract):
    cloud = "aks"
    cluster_name = "aks-contract"
    system_pool = "system"
    reported_version, served_version = "1.34.2", "v1.34.2"


class TestGkeDriver(DriverContract):
    cloud = "gke"
    cluster_name = "gke-contract"
    system_pool = "default-pool"
    reported_version, served_version = "1.36.1-gke.1000000", "v1.36.1"  # 1.36 runs GKE's .1 here

    def test_one_get_cluster_per_cluster_per_run_gives_its_version_and_zones(
        self, driver, cluster, sandbox, monkeypatch
    ):
        seen = record_requests(sandbox, self.cloud, monkeypatch)
        first = driver.kubernetes_version(cluster)
        assert driver.kubernetes_version(cluster) == first
        assert driver._cluster_zones(cluster) == ("us-central1-a", "us-central1-b", "us-central1-c")
        assert seen == [f"GET /v1/{cluster_path(cluster)}"]

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
        replacement = self.generation(varied, 2)
        made = [driver.create_pool(cluster, pool) for pool in (*desired.values(), varied, replacement)]
        try:
            listed = driver.list_pools(cluster)
            assert {p.name for p in listed} == {self.system_pool, *(p.name for p in made)}
            read = [driver._read(cluster, p.name) for p in listed]
            assert listed == read
            markers = [(p.name, p.fleet_name, p.generation) for p in listed]  # not compared fields
            assert markers == [(p.name, p.fleet_name, p.generation) for p in read]
            assert ("varied-g2", "varied", 2) in markers
            assert {p.name: p.owned for p in listed}[self.system_pool] is False
        finally:
            for pool in made:
                driver.delete_pool(cluster, pool.name)


class TestEksDriver(DriverContract):
    cloud = "eks"
    cluster_name = "eks-contract"
    system_pool = "system"
    reported_version, served_version = "1.33", "v1.33.4"  # EKS writes major.minor only


class TestAckDriver(DriverContract):
    cloud = "ack"
    cluster_name = "ack-contract"
    system_pool = "default-nodepool"
    kinds = ("whole", "cgpu", "coremem", "share")
    reported_version, served_version = "1.35.1-aliyun.1", "v1.35.1"  # the sandbox's default, 1.35
    unknown_cluster = "c0000000000000000000000000000dead"  # ACK names a cluster by its ID
