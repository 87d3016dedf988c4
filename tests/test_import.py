"""`provisioner import` and the adopt action end to end, on AKS, GKE, EKS and ACK: pools made
behind the tool's back through each cloud's SDK (tests/unowned.py), with every sharing mode the
cloud has, are imported, written into the fleet in place, validated, planned as adopt only,
applied, and then plan shows no changes while each pool is still the pool it was."""

# The fleet text is the subject here: one-line flow entries, as users write them, run long.
# ruff: noqa: E501

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from ruamel.yaml import YAML

from provisioner.cli import main
from provisioner.compile import compile_file, desired_state
from provisioner.drivers.registry import connect
from provisioner.pools import GPU_TAINT, PoolState
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.unowned import USER_TAG, create_unowned, identity

CLUSTERS = """\
  - name: azure  # production
    cloud: aks
    subscription: 33333333-3333-3333-3333-333333333333
    resourceGroup: rg-{s}
    cluster: aks-{s}
{azure}
  - name: gcp
    cloud: gke
    project: project-{s}
    location: europe-west4
    cluster: gke-{s}
{gcp}
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: eks-{s}
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
{aws}
  - name: ali
    cloud: ack
    region: cn-hangzhou
    clusterId: c{s}{s}{s}{s}
    vswitches: [vsw-import1]
{ali}
"""
# The team's fleet: comments, flow and block entries, blank lines and a cluster with no pools.
FLEET_POOLS = {
    "azure": """\
    pools:
      # T4s for notebooks
      - {name: notebooks, instanceType: Standard_NC4as_T4_v3, nodes: {count: 1}}
""",
    "gcp": """\
    pools:
      - name: notebooks
        instanceType: g2-standard-8
        nodes: {count: 3}  # one in each of the regional cluster's zones
""",
    "aws": "    # no pools of its own yet",
    "ali": """\
    pools:
      - {name: notebooks, instanceType: ecs.gn6i-c4g1.xlarge, nodes: {count: 1}}
""",
}
# Made by hand: each is the entry import must write back (but adopt: true), where the cloud keeps
# what was asked. Each sharing mode of each cloud, MIG, spot, labels, taints, an edge pool.
BY_HAND = {
    "azure": """\
    pools:
      - {name: a100mig, instanceType: Standard_NC24ads_A100_v4, gpu: {mig: 1g.10gb}, nodes: {min: 0, max: 3}, diskSizeGb: 256}
      - {name: t4ts, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 2}, spot: true, diskSizeGb: 128, labels: {team: ml}, taints: ['dedicated=ml:NoExecute']}
      - {name: t4mps, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: mps, replicas: 2}, nodes: {min: 1, max: 2}, diskSizeGb: 128}
      - {name: t4odd, instanceType: Standard_NC4as_T4_v3, nodes: {count: 1}, diskSizeGb: 128}
""",
    "gcp": """\
    pools:
      - {name: a100-mig, instanceType: a2-highgpu-1g, gpu: {mig: 1g.5gb, sharing: time-slicing, replicas: 2}, nodes: {min: 0, max: 2}, diskSizeGb: 100}
      - {name: l4-ts, instanceType: g2-standard-8, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 3}, spot: true, diskSizeGb: 100, labels: {team: ml}}
      - {name: l4-mps, instanceType: g2-standard-8, gpu: {sharing: mps, replicas: 4}, nodes: {min: 1, max: 3}, diskSizeGb: 200}
      - {name: t4-n1, instanceType: n1-standard-4, gpu: {count: 2}, nodes: {count: 3}, diskSizeGb: 100}
      - {name: l4-bare, instanceType: g2-standard-8, nodes: {count: 3}, diskSizeGb: 100}
""",
    "aws": """\
    pools:
      - {name: a100-mig, instanceType: p4d.24xlarge, gpu: {mig: 1g.5gb}, nodes: {min: 0, max: 3}, diskSizeGb: 200}
      - {name: a10g-ts, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 4}, nodes: {min: 1, max: 2}, spot: true, diskSizeGb: 100, taints: ['dedicated=ml:NoExecute']}
      - {name: a10g-mps, instanceType: g5.xlarge, gpu: {sharing: mps, replicas: 2}, nodes: {count: 1}, labels: {team: ml}}
      - {name: a100-mixed, instanceType: p4d.24xlarge, gpu: {mig: 1g.5gb}, nodes: {count: 1}, diskSizeGb: 200}
""",
    "ali": """\
    pools:
      - {name: a10-whole, instanceType: ecs.gn7i-c8g1.2xlarge, nodes: {count: 1}, diskSizeGb: 100}
      - {name: a10-cgpu, instanceType: ecs.gn7i-c8g1.2xlarge, gpu: {sharing: memory, isolation: memory}, nodes: {min: 0, max: 2}, diskSizeGb: 100}
      - {name: t4-coremem, instanceType: ecs.gn6i-c4g1.xlarge, gpu: {sharing: memory, isolation: compute, placement: spread}, nodes: {count: 1}, spot: true, diskSizeGb: 100, labels: {team: ml}}
      - {name: edge-t4, edge: true, gpu: {model: T4-16GB, count: 1, sharing: memory, isolation: none}}
      - {name: a10-unmarked, instanceType: ecs.gn7i-c8g1.2xlarge, nodes: {count: 1}, diskSizeGb: 100}
""",
}
DISK_DEFAULTS = {("aws", "a10g-mps"): 20}  # made without a disk size: the cloud's default (moto's 20 GiB)


