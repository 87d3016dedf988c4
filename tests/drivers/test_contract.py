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


class TestAckDriver(DriverContract):
    cloud = "ack"
    cluster_name = "ack-contract"
    system_pool = "default-nodepool"
    kinds = ("whole", "cgpu", "coremem", "share")
