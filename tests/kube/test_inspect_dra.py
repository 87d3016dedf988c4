"""inspect and sync's allocation on DRA pools, from plain dicts shaped as the API sends them:
ResourceSlices as NVIDIA's DRA driver publishes them and ResourceClaims as the scheduler
allocates and reserves them (status.allocation.devices.results, status.reservedFor)."""

from __future__ import annotations

from typing import Any

from provisioner.catalog.listing import Allocation
from provisioner.kube.inspect import NodeUse, node_uses, pool_allocation, totals
from tests.kube.test_verify_dra import DRIVER, migs, slice_for, whole

POOL_LABEL = "eks.amazonaws.com/nodegroup"


def _node(name: str, pool: str, allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {POOL_LABEL: pool}
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable or {}}}


def claim(namespace: str, name: str, node: str, devices: list[str], pods: list[str]) -> dict[str, Any]:
    """A claim the scheduler allocated on `node` (the driver's pool is named as its node) and
    reserved for `pods`."""
    results = [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device} for device in devices]
    reserved = [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"} for pod in pods]
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {"allocation": {"devices": {"results": results}}, "reservedFor": reserved},
    }


NODES = [
    _node("n-mig", "mig"),
    _node("n-whole", "whole"),
    _node("n-shared", "shared"),
    _node("n-both", "whole", {"nvidia.com/gpu": "4"}),  # its device plugin is still on
]
SLICES = [
    slice_for("n-mig", migs(8, 3)),
    slice_for("n-whole", whole(4)),
    slice_for("n-shared", whole(4)),
    slice_for("n-both", whole(4)),
    slice_for("gone", whole(4)),  # a node no longer listed: nobody's
]
CLAIMS = [
    claim("ml", "train-gpu", "n-whole", ["gpu-0", "gpu-1"], ["train"]),
    claim("ml", "infer-gpu", "n-whole", ["gpu-2"], ["infer"]),
    claim("ml", "mig-a", "n-mig", ["gpu-0-mig-0"], ["a"]),
    claim("ml", "mig-b", "n-mig", ["gpu-3-mig-2"], ["b"]),
    # one shared claim (time-slicing between pods: resourceClaimName), five pods on one device
    claim("team", "shared-gpu", "n-shared", ["gpu-0"], ["p1", "p2", "p3", "p4", "p5"]),
    claim("team", "pair", "n-shared", ["gpu-1"], ["q1", "q2"]),
    claim("team", "fresh", "n-shared", ["gpu-2"], []),  # allocated, no pod reserved yet
    {"metadata": {"namespace": "ml", "name": "pending"}, "spec": {}, "status": {}},  # not allocated
]


def uses() -> list[NodeUse]:
    return node_uses("aws", NODES, [], [POOL_LABEL], slices=SLICES, claims=CLAIMS)


def test_devices_per_node_and_device_class_with_their_holders():
    found = {(u.node, u.resource): (u.pool, u.allocated, u.total, u.pods) for u in uses()}
    assert found == {
        ("n-mig", "mig.nvidia.com"): ("mig", 2, 24, (("ml/a", 1), ("ml/b", 1))),
        ("n-whole", "gpu.nvidia.com"): ("whole", 3, 4, (("ml/infer", 1), ("ml/train", 2))),
        ("n-shared", "gpu.nvidia.com"): (
            "shared",
            3,
            4,
            tuple((f"team/{p}", 1) for p in ("p1", "p2", "p3", "p4", "p5", "q1", "q2")),
        ),
        # both managers show: the device plugin's extended resource and the driver's devices
        ("n-both", "nvidia.com/gpu"): ("whole", 0, 4, ()),
        ("n-both", "gpu.nvidia.com"): ("whole", 0, 4, ()),
    }
    rows = {
        (r["pool"], r["resource"]): (r["allocated"], r["total"], r["nodes"])
        for r in totals(uses(), ("pool",))
    }
    assert rows[("whole", "gpu.nvidia.com")] == (3, 8, 2)
    mig = next(u for u in uses() if u.node == "n-mig")
    assert mig.json(detailed=True)["pods"] == [
        {"pod": "ml/a", "amount": 1},
        {"pod": "ml/b", "amount": 1},
    ]


def test_no_resource_api_shows_the_extended_resources_alone():
    found = node_uses("aws", NODES, [], [POOL_LABEL], slices=None, claims=None)
    assert [(u.node, u.resource) for u in found] == [("n-both", "nvidia.com/gpu")]


def test_sync_counts_devices_or_for_a_shared_pool_each_devices_pods_up_to_its_replicas():
    resources = {"mig": "mig.nvidia.com", "whole": "gpu.nvidia.com", "shared": "gpu.nvidia.com"}
    assert pool_allocation(uses(), resources, {"shared": 4}) == {
        "mig": Allocation(nodes=1, advertised=24, allocated=2),
        "whole": Allocation(nodes=2, advertised=8, allocated=3),
        # 4 devices x 4 pods; held: 5 pods capped at 4, 2 pods, 1 for a device its claim holds
        "shared": Allocation(nodes=1, advertised=16, allocated=4 + 2 + 1),
    }