def _inexpressible(cluster: str, state: PoolState) -> PoolState:
    """The pools made by hand in ways the fleet language cannot say, and why each cannot."""
    labels = state.label_map
    if (cluster, state.name) == ("azure", "t4odd"):  # a device-plugin config the tool never writes
        labels["nvidia.com/device-plugin.config"] = "custom-sharing"
    elif (cluster, state.name) == ("aws", "a100-mixed"):  # a MIG layout the tool never writes
        labels["nvidia.com/mig.config"] = "all-balanced"
    elif (cluster, state.name) == ("ali", "a10-unmarked"):  # no ACK scheduling label at all
        labels.pop("ack.node.gpu.schedule")
    elif (cluster, state.name) == ("gcp", "l4-bare"):  # no GPU taint: what GKE's own docs make
        return dataclasses.replace(state, taints=())
    else:
        return state
    return dataclasses.replace(state, labels=tuple(labels.items()))


SKIPPED = {
    "azure/t4odd": "nvidia.com/device-plugin.config=custom-sharing names a device-plugin config "
    "provisioner does not write (it writes time-sliced-<replicas> and mps-<replicas>, each in the "
    "ConfigMap `provisioner render` prints)",
    "aws/a100-mixed": "nvidia.com/mig.config=all-balanced names a MIG layout provisioner does not write "
    "(it writes all-<profile>, one profile on every GPU, with a profile of the A100 40GB)",
    "ali/a10-unmarked": "it has no ack.node.gpu.schedule label, which provisioner sets on every ACK GPU "
    "pool (ack.node.gpu.schedule=default for whole GPUs); add it to the pool, then import it",
}

# Made as GKE's own docs make a GPU pool, without the GPU taint: adopting it adds the taint, an
# in-place update on every cloud, said beside the entry and in the plan.
UPDATED = {("gcp", "l4-bare"): "taint nvidia.com/gpu=present:NoSchedule added"}
# Pools that autoscale from zero for slices their instance type does not say: adopting them writes
# the autoscaler's hints in place (GKE's autoscaler knows its own sharing; fixed pools need none).
HINTED = {
    ("azure", "a100mig"): {"nvidia.com/gpu": 7},
    ("azure", "t4mps"): {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 2},
    ("aws", "a100-mig"): {"nvidia.com/gpu": 56},  # 8 GPUs x 7 instances
    ("aws", "a10g-ts"): {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 4},
    ("ali", "a10-cgpu"): {"aliyun.com/gpu-mem": 22, "nvidia.com/gpu": 0},
}


