"""PoolState: the desired state the compiler produces, its normalisation, and the in-place data."""

from __future__ import annotations

import pytest

from provisioner import hardware
from provisioner.compile import compile_file, desired_state
from provisioner.pools import (
    GPU_TAINT,
    POOL_FIELDS,
    POOL_NODE_LABEL,
    NativeSharing,
    PoolState,
    Scaling,
    Taint,
)


def desired(pool_file, cloud, pools):
    [cluster] = compile_file(pool_file(cloud, pools)).clusters
    return [desired_state(p) for p in cluster.pools]


def test_desired_state_of_a_gke_mig_shared_pool(pool_file):
    [state] = desired(
        pool_file,
        "gke",
        """\
        - name: a100
          instanceType: a2-highgpu-2g
          gpu: {mig: 1g.5gb, sharing: mps, replicas: 3}
          nodes: {min: 0, max: 4}
          spot: true
          labels: {team: ml}
        """,
    )
    assert state == PoolState(
        name="a100",
        instance_type="a2-highgpu-2g",
        gpus_per_node=2,
        mig_setting="1g.5gb",
        sharing=NativeSharing("MPS", 3),
        spot=True,
        disk_size_gb=None,
        scaling=Scaling(0, 4, autoscaling=True),
        labels=(("team", "ml"), (POOL_NODE_LABEL, "a100")),
        taints=(GPU_TAINT,),
    )


def test_desired_state_of_an_eks_time_sliced_pool_carries_the_labels(pool_file):
    [state] = desired(
        pool_file,
        "eks",
        """\
        - name: g5
          instanceType: g5.xlarge
          gpu: {sharing: time-slicing, replicas: 10}
          nodes: {count: 2}
        """,
    )
    assert state.label_map == {"nvidia.com/device-plugin.config": "time-sliced-10", POOL_NODE_LABEL: "g5"}
    assert (state.sharing, state.mig_setting, state.scaling) == (None, None, Scaling.fixed(2))


def test_order_of_labels_and_taints_is_not_a_difference():
    base = {
        "name": "p",
        "instance_type": "g5.xlarge",
        "gpus_per_node": 1,
        "mig_setting": None,
        "sharing": None,
        "spot": False,
        "disk_size_gb": None,
        "scaling": Scaling(0, 1, True),
    }
    dedicated = Taint("dedicated", "ml", "NoSchedule")
    one = PoolState(**base, labels=(("b", "2"), ("a", "1")), taints=(dedicated, GPU_TAINT))
    other = PoolState(**base, labels=(("a", "1"), ("b", "2")), taints=(GPU_TAINT, dedicated))
    assert one == other and one.differences(other) == []
    changed = PoolState(**base, labels=(("a", "1"),), taints=(GPU_TAINT,))
    assert one.differences(changed) == ["labels", "taints"]


@pytest.mark.parametrize("cloud", ["aks", "gke", "eks"])
def test_in_place_fields_are_pool_fields_and_never_gpu_settings(cloud):
    in_place = hardware.load().clouds[cloud].in_place
    assert in_place <= set(POOL_FIELDS)
    assert {"scaling", "labels", "taints"} <= in_place  # FACTS.md: all three clouds
    assert not in_place & {"instance_type", "gpus_per_node", "mig_setting", "sharing", "spot"}


def test_gke_changes_disk_size_in_place_and_aks_eks_do_not():
    clouds = hardware.load().clouds
    assert [c for c in ("aks", "gke", "eks") if "disk_size_gb" in clouds[c].in_place] == ["gke"]


def test_bounds_that_cannot_move_are_a_fixed_size():
    assert Scaling(2, 2, autoscaling=True) == Scaling.fixed(2)
    assert Scaling(1, 3, autoscaling=True).autoscaling is True
