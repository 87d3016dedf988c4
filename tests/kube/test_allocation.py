"""The sandbox's DRA allocator and the NVIDIA plugin's opaque-config check, over slices as the
NVIDIA driver publishes them."""

from __future__ import annotations

import re

import pytest

from provisioner.sandbox.kube.allocation import AllocationError, allocate, allocated_devices
from provisioner.sandbox.kube.nvidiaconfig import kubelet_message, prepare_error
from tests.kube.dradevices import (
    CLASSES,
    DRIVER,
    claim,
    device_class,
    exactly,
    gpu,
    mig,
    node,
    resource_slice,
    sharing,
)

NODE_A, NODE_B = node("node-a"), node("node-b")
MIG_NODE = resource_slice(
    "node-a",
    [
        mig(0, "1g.5gb", 0),
        mig(0, "1g.5gb", 1),
        mig(0, "2g.10gb", 2),
        mig(1, "1g.5gb", 0),
        mig(1, "3g.20gb", 4),
    ],
)
GPU_NODE = resource_slice("node-b", [gpu(0), gpu(1)])
SLICES = [MIG_NODE, GPU_NODE]
PROFILE = f"device.attributes['{DRIVER}'].profile == '%s'"


def devices(allocation: dict) -> list[str]:
    return [r["device"] for r in allocation["devices"]["results"]]


def test_a_whole_gpu_claim_gets_the_first_free_gpu_and_is_pinned_to_its_node() -> None:
    [allocation] = allocate([claim("c", exactly("gpu", "gpu.nvidia.com"))], CLASSES, SLICES, NODE_B, set())
    assert allocation == {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-b", "device": "gpu-0"}]},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}
            ]
        },
    }


def test_devices_already_allocated_are_skipped_and_exhaustion_is_none() -> None:
    wanted = [claim("c", exactly("gpu", "gpu.nvidia.com"))]
    [allocation] = allocate(wanted, CLASSES, SLICES, NODE_B, {(DRIVER, "node-b", "gpu-0")})
    assert devices(allocation) == ["gpu-1"]
    taken = {(DRIVER, "node-b", "gpu-0"), (DRIVER, "node-b", "gpu-1")}
    assert allocate(wanted, CLASSES, SLICES, NODE_B, taken) is None


def test_a_mig_profile_selector_picks_only_that_profile() -> None:
    wanted = claim("c", exactly("mig", "mig.nvidia.com", PROFILE % "2g.10gb"))
    [allocation] = allocate([wanted], CLASSES, SLICES, NODE_A, set())
    assert devices(allocation) == ["gpu-0-mig-2g10gb-14-2"]
    assert (
        allocate(
            [claim("c", exactly("mig", "mig.nvidia.com", PROFILE % "7g.40gb"))],
            CLASSES,
            SLICES,
            NODE_A,
            set(),
        )
        is None
    )


def test_the_class_selector_keeps_mig_devices_out_of_a_gpu_class() -> None:
    assert allocate([claim("c", exactly("gpu", "gpu.nvidia.com"))], CLASSES, SLICES, NODE_A, set()) is None


def test_count_and_devices_of_one_pods_claims_never_overlap() -> None:
    first = claim("one", exactly("mig", "mig.nvidia.com", PROFILE % "1g.5gb", count=2))
    second = claim("two", exactly("mig", "mig.nvidia.com", PROFILE % "1g.5gb"))
    one, two = allocate([first, second], CLASSES, SLICES, NODE_A, set())
    assert devices(one) == ["gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1"]
    assert devices(two) == ["gpu-1-mig-1g5gb-19-0"]
    third = claim("three", exactly("mig", "mig.nvidia.com", PROFILE % "1g.5gb"))
    assert allocate([first, second, third], CLASSES, SLICES, NODE_A, set()) is None


def test_match_attribute_keeps_the_devices_on_one_parent_gpu() -> None:
    # Two 1g.5gb slices of one GPU: the first GPU has two, so the search takes both there.
    wanted = claim(
        "c",
        exactly("mig", "mig.nvidia.com", PROFILE % "1g.5gb", count=2),
        constraints=[{"matchAttribute": f"{DRIVER}/parentUUID"}],
    )
    taken = {(DRIVER, "node-a", "gpu-0-mig-1g5gb-19-0")}
    assert allocate([wanted], CLASSES, SLICES, NODE_A, set()) is not None
    # With one of GPU 0's slices taken, GPU 0 and GPU 1 have one each: no pair shares a parent.
    assert allocate([wanted], CLASSES, SLICES, NODE_A, taken) is None