class Clouds:
    """A sandbox with one cluster on each cloud, the team's fleet file, and the CLI."""

    def __init__(self, tmp_path: Path, catalog: str | None = None):
        self.suffix = uuid.uuid4().hex[:8]
        self.tmp_path = tmp_path
        self.fleet = tmp_path / "fleet.yaml"
        self.text = self.fleet_text(FLEET_POOLS)
        self.fleet.write_text(self.text, encoding="utf-8")
        self.catalog = catalog
        compiled = compile_file(self.fleet)
        self.targets = {c.name: c.target for c in compiled.clusters}
        self.sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings(op_seconds=0.02)).start(
            list(self.targets.values())
        )

    def fleet_text(self, pools: dict[str, str]) -> str:
        return "# The team's GPU fleet.\nclusters:\n" + CLUSTERS.format(s=self.suffix, **pools) + "# end\n"

    def run(self, *args: str) -> Result:
        env = {
            "PROVISIONER_SANDBOX": str(self.sandbox.directory),
            "PROVISIONER_LOCK_DIR": "",
            "PROVISIONER_CATALOG": self.catalog or "",
        }
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    def make_by_hand(self, pools: dict[str, str]) -> dict[str, dict[str, PoolState]]:
        """Create the pools of `pools` (fleet entries) without the ownership marker."""
        by_hand = self.tmp_path / "by-hand.yaml"
        by_hand.write_text(self.fleet_text(pools), encoding="utf-8")
        made: dict[str, dict[str, PoolState]] = {}
        for cluster in compile_file(by_hand).clusters:
            for pool in cluster.pools:
                state = _inexpressible(cluster.name, desired_state(pool))
                made.setdefault(cluster.name, {})[pool.pool.name] = create_unowned(
                    self.sandbox, cluster.target.ref, state
                )
        return made

    def identities(self, made: dict[str, dict[str, PoolState]]) -> dict[str, dict]:
        return {
            f"{cluster}/{name}": identity(self.sandbox, self.targets[cluster].ref, name)
            for cluster, pools in made.items()
            for name in pools
        }


@pytest.fixture
def clouds(tmp_path: Path) -> Iterator[Clouds]:
    made = Clouds(tmp_path)
    yield made
    made.sandbox.stop()


def _expected_entries() -> dict[str, list[dict]]:
    """BY_HAND's entries as import must write them: sorted by name, adopt: true, the inexpressible left out."""
    expected: dict[str, list[dict]] = {}
    for cluster, text in BY_HAND.items():
        entries = YAML(typ="safe").load(text)["pools"]
        for entry in sorted(entries, key=lambda e: e["name"]):
            if f"{cluster}/{entry['name']}" in SKIPPED:
                continue
            if (cluster, entry["name"]) in DISK_DEFAULTS:
                entry["diskSizeGb"] = DISK_DEFAULTS[(cluster, entry["name"])]
            expected.setdefault(cluster, []).append({**entry, "adopt": True})
    return expected


