"""NVIDIA's conventions (nvidia.py): the labels and device-plugin configs the tool writes, and that
reading them back, from labels or the clouds' own pool fields, gives what was written."""

from __future__ import annotations

import pytest

from provisioner import hardware
from provisioner.hardware import CloudProfile, Gpu, MigProfile
from provisioner.nvidia import (
    DevicePluginConfig,
    default_device_plugin_config,
    marks,
    read_isolation,
    read_mig,
    read_sharing,
)
from provisioner.pools import NativeSharing, PoolState, Scaling


def pool_state(
    mig_setting: str | None = None, sharing: NativeSharing | None = None, labels: dict[str, str] | None = None
) -> PoolState:
    return PoolState(
        name="p",
        instance_type="any",
        gpus_per_node=1,
        mig_setting=mig_setting,
        sharing=sharing,
        spot=False,
        disk_size_gb=None,
        scaling=Scaling.fixed(1),
        labels=tuple((labels or {}).items()),
        taints=(),
    )


def cloud(key: str) -> CloudProfile:
    return hardware.load().clouds[key]


def gpu(cloud_key: str, instance_type: str) -> Gpu:
    found = hardware.load().instance_type(cloud_key, instance_type)
    assert found is not None
    return found.gpu


def test_the_default_config_is_the_mig_strategy_alone():
    assert default_device_plugin_config() == {"version": "v1", "flags": {"migStrategy": "single"}}


@pytest.mark.parametrize(
    ("config", "key", "section"),
    [
        (DevicePluginConfig("time-slicing", 10), "time-sliced-10", "timeSlicing"),
        (DevicePluginConfig("mps", 4), "mps-4", "mps"),
    ],
)
def test_a_config_document_shares_renamed_gpus_under_its_key(
    config: DevicePluginConfig, key: str, section: str
):
    assert config.key == key
    assert DevicePluginConfig.from_key(key) == config
    assert config.document() == {
        "version": "v1",
        "flags": {"migStrategy": "single"},
        "sharing": {
            section: {
                "renameByDefault": True,
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": "nvidia.com/gpu", "replicas": config.replicas}],
            }
        },
    }


@pytest.mark.parametrize(
    "key", ["", "default", "time-sliced", "time-sliced-", "mps-x", "shared-4", "time-slicing-4"]
)
def test_a_key_this_tool_does_not_write_names_no_config(key: str):
    assert DevicePluginConfig.from_key(key) is None


def test_marks_on_a_cloud_that_shares_and_partitions_through_labels():
    eks = cloud("eks")
    a100 = gpu("eks", "p4d.24xlarge")
    written = marks(eks, a100.mig["2g.10gb"], "time-slicing", 3)
    assert (written.mig_setting, written.native_sharing) == (None, None)
    assert written.device_plugin == DevicePluginConfig("time-slicing", 3)
    assert written.labels == {
        "nvidia.com/device-plugin.config": "time-sliced-3",
        "nvidia.com/mig.config": "all-2g.10gb",
    }
    assert written.resource == "nvidia.com/gpu.shared"


def test_marks_on_clouds_that_use_their_own_pool_fields():
    gke, aks = cloud("gke"), cloud("aks")
    written = marks(gke, gpu("gke", "a2-highgpu-1g").mig["1g.5gb"], "mps", 4)
    assert (written.mig_setting, written.native_sharing, written.device_plugin, written.labels) == (
        "1g.5gb",
        NativeSharing("MPS", 4),
        None,
        {},
    )
    assert written.resource == "nvidia.com/gpu"  # GKE's own sharing keeps the resource name
    written = marks(aks, gpu("aks", "Standard_NC24ads_A100_v4").mig["3g.40gb"], "exclusive", None)
    assert (written.mig_setting, written.labels, written.resource) == ("MIG3g", {}, "nvidia.com/gpu")


def _every_mark() -> list[tuple[str, str, str | None, str, int | None]]:
    """(cloud, instance type, MIG profile, sharing, replicas): every combination a cloud accepts,
    one instance type per GPU model."""
    hw = hardware.load()
    cases = []
    for key, profile in hw.clouds.items():
        by_gpu = {t.gpu.key: t for t in hw.instance_types[key].values()}
        for machine in by_gpu.values():
            for mig in [None, *profile.mig_profiles(machine.gpu)]:
                cases.append((key, machine.name, mig and mig.name, "exclusive", None))
                for mode, spec in profile.sharing_modes.items():
                    if mig is None or spec.on_mig:
                        clients = None if profile.scheduler else spec.min_replicas + 1  # memory: GiB
                        cases.append((key, machine.name, mig and mig.name, mode, clients))
    return cases


@pytest.mark.parametrize(("cloud_key", "instance_type", "mig_name", "sharing", "replicas"), _every_mark())
def test_reading_back_what_marks_wrote_gives_the_same_mig_and_sharing(
    cloud_key: str, instance_type: str, mig_name: str | None, sharing: str, replicas: int | None
):
    profile, device = cloud(cloud_key), gpu(cloud_key, instance_type)
    mig: MigProfile | None = device.mig[mig_name] if mig_name else None
    isolation = "memory" if sharing == "memory" else None
    written = marks(profile, mig, sharing, replicas, isolation=isolation)  # type: ignore[arg-type]
    state = pool_state(written.mig_setting, written.native_sharing, written.labels)
    assert read_mig(profile, device, state) == mig
    assert read_sharing(profile, state) == (sharing, replicas)
    assert read_isolation(profile, state) == isolation


def test_labels_this_tool_does_not_write_read_as_whole_unshared_gpus():
    eks = cloud("eks")
    a100 = gpu("eks", "p4d.24xlarge")
    # mig-parted's own mixed layouts and a user's device-plugin config are not the tool's to read
    state = pool_state(
        labels={"nvidia.com/mig.config": "all-balanced", "nvidia.com/device-plugin.config": "custom"}
    )
    assert (read_mig(eks, a100, state), read_sharing(eks, state)) == (None, ("exclusive", None))
    state = pool_state(labels={"nvidia.com/mig.config": "1g.5gb"})  # the profile without all-
    assert read_mig(eks, a100, state) is None