def test_two_requests_under_a_constraint_backtrack_to_a_shared_parent() -> None:
    wanted = claim(
        "c",
        exactly("small", "mig.nvidia.com", PROFILE % "1g.5gb"),
        exactly("big", "mig.nvidia.com", PROFILE % "3g.20gb"),
        constraints=[{"requests": ["small", "big"], "matchAttribute": f"{DRIVER}/parentUUID"}],
    )
    [allocation] = allocate([wanted], CLASSES, SLICES, NODE_A, set())
    assert devices(allocation) == ["gpu-1-mig-1g5gb-19-0", "gpu-1-mig-3g20gb-9-4"]


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    request = {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "big",
                "deviceClassName": "mig.nvidia.com",
                "selectors": [{"cel": {"expression": PROFILE % "7g.40gb"}}],
            },
            {
                "name": "small",
                "deviceClassName": "mig.nvidia.com",
                "selectors": [{"cel": {"expression": PROFILE % "1g.5gb"}}],
            },
        ],
    }
    [allocation] = allocate([claim("c", request)], CLASSES, SLICES, NODE_A, set())
    assert allocation["devices"]["results"][0]["request"] == "gpu/small"


def test_all_mode_takes_every_matching_device() -> None:
    [allocation] = allocate(
        [claim("c", exactly("all", "gpu.nvidia.com", mode="All"))], CLASSES, SLICES, NODE_B, set()
    )
    assert devices(allocation) == ["gpu-0", "gpu-1"]
    taken = {(DRIVER, "node-b", "gpu-1")}
    assert (
        allocate([claim("c", exactly("all", "gpu.nvidia.com", mode="All"))], CLASSES, SLICES, NODE_B, taken)
        is None
    )


def test_configs_from_the_class_and_the_claim_are_copied_with_their_source() -> None:
    class_config = {"opaque": {"driver": DRIVER, "parameters": {"kind": "GpuConfig"}}}
    classes = {**CLASSES, "gpu.nvidia.com": device_class("gpu.nvidia.com", "gpu", [class_config])}
    wanted = claim(
        "c",
        exactly("a", "gpu.nvidia.com"),
        exactly("b", "gpu.nvidia.com"),
        config=[sharing("GpuConfig", "TimeSlicing", ["a"]), sharing("GpuConfig", "MPS")],
    )
    [allocation] = allocate([wanted], classes, SLICES, NODE_B, set())
    config = allocation["devices"]["config"]
    # The class config names both requests, so it names none ("empty means all").
    assert [(c["source"], c.get("requests")) for c in config] == [
        ("FromClass", None),
        ("FromClaim", ["a"]),
        ("FromClaim", None),
    ]
    assert config[1]["opaque"]["parameters"]["sharing"] == {"strategy": "TimeSlicing"}


def test_slices_of_another_node_and_an_old_generation_do_not_count() -> None:
    stale = resource_slice("node-b", [gpu(0), gpu(1)], generation=1)
    fresh = resource_slice("node-b", [gpu(7)], generation=2)
    [allocation] = allocate(
        [claim("c", exactly("gpu", "gpu.nvidia.com"))], CLASSES, [stale, fresh], NODE_B, set()
    )
    assert devices(allocation) == ["gpu-7"]
    assert (
        allocate([claim("c", exactly("gpu", "gpu.nvidia.com"))], CLASSES, [MIG_NODE], NODE_B, set()) is None
    )


def test_a_cel_runtime_error_fails_the_claim_with_the_allocators_message() -> None:
    wanted = claim("c", exactly("gpu", "gpu.nvidia.com", PROFILE % "1g.5gb"))
    with pytest.raises(AllocationError) as raised:
        allocate([wanted], CLASSES, SLICES, NODE_B, set())
    assert str(raised.value) == (
        f"claim default/c: selector #0 on device {DRIVER}/node-b/gpu-0: CEL runtime error: "
        "no such key: profile. Consider using CEL optional chaining (?), has() macro, "
        "or orValue() for optional fields"
    )