def test_pools_made_by_hand_are_imported_exactly_adopted_and_keep_their_identity(clouds: Clouds):
    assert clouds.run("apply", str(clouds.fleet), "--auto-approve").exit_code == 0  # the team's own pools
    made = clouds.make_by_hand(BY_HAND)
    before = clouds.identities(made)

    printed = clouds.run("import", str(clouds.fleet))
    assert printed.exit_code == 0, printed.output
    assert YAML(typ="safe").load(printed.stdout) == _expected_entries()
    assert (
        "  # adopting it updates it in place: taint nvidia.com/gpu=present:NoSchedule added\n"
        "  - name: l4-bare\n" in printed.stdout
    )
    skipped = dict(line.removeprefix("skipped ").split(": ", 1) for line in printed.stderr.splitlines())
    assert skipped == SKIPPED  # the system pools are no GPU pools: not even mentioned
    assert clouds.fleet.read_text() == clouds.text  # printing writes nothing

    written = clouds.run("import", str(clouds.fleet), "--write")
    assert written.exit_code == 0, written.output
    assert "Added 15 pools with adopt: true to" in written.stdout
    assert "gcp/l4-bare: adopting it updates it in place: taint nvidia.com/gpu=present:NoSchedule added" in (
        written.stdout
    )
    assert clouds.fleet.read_text() == clouds.fleet_text(WRITTEN)  # every other byte as it was
    assert clouds.run("validate", str(clouds.fleet)).exit_code == 0

    plan = json.loads(clouds.run("plan", str(clouds.fleet), "--json").stdout)
    assert {(c["cluster"], c["pool"], c["action"]) for c in plan["changes"]} == {
        (cluster, entry["name"], "adopt")
        for cluster, entries in _expected_entries().items()
        for entry in entries
    }
    for c in plan["changes"]:
        pool = (c["cluster"], c["pool"])
        if pool in UPDATED:  # adopted, then the GPU taint added in place
            assert (c["then"], [f["field"] for f in c["fields"]]) == ("update", ["taints"])
            assert c["fields"][0]["after"] == ["nvidia.com/gpu=present:NoSchedule"]
        elif pool in HINTED:  # adopted, then the autoscaler's hints written in place
            assert (c["then"], [f["field"] for f in c["fields"]]) == ("update", ["autoscaler_hints"]), c
            assert (c["fields"][0]["before"], c["fields"][0]["after"]["resources"]) == (None, HINTED[pool])
        else:
            assert c["fields"] == [] and "then" not in c, c  # the marker and nothing else
    assert plan["summary"] == {"create": 0, "update": 6, "replace": 0, "delete": 0, "adopt": 15}
    assert plan["errors"] == []
    text = clouds.run("plan", str(clouds.fleet)).stdout
    assert (
        "  <= t4ts will be adopted (only the ownership marker is added: its nodes and workloads stay)\n"
        in text
    )
    assert "  <= l4-bare will be adopted, then updated in place\n" in text
    assert text.endswith(
        "Plan: 15 to adopt, 0 to create, 6 to update, 0 to replace, 0 to delete.\n"
        "Kubernetes: 2 device-plugin ConfigMaps to apply.\n"  # the pools' keys, installed by apply
    )

    applied = clouds.run("apply", str(clouds.fleet), "--auto-approve")
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines()[-1] == (
        "Apply complete: 15 adopted, 0 created, 6 updated, 0 replaced, 0 deleted."  # as the plan counted
    )
    again = clouds.run("plan", str(clouds.fleet), "--detailed-exitcode")  # adopt: true is inert now
    assert again.exit_code == 0, again.output
    assert "No changes. The clusters match the fleet." in again.stdout

    _assert_the_same_pools_adopted(clouds, made, before)


