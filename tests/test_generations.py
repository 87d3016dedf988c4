"""A fleet pool across its generations: the cloud names a replacement takes, and the plan of a
replacement begun, interrupted or chosen delete-first, from listings as the drivers return them."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from provisioner import hardware
from provisioner.compile import CompiledCluster, compile_file, desired_state
from provisioner.generations import Generations, cloud_name, next_generation
from provisioner.observe import Observation
from provisioner.plan import diff_cluster
from provisioner.report import plan_text

CLOUDS = hardware.load().clouds

FLEET = """\
clusters:
  - name: east
    cloud: {cloud}
{where}
    pools:
      - name: {name}
        instanceType: {instance_type}
        gpu: {{mig: {mig}}}
        nodes: {{min: 0, max: 4}}
{replace}
"""
WHERE = {
    "aks": "    subscription: 22222222-2222-2222-2222-222222222222\n    resourceGroup: rg\n"
    "    cluster: cluster-one",
    "gke": "    project: project-one\n    location: europe-west4\n    cluster: cluster-one",
    "eks": "    region: us-west-2\n    cluster: cluster-one\n    nodeRole: arn:aws:iam::123456789012:role/n\n"
    "    subnets: [subnet-0abc1234]",
}
POOLS = {  # a MIG pool whose profile forces a new pool on that cloud
    "aks": ("gpua100pool1", "Standard_NC24ads_A100_v4", "1g.10gb", "2g.20gb"),
    "gke": ("a100-mig", "a2-highgpu-1g", "1g.5gb", "2g.10gb"),
}


def compiled(tmp_path: Path, cloud: str, mig: str, replace: str = "") -> CompiledCluster:
    name, instance_type, _, _ = POOLS[cloud]
    text = FLEET.format(
        cloud=cloud,
        where=WHERE[cloud],
        name=name,
        instance_type=instance_type,
        mig=mig,
        replace=f"        replace: {replace}" if replace else "",
    )
    path = tmp_path / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    return compile_file(path).clusters[0]


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_a_generations_cloud_name_keeps_the_clouds_name_rule_even_for_a_longest_fleet_name(cloud: str):
    profile = CLOUDS[cloud]
    longest = "a" * profile.pool_name_max
    for generation in (2, 9, 10, 123):
        name = cloud_name(longest, generation, profile)
        assert profile.pool_name_pattern.fullmatch(name), name
        assert name.endswith(profile.generation_suffix.format(n=generation))
    assert cloud_name("gpu", 1, profile) == "gpu"


def test_a_cut_name_that_another_pool_holds_is_skipped():
    aks = CLOUDS["aks"]
    first = dataclasses.replace(_state("gpua100pool1"), nodes=2)
    taken = frozenset({"gpua100pool1", "gpua100poog2"})  # the fleet has a pool of that name too
    assert next_generation(Generations((first,)), aks, taken) == (3, "gpua100poog3")


def test_a_forced_change_is_replaced_create_first_beside_the_old_pool_which_keeps_its_nodes(tmp_path: Path):
    old = compiled(tmp_path, "aks", "1g.10gb")
    have = dataclasses.replace(desired_state(old.pools[0]), nodes=3)
    new = compiled(tmp_path, "aks", "2g.20gb")
    plan = diff_cluster(new, Observation(new.target, (have,)))
    (change,) = plan.changes
    shown = change.json()
    assert (shown["action"], shown["order"]) == ("replace", "create-first")
    assert shown["cloud_name"] == "gpua100poog2" and re.fullmatch(r"[a-z][a-z0-9]{0,11}", shown["cloud_name"])
    assert shown["retires"] == ["gpua100pool1"]
    assert change.desired is not None and change.desired.nodes == 3  # started as large as the old
    assert change.steps == ("create", "ready", "drain", "retire")
    text = plan_text(_plan(plan)).plain
    assert "create-first: creates gpua100poog2" in text and "keeps meanwhile: its 3 nodes, until" in text


def test_delete_first_deletes_then_creates_under_the_fleet_name_and_says_it_has_no_nodes(tmp_path: Path):
    old = compiled(tmp_path, "gke", "1g.5gb", "delete-first")
    have = dataclasses.replace(desired_state(old.pools[0]), nodes=2)
    new = compiled(tmp_path, "gke", "2g.10gb", "delete-first")
    (change,) = diff_cluster(new, Observation(new.target, (have,))).changes
    assert change.json()["order"] == "delete-first" and "cloud_name" not in change.json()
    assert change.steps == ("delete", "create") and change.retires == ("a100-mig",)
    assert change.keeps.startswith("none")


def test_an_interrupted_replacement_whose_new_pool_is_as_wanted_is_resumed_never_begun_again(tmp_path: Path):
    old = compiled(tmp_path, "gke", "1g.5gb")
    new = compiled(tmp_path, "gke", "2g.10gb")
    first = desired_state(old.pools[0])
    second = dataclasses.replace(
        desired_state(new.pools[0]), name="a100-mig-g2", fleet_name="a100-mig", generation=2
    )
    (change,) = diff_cluster(new, Observation(new.target, (second, first))).changes
    assert change.resumes and change.retires == ("a100-mig",)
    assert change.steps == ("ready", "drain", "retire")  # no third pool, the new one kept
    assert change.cloud_name == "a100-mig-g2"


def test_once_the_old_generation_is_gone_a_later_generation_alone_plans_nothing(tmp_path: Path):
    new = compiled(tmp_path, "gke", "2g.10gb")
    second = dataclasses.replace(
        desired_state(new.pools[0]), name="a100-mig-g2", fleet_name="a100-mig", generation=2
    )
    assert diff_cluster(new, Observation(new.target, (second,))).changes == ()


def test_a_fleet_pool_removed_mid_replacement_deletes_both_generations(tmp_path: Path):
    cluster = compiled(tmp_path, "gke", "2g.10gb")
    first = desired_state(cluster.pools[0])
    second = dataclasses.replace(first, name="a100-mig-g2", fleet_name="a100-mig", generation=2)
    plan = diff_cluster(cluster, Observation(cluster.target, (first, second)), destroy=True)
    (change,) = plan.changes
    assert change.action.name == "delete" and change.retires == ("a100-mig", "a100-mig-g2")


def test_a_mig_label_change_on_a_pool_with_nodes_rolls_out_node_by_node(tmp_path: Path):
    text = FLEET.format(
        cloud="eks", where=WHERE["eks"], name="p4d", instance_type="p4d.24xlarge", mig="{m}", replace=""
    )
    path = tmp_path / "eks.yaml"
    path.write_text(text.replace("{m}", "1g.5gb"), encoding="utf-8")
    have = dataclasses.replace(desired_state(compile_file(path).clusters[0].pools[0]), nodes=2)
    path.write_text(text.replace("{m}", "3g.20gb"), encoding="utf-8")
    wanted = compile_file(path).clusters[0]
    plan = diff_cluster(wanted, Observation(wanted.target, (have,)))
    (change,) = plan.changes
    assert change.action.name == "update" and change.node_by_node == ("nvidia.com/mig.config",)
    assert change.steps == ("reconfigure", "update")
    assert change.json()["rollout"] == "node-by-node"
    assert "~ reconfigure (node by node, drains GPU pods)" in plan_text(_plan(plan)).plain
    empty = dataclasses.replace(have, nodes=0)  # no live node: the cloud relabels nothing running
    (update,) = diff_cluster(wanted, Observation(wanted.target, (empty,))).changes
    assert update.node_by_node == () and update.steps == ("update",)


def _plan(cluster_plan):
    from provisioner.plan import Plan

    return Plan((cluster_plan,))


def _state(name: str):
    from provisioner.pools import PoolState, Scaling

    scaling = Scaling(0, 4, autoscaling=True)
    return PoolState(name, "Standard_NC24ads_A100_v4", 1, None, None, False, None, scaling, (), ())


def test_two_pools_replaced_in_one_plan_never_get_the_same_new_name(tmp_path: Path):
    def two(mig: str) -> CompiledCluster:
        # two pools whose names, cut to leave room for the suffix, meet
        text = FLEET.format(
            cloud="aks",
            where=WHERE["aks"],
            name="gpua100pool1",
            instance_type=POOLS["aks"][1],
            mig=mig,
            replace="",
        )
        text += text[text.index("      - name:") :].replace("gpua100pool1", "gpua100pool2")
        path = tmp_path / "two.yaml"
        path.write_text(text, encoding="utf-8")
        return compile_file(path).clusters[0]

    old, new = two("1g.10gb"), two("2g.20gb")
    had = tuple(dataclasses.replace(desired_state(p), nodes=1) for p in old.pools)
    names = [c.cloud_name for c in diff_cluster(new, Observation(new.target, had)).changes]
    assert len(names) == 2 and len(set(names)) == 2, names


def test_a_resumed_replacement_whose_fleet_entry_changed_in_place_updates_the_new_pool_first(tmp_path: Path):
    new = compiled(tmp_path, "gke", "2g.10gb")
    first = desired_state(compiled(tmp_path, "gke", "1g.5gb").pools[0])
    wanted = desired_state(new.pools[0])
    second = dataclasses.replace(
        wanted, name="a100-mig-g2", fleet_name="a100-mig", generation=2, labels=(("team", "old"),)
    )
    (change,) = diff_cluster(
        new, Observation(new.target, (second, dataclasses.replace(first, nodes=2)))
    ).changes
    assert change.resumes and change.steps == ("update", "ready", "drain", "retire")
    assert change.desired is not None and change.desired.name == "a100-mig-g2" and change.desired.nodes == 2


def test_a_new_generation_that_failed_is_made_again_in_its_place_never_a_third(tmp_path: Path):
    new = compiled(tmp_path, "gke", "2g.10gb")
    first = desired_state(compiled(tmp_path, "gke", "1g.5gb").pools[0])
    failed = dataclasses.replace(
        desired_state(new.pools[0]), name="a100-mig-g2", fleet_name="a100-mig", generation=2, status="failed"
    )
    (change,) = diff_cluster(new, Observation(new.target, (first, failed))).changes
    assert change.discards == ("a100-mig-g2",) and change.cloud_name == "a100-mig-g2"
    assert change.steps == ("discard", "create", "ready", "drain", "retire")