def test_a_missing_class_is_an_error() -> None:
    with pytest.raises(
        AllocationError,
        match=re.escape('could not retrieve device class nope: deviceclass.resource.k8s.io "nope" not found'),
    ):
        allocate([claim("c", exactly("gpu", "nope"))], CLASSES, SLICES, NODE_B, set())


def test_allocated_devices_are_read_from_claim_statuses() -> None:
    [allocation] = allocate([claim("c", exactly("gpu", "gpu.nvidia.com"))], CLASSES, SLICES, NODE_B, set())
    held = claim("c", exactly("gpu", "gpu.nvidia.com"))
    held["status"] = {"allocation": allocation}
    assert allocated_devices([held, claim("free", exactly("gpu", "gpu.nvidia.com"))]) == {
        (DRIVER, "node-b", "gpu-0")
    }


def _allocated(*config: dict, request: str = "gpu", profile: str = "") -> dict:
    wanted = claim(
        "shared",
        exactly(
            request,
            "mig.nvidia.com" if profile else "gpu.nvidia.com",
            *([PROFILE % profile] if profile else []),
        ),
        config=list(config),
    )
    [allocation] = allocate([wanted], CLASSES, SLICES, NODE_A if profile else NODE_B, set())
    wanted["status"] = {"allocation": allocation}
    return wanted


def _type(result: dict) -> str:
    return "mig" if "-mig-" in result["device"] else "gpu"


def test_time_slicing_needs_the_drivers_gate() -> None:
    allocated = _allocated(sharing("GpuConfig", "TimeSlicing"))
    error = prepare_error(allocated, _type, gates=set())
    assert error == (
        "error preparing devices for claim default/shared:uid-shared: prepare devices failed: "
        'error validating GPU config: "TimeSlicing" is selected as the GPU sharing strategy, '
        'but the "TimeSlicingSettings" feature gate is not enabled'
    )
    assert prepare_error(allocated, _type, gates={"TimeSlicingSettings"}) is None
    assert kubelet_message(allocated, error).startswith(
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
        "ResourceClaim shared: error preparing devices"
    )


def test_mps_needs_its_gate_and_a_config_for_the_other_device_type_is_not_applied() -> None:
    assert 'the "MPSSupport" feature gate' in prepare_error(
        _allocated(sharing("GpuConfig", "MPS")), _type, set()
    )
    # A MigDeviceConfig for all requests does not apply to a full GPU: nothing to validate.
    assert prepare_error(_allocated(sharing("MigDeviceConfig", "MPS")), _type, set()) is None
    assert 'the "MPSSupport"' in prepare_error(
        _allocated(sharing("MigDeviceConfig", "MPS"), profile="1g.5gb"), _type, set()
    )


def test_a_config_naming_a_request_of_the_wrong_device_type_is_refused() -> None:
    wanted = claim(
        "shared",
        exactly("gpu", "gpu.nvidia.com"),
        exactly("other", "gpu.nvidia.com"),
        config=[sharing("MigDeviceConfig", "TimeSlicing", ["gpu"])],
    )
    [allocation] = allocate([wanted], CLASSES, SLICES, NODE_B, set())
    wanted["status"] = {"allocation": allocation}
    assert 'cannot apply MigDeviceConfig to device "gpu-0" of type "gpu" (request: gpu)' in str(
        prepare_error(wanted, _type, {"TimeSlicingSettings"})
    )
    # Naming the claim's only request is naming all of them: then it applies by type, here to none.
    assert prepare_error(_allocated(sharing("MigDeviceConfig", "TimeSlicing", ["gpu"])), _type, set()) is None


def test_parameters_are_decoded_strictly() -> None:
    unknown = sharing("GpuConfig", "TimeSlicing")
    unknown["opaque"]["parameters"]["sharing"]["timeslicing"] = {}
    assert 'strict decoding error: unknown field "sharing.timeslicing"' in prepare_error(
        _allocated(unknown), _type, {"TimeSlicingSettings"}
    )
    wrong_kind = sharing("GpuSharing", "TimeSlicing")
    assert 'no kind "GpuSharing" is registered for version "resource.nvidia.com/v1beta1"' in prepare_error(
        _allocated(wrong_kind), _type, set()
    )
    other_driver = {"opaque": {"driver": "other.example.com", "parameters": {"anything": True}}}
    assert prepare_error(_allocated(other_driver), _type, set()) is None