# The fleet after `import --write`: each cluster's entries after its last pool (after the comment
# of a cluster that had none), styled as the entries before them; not one other byte changed.
WRITTEN = {
    "azure": FLEET_POOLS["azure"]
    + """\
      - {name: a100mig, instanceType: Standard_NC24ads_A100_v4, gpu: {mig: 1g.10gb}, nodes: {min: 0, max: 3}, diskSizeGb: 256, adopt: true}
      - {name: t4mps, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: mps, replicas: 2}, nodes: {min: 1, max: 2}, diskSizeGb: 128, adopt: true}
      - {name: t4ts, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 2}, spot: true, diskSizeGb: 128, labels: {team: ml}, taints: ['dedicated=ml:NoExecute'], adopt: true}
""",
    "gcp": FLEET_POOLS["gcp"]
    + """\
      - name: a100-mig
        instanceType: a2-highgpu-1g
        gpu: {mig: 1g.5gb, sharing: time-slicing, replicas: 2}
        nodes: {min: 0, max: 2}
        diskSizeGb: 100
        adopt: true
      - name: l4-bare
        instanceType: g2-standard-8
        nodes: {count: 3}
        diskSizeGb: 100
        adopt: true
      - name: l4-mps
        instanceType: g2-standard-8
        gpu: {sharing: mps, replicas: 4}
        nodes: {min: 1, max: 3}
        diskSizeGb: 200
        adopt: true
      - name: l4-ts
        instanceType: g2-standard-8
        gpu: {sharing: time-slicing, replicas: 4}
        nodes: {count: 3}
        spot: true
        diskSizeGb: 100
        labels: {team: ml}
        adopt: true
      - name: t4-n1
        instanceType: n1-standard-4
        gpu: {count: 2}
        nodes: {count: 3}
        diskSizeGb: 100
        adopt: true
""",
    "aws": FLEET_POOLS["aws"]
    + """
    pools:
      - name: a100-mig
        instanceType: p4d.24xlarge
        gpu: {mig: 1g.5gb}
        nodes: {min: 0, max: 3}
        diskSizeGb: 200
        adopt: true
      - name: a10g-mps
        instanceType: g5.xlarge
        gpu: {sharing: mps, replicas: 2}
        nodes: {count: 1}
        diskSizeGb: 20
        labels: {team: ml}
        adopt: true
      - name: a10g-ts
        instanceType: g5.xlarge
        gpu: {sharing: time-slicing, replicas: 4}
        nodes: {min: 1, max: 2}
        spot: true
        diskSizeGb: 100
        taints: ['dedicated=ml:NoExecute']
        adopt: true""",
    "ali": FLEET_POOLS["ali"]
    + """\
      - {name: a10-cgpu, instanceType: ecs.gn7i-c8g1.2xlarge, gpu: {sharing: memory, isolation: memory}, nodes: {min: 0, max: 2}, diskSizeGb: 100, adopt: true}
      - {name: a10-whole, instanceType: ecs.gn7i-c8g1.2xlarge, nodes: {count: 1}, diskSizeGb: 100, adopt: true}
      - {name: edge-t4, gpu: {model: T4-16GB, count: 1, sharing: memory, isolation: none}, edge: true, adopt: true}
      - {name: t4-coremem, instanceType: ecs.gn6i-c4g1.xlarge, gpu: {sharing: memory, isolation: compute, placement: spread}, nodes: {count: 1}, spot: true, diskSizeGb: 100, labels: {team: ml}, adopt: true}
""",
}


ONE_EACH = {
    "azure": "    pools:\n      - {name: t4ts, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 1}, diskSizeGb: 128}\n",
    "gcp": "    pools:\n      - {name: l4-ts, instanceType: g2-standard-8, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 1}, zones: [europe-west4-b], diskSizeGb: 100}\n",
    "aws": "    pools:\n      - {name: a10g-ts, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 1}, diskSizeGb: 100}\n",
    "ali": "    pools:\n      - {name: a10-cgpu, instanceType: ecs.gn7i-c8g1.2xlarge, gpu: {sharing: memory, isolation: memory}, nodes: {count: 1}, diskSizeGb: 100}\n",
}


