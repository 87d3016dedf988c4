"""The node template a pool's autoscaler is told, and its tags read back as written: what keeps a
plan after apply empty, on every cloud with hints (the wire is tests/clis/test_autoscaler_hints.py)."""

from __future__ import annotations

import pytest

from provisioner import hardware
from provisioner.autoscaler import hint_tags, node_template, read_hint_tags, starts_from_zero
from provisioner.capacity import capacity
from provisioner.compile import compile_file
from provisioner.errors import FleetError
from provisioner.pools import GPU_TAINT, PoolState, Scaling, Taint

SHARED_GPU = {"aks": "Standard_NC4as_T4_v3", "eks": "g5.xlarge"}


def shared_pool(cloud: str, **changes) -> PoolState:
    return PoolState(
        name="shared",
        instance_type=SHARED_GPU[cloud],
        gpus_per_node=1,
        mig_setting=None,
        sharing=None,
        spot=changes.pop("spot", False),
        disk_size_gb=None,
        scaling=changes.pop("scaling", Scaling(0, 2, autoscaling=True)),
        labels=(("nvidia.com/device-plugin.config", "time-sliced-4"),),
        taints=changes.pop("taints", (GPU_TAINT,)),
    )


@pytest.mark.parametrize("cloud", sorted(SHARED_GPU))
def test_two_taints_of_one_key_read_back_as_written(cloud: str):
    profile = hardware.load().clouds[cloud]
    both = (GPU_TAINT, Taint("nvidia.com/gpu", "present", "NoExecute"))
    template = node_template(profile, pool := shared_pool(cloud, taints=both), capacity(cloud, pool))
    assert template is not None
    assert template.taints == (Taint("nvidia.com/gpu", "present", "NoExecute"),)  # the strongest
    read, others = read_hint_tags(profile.autoscaler_hints, hint_tags(profile.autoscaler_hints, template))
    assert (read, others) == (template, {})


def test_a_spot_pools_template_carries_what_the_cloud_adds_to_its_nodes():
    aks = hardware.load().clouds["aks"]
    spot = shared_pool("aks", spot=True)
    template = node_template(aks, spot, capacity("aks", spot))
    assert template is not None
    assert ("kubernetes.azure.com/scalesetpriority", "spot") in template.labels
    assert Taint("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule") in template.taints


def test_a_pool_starts_from_zero_only_with_the_hints_its_slices_need():
    eks = hardware.load().clouds["eks"]
    bare = shared_pool("eks")
    offers = capacity("eks", bare)
    assert not starts_from_zero(eks, bare, offers)  # the instance type's one whole GPU is all it knows
    hinted = PoolState(**{**bare.__dict__, "autoscaler_hints": node_template(eks, bare, offers)})
    assert starts_from_zero(eks, hinted, offers)
    fixed = shared_pool("eks", scaling=Scaling.fixed(1))
    assert node_template(eks, fixed, offers) is None and not starts_from_zero(eks, fixed, offers)
    gke = hardware.load().clouds["gke"]
    on_gke = PoolState(**{**bare.__dict__, "instance_type": "g2-standard-8"})
    assert starts_from_zero(gke, on_gke, capacity("gke", on_gke))


def test_validate_refuses_hints_the_clouds_tags_cannot_hold(tmp_path):
    labels = "".join(f"          team-{i}: ml\n" for i in range(48))
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "clusters:\n  - name: aws\n    cloud: eks\n    region: us-west-2\n    cluster: ml\n"
        "    nodeRole: arn:aws:iam::123456789012:role/nodes\n    subnets: [subnet-0abc1234]\n"
        "    pools:\n      - name: shared\n        instanceType: g5.xlarge\n"
        "        gpu: {sharing: time-slicing, replicas: 4}\n        nodes: {min: 0, max: 3}\n"
        f"        labels:\n{labels}"
    )
    with pytest.raises(FleetError) as refused:
        compile_file(fleet)
    assert str(refused.value) == (
        f"{fleet}:13: clusters[aws].pools[shared].labels: its autoscaler hints need 53 EKS tags (one per "
        "resource, label and taint), and 46 are free there (at most 50, 4 taken by the cloud and "
        "provisioner); give it fewer labels or taints"
    )
    fixed = fleet.read_text().replace("nodes: {min: 0, max: 3}", "nodes: {count: 1}")
    fleet.write_text(fixed)
    compile_file(fleet)  # a pool of a fixed size carries no hints