def _assert_the_same_pools_adopted(
    clouds: Clouds, made: dict[str, dict[str, PoolState]], before: dict
) -> None:
    """Each pool is the one made by hand, its user's tag kept, with only what adopting adds."""
    after = clouds.identities(made)
    for name, was in before.items():
        now = after[name]
        assert (now["id"], now["created"]) == (was["id"], was["created"]), name  # the same pool
        if name == "ali/edge-t4":  # an edge pool has no ECS instances to tag: its label marks it
            assert now["tags"] == was["tags"] == {}
            continue
        owner = {} if name in SKIPPED else {"managed-by": "provisioner"}
        hints = {key for key in now["tags"] if "cluster-autoscaler" in key}
        assert bool(hints) == (tuple(name.split("/")) in HINTED), name
        others = {key: value for key, value in now["tags"].items() if key not in hints}
        assert others == {**dict([USER_TAG]), **owner}, name  # the user's own tag kept
    for cluster, pools in made.items():
        listed = {
            p.name: p
            for p in connect(clouds.targets[cluster].cloud, clouds.sandbox.directory).list_pools(
                clouds.targets[cluster].ref
            )
        }
        for name, made_by_hand in pools.items():
            was = made_by_hand
            if (cluster, name) in UPDATED:
                was = dataclasses.replace(was, taints=(*was.taints, GPU_TAINT))
            if (cluster, name) in HINTED:
                assert dict(listed[name].autoscaler_hints.resources) == HINTED[cluster, name]
                was = dataclasses.replace(was, autoscaler_hints=listed[name].autoscaler_hints)
            assert listed[name] == dataclasses.replace(was, owned=f"{cluster}/{name}" not in SKIPPED)
            assert (listed[name].nodes, listed[name].cloud_id) == (was.nodes, was.cloud_id)


def _fleet_of(clouds: Clouds, pools: dict[str, str], adopt: bool = True) -> None:
    text = clouds.fleet_text(pools)
    clouds.fleet.write_text(text.replace("}\n", ", adopt: true}\n") if adopt else text, encoding="utf-8")


def test_an_entry_that_differs_from_its_pool_plans_adopt_with_the_update_or_replacement(clouds: Clouds):
    made = clouds.make_by_hand(ONE_EACH)
    before = clouds.identities(made)
    # The fleet asks more than the pools have: two more nodes everywhere (in place), and on AKS
    # another VM size too, which only a new pool can have.
    changed = {c: t.replace("nodes: {count: 1}", "nodes: {count: 3}") for c, t in ONE_EACH.items()}
    changed["azure"] = changed["azure"].replace("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3")
    _fleet_of(clouds, changed)

    plan = json.loads(clouds.run("plan", str(clouds.fleet), "--json").stdout)
    shown = {(c["cluster"], c["pool"]): (c["action"], c.get("then"), c["fields"]) for c in plan["changes"]}
    nodes = {"field": "scaling", "before": 1, "after": 3, "forces_replacement": False}
    assert shown == {
        ("azure", "t4ts"): (
            "adopt",
            "replace",
            [
                {
                    "field": "instance_type",
                    "before": "Standard_NC4as_T4_v3",
                    "after": "Standard_NC8as_T4_v3",
                    "forces_replacement": True,
                },
                nodes,
            ],
        ),
        ("gcp", "l4-ts"): ("adopt", "update", [nodes]),
        ("aws", "a10g-ts"): ("adopt", "update", [nodes]),
        ("ali", "a10-cgpu"): ("adopt", "update", [nodes]),
    }
    assert plan["summary"] == {"create": 0, "update": 3, "replace": 1, "delete": 0, "adopt": 4}
    text = clouds.run("plan", str(clouds.fleet)).stdout
    assert "  <= t4ts will be adopted, then replaced (instance_type cannot change in place)\n" in text
    assert "  <= l4-ts will be adopted, then updated in place\n      scaling: 1 -> 3\n" in text
    assert text.endswith(
        "Plan: 4 to adopt, 0 to create, 3 to update, 1 to replace, 0 to delete.\n"
        "Kubernetes: 2 device-plugin ConfigMaps to apply.\n"  # the pools' keys, installed by apply
    )

    applied = clouds.run("apply", str(clouds.fleet), "--auto-approve")
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines()[-1] == (
        "Apply complete: 4 adopted, 0 created, 3 updated, 1 replaced, 0 deleted."  # the plan's counts
    )
    assert clouds.run("plan", str(clouds.fleet), "--detailed-exitcode").exit_code == 0
    after = clouds.identities({c: p for c, p in made.items() if c != "azure"})
    for name in ("gcp/l4-ts", "aws/a10g-ts", "ali/a10-cgpu"):  # updated in place: the same pool
        assert (after[name]["id"], after[name]["created"]) == (before[name]["id"], before[name]["created"])
    # replaced, as planned: create-first, under its next generation's name, the adopted pool deleted
    listed = connect("aks", clouds.sandbox.directory).list_pools(clouds.targets["azure"].ref)
    assert [(p.name, p.pool_name, p.generation) for p in listed if p.owned] == [("t4tsg2", "t4ts", 2)]


def test_without_adopt_a_pool_it_does_not_own_stays_a_conflict(clouds: Clouds):
    clouds.make_by_hand(ONE_EACH)
    _fleet_of(clouds, ONE_EACH, adopt=False)
    result = clouds.run("plan", str(clouds.fleet), "--json")
    assert result.exit_code == 1
    plan = json.loads(result.stdout)
    assert plan["changes"] == []
    assert [e.split(":", 1)[0] for e in plan["errors"]] == ["azure", "gcp", "aws", "ali"]
    assert "mark the fleet entry adopt: true" in plan["errors"][0]


def test_a_saved_adopt_plan_applies_and_is_refused_once_its_pool_changed(clouds: Clouds, tmp_path: Path):
    made = clouds.make_by_hand(ONE_EACH)
    _fleet_of(clouds, ONE_EACH)
    saved, stale = tmp_path / "adopt.plan", tmp_path / "stale.plan"
    assert clouds.run("plan", str(clouds.fleet), "--out", str(saved)).exit_code == 0
    assert clouds.run("plan", str(clouds.fleet), "--out", str(stale)).exit_code == 0
    assert [c["action"] for c in json.loads(saved.read_text())["changes"]] == ["adopt"] * 4

    applied = clouds.run("apply", str(saved))
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines()[-1].startswith("Apply complete: 4 adopted,")
    refused = clouds.run("apply", str(stale))  # the pools are owned now: not the plan's picture
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: the saved plan is stale: ali, aws, azure, gcp changed since")
    assert set(made) == {"azure", "gcp", "aws", "ali"}


def test_import_selects_by_cluster_and_pool_and_says_what_it_cannot(clouds: Clouds):
    clouds.make_by_hand(ONE_EACH)
    only = clouds.run("import", str(clouds.fleet), "--cluster", "gcp", "--cluster", "ali", "--pool", "l4-ts")
    assert only.exit_code == 0, only.output
    assert YAML(typ="safe").load(only.stdout) == {
        "gcp": [
            {
                "name": "l4-ts",
                "instanceType": "g2-standard-8",
                "gpu": {"sharing": "time-slicing", "replicas": 4},
                "nodes": {"count": 1},
                "diskSizeGb": 100,
                "adopt": True,
            }
        ]
    }
    everything = clouds.run("import", str(clouds.fleet), "--cluster", "gcp", "--all")
    assert everything.exit_code == 0
    assert everything.stderr == (
        "skipped gcp/default-pool: e2-standard-4 is not a GPU instance type provisioner knows on GKE\n"
    )
    assert "l4-ts" in everything.stdout

    missing = clouds.run("import", str(clouds.fleet), "--pool", "nosuch")
    assert missing.exit_code == 1
    assert missing.stderr == (
        "No pools to import.\nerror: no pool nosuch that provisioner does not own in azure, gcp, aws, ali\n"
    )
    unknown = clouds.run("import", str(clouds.fleet), "--cluster", "nosuch")
    assert unknown.exit_code == 1
    assert "no cluster nosuch in" in unknown.output
    assert clouds.fleet.read_text() == clouds.text


def test_a_fleet_whose_pool_list_is_inline_is_refused_for_write_and_left_as_it_was(clouds: Clouds):
    clouds.make_by_hand({**dict.fromkeys(ONE_EACH, ""), "gcp": ONE_EACH["gcp"]})
    inline = clouds.text.replace(
        "    pools:\n      - name: notebooks\n        instanceType: g2-standard-8\n        nodes: {count: 3}  # one in each of the regional cluster's zones\n",
        "    pools: [{name: notebooks, instanceType: g2-standard-8, nodes: {count: 3}}]\n",
    )
    clouds.fleet.write_text(inline, encoding="utf-8")
    result = clouds.run("import", str(clouds.fleet), "--write")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "clusters[gcp].pools: is written inline ([...]); write it as a block list (one `- ` item a "
        "line) for import --write, or add the entries `provisioner import` prints by hand\n1 error\n"
    )
    assert clouds.fleet.read_text() == inline


def test_the_catalog_records_the_adoption_and_drift_stops_calling_the_pool_unowned(tmp_path: Path):
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    clouds = Clouds(tmp_path, catalog=catalog)
    try:
        clouds.make_by_hand({**dict.fromkeys(ONE_EACH, ""), "gcp": ONE_EACH["gcp"]})
        _fleet_of(clouds, {**dict.fromkeys(ONE_EACH, ""), "gcp": ONE_EACH["gcp"]})
        synced = clouds.run("sync", str(clouds.fleet))
        assert synced.exit_code == 0, synced.output
        assert "drift gcp/l4-ts: unowned\n" in synced.stdout
        rows = {p["pool"]: p for p in json.loads(clouds.run("catalog", "ls", "--json").stdout)}
        assert (rows["l4-ts"]["owned"], rows["l4-ts"]["adopted_at"]) == (False, None)

        assert clouds.run("apply", str(clouds.fleet), "--auto-approve").exit_code == 0
        rows = {p["pool"]: p for p in json.loads(clouds.run("catalog", "ls", "--json").stdout)}
        assert rows["l4-ts"]["owned"] is True
        assert rows["l4-ts"]["adopted_at"] is not None
        assert rows["default-pool"]["adopted_at"] is None
        assert json.loads(clouds.run("catalog", "drift", "--json").stdout) == []
        adopted_at = rows["l4-ts"]["adopted_at"]
        assert clouds.run("sync", str(clouds.fleet)).exit_code == 0  # a later sync keeps when it was
        rows = {p["pool"]: p for p in json.loads(clouds.run("catalog", "ls", "--json").stdout)}
        assert rows["l4-ts"]["adopted_at"] == adopted_at
    finally:
        clouds.sandbox.stop()


def test_a_pool_caught_between_two_generations_is_one_entry_read_from_the_newest(pool_file):
    """Two cloud pools of one fleet pool (a create-first replacement's, as the drivers list them:
    generation 2 named as the cloud names it, with its fleet pool's name): one entry, the fleet's."""
    from provisioner.generations import cloud_name
    from provisioner.importing import import_pools
    from provisioner.observe import Observation

    def state(pools: str, **changed: object) -> PoolState:
        [cluster] = compile_file(pool_file("gke", pools)).clusters
        return dataclasses.replace(desired_state(cluster.pools[0]), owned=False, **changed)

    old = state(
        "- {name: l4, instanceType: g2-standard-8, gpu: {sharing: time-slicing, replicas: 2}, nodes: {count: 3}}"
    )
    [cluster] = compile_file(pool_file("gke", "[]")).clusters
    name = cloud_name("l4", 2, cluster.cloud)
    new = state(
        "- {name: l4, instanceType: g2-standard-8, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 3}}",
        name=name,
        fleet_name="l4",
        generation=2,
    )
    assert name == "l4-g2"
    result = import_pools([cluster], [Observation(cluster.target, (old, new))])
    assert result.errors == []
    assert [(i.pool, i.entry) for i in result.imported] == [
        (
            "l4",
            {
                "name": "l4",
                "instanceType": "g2-standard-8",
                "gpu": {"sharing": "time-slicing", "replicas": 4},
                "nodes": {"count": 3},
                "adopt": True,
            },
        )
    ]
    assert result.imported[0].updates == ()  # its provisioner.io/pool label is the compiler's
