"""A fleet pool across its generations in the cluster: a replacement made create-first runs beside
the old cloud pool under a cloud name of its own, and verify, inspect and sync follow the fleet pool
by provisioner.io/pool over both; a pool made before the tool set that label is found by its cloud's
pool label, and its missing label is said, until apply sets it in place."""

from __future__ import annotations

import dataclasses
import json
import uuid

from click.testing import CliRunner
from kubernetes import client, config

from provisioner import hardware
from provisioner.capacity import capacity
from provisioner.catalog.listing import ObservedPool
from provisioner.catalog.store import Store, now
from provisioner.catalog.sync import allocation_of, fleet_pools, identity
from provisioner.cli import main
from provisioner.compile import compile_file, desired_state
from provisioner.drivers.registry import connect
from provisioner.generations import cloud_name
from provisioner.kube.contexts import KubeAccess
from provisioner.pools import POOL_NODE_LABEL, PoolState, Scaling
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.kube.conftest import KubeWorld
from tests.kube.test_inspect import SHARED, _pod


def _desired(world: KubeWorld, cluster: str, pool: str) -> PoolState:
    compiled = compile_file(world.fleet).cluster(cluster)
    assert compiled is not None
    return desired_state(next(p for p in compiled.pools if p.pool.name == pool))


def _second_generation(world: KubeWorld, cluster: str, pool: str, nodes: int) -> PoolState:
    """The pool's generation 2 beside its first, made through the cloud's driver as a replacement
    makes it: the fleet's pool under the cloud's name for generation 2, `nodes` of them."""
    compiled = compile_file(world.fleet).cluster(cluster)
    assert compiled is not None
    name = cloud_name(pool, 2, compiled.cloud)
    state = dataclasses.replace(
        _desired(world, cluster, pool), name=name, fleet_name=pool, generation=2, scaling=Scaling.fixed(nodes)
    )
    connect(compiled.cloud.key, world.sandbox.directory).create_pool(compiled.target.ref, state)
    return state


def _without_pool_label(world: KubeWorld, cluster: str, pool: str) -> None:
    """The pool as the tool made it before it set provisioner.io/pool (every other label as asked)."""
    compiled = compile_file(world.fleet).cluster(cluster)
    assert compiled is not None
    desired = _desired(world, cluster, pool)
    labels = tuple((k, v) for k, v in desired.labels if k != POOL_NODE_LABEL)
    connect(compiled.cloud.key, world.sandbox.directory).update_pool(
        compiled.target.ref, dataclasses.replace(desired, labels=labels)
    )


def test_verify_finds_a_pools_nodes_in_both_generations(applied: KubeWorld):
    old = applied.node_names("azure", "kubernetes.azure.com/agentpool=t4")
    made = _second_generation(applied, "azure", "t4", nodes=1)
    assert made.name == "t4g2"  # AKS: no hyphen in a pool name
    new = applied.node_names("azure", "kubernetes.azure.com/agentpool=t4g2")
    assert len(old) == 2 and len(new) == 1
    # Both generations' nodes carry the fleet pool's label: what place's pods select.
    assert applied.node_names("azure", f"{POOL_NODE_LABEL}=t4") == sorted(old + new)

    code, pools = applied.verify("--cluster", "azure")
    assert code == 0, pools
    assert {key: (p["status"], p["nodes"], p["problems"]) for key, p in pools.items()} == {
        ("azure", "t4"): ("ok", 3, []),  # one fleet pool: two cloud pools' nodes
        ("azure", "whole"): ("ok", 1, []),
    }


def _pods_on_both(world: KubeWorld) -> None:
    """Generation 2 of azure's t4 with one node; a pod holding 3 slices on an old node, 2 on the new."""
    (old, _) = world.node_names("azure", "kubernetes.azure.com/agentpool=t4")
    _second_generation(world, "azure", "t4", nodes=1)
    (new,) = world.node_names("azure", "kubernetes.azure.com/agentpool=t4g2")
    azure = world.core("azure")
    azure.create_namespaced_pod("ml", _pod("on-old", old, limits=3))
    azure.create_namespaced_pod("ml", _pod("on-new", new, limits=2))


def _listed(world: KubeWorld, cluster: str) -> list[PoolState]:
    compiled = compile_file(world.fleet).cluster(cluster)
    assert compiled is not None
    return connect(compiled.cloud.key, world.sandbox.directory).list_pools(compiled.target.ref)


def test_inspect_counts_both_generations_as_one_pool(applied: KubeWorld):
    _pods_on_both(applied)
    inspected = applied.run("inspect", str(applied.fleet), "--cluster", "azure", "--json")
    assert inspected.exit_code == 0, inspected.output
    by_pool = {(p["pool"], p["resource"]): p for p in json.loads(inspected.stdout)["pools"]}
    assert {key: (p["nodes"], p["allocated"], p["total"]) for key, p in by_pool.items()} == {
        ("t4", SHARED): (3, 5, 30),  # 3 nodes x 1 T4 x 10 replicas, over both generations
        ("whole", "nvidia.com/gpu"): (1, 0, 1),
    }


def _t4_row(rows: list[dict]) -> dict:
    owned = [r for r in rows if r["cluster"] == "azure" and r["owned"]]
    assert sorted(r["pool"] for r in owned) == ["t4", "whole"]  # no row of its own for t4g2
    (t4,) = [r for r in owned if r["pool"] == "t4"]
    # The newest generation's settings; the capacity of both: 2 + 1 nodes, their slices and pods.
    assert (t4["min_nodes"], t4["max_nodes"], t4["current_nodes"]) == (3, 3, 3)
    assert (t4["k8s_nodes"], t4["slices_advertised"], t4["slices_allocated"]) == (3, 30, 5)
    assert t4["labels"][POOL_NODE_LABEL] == "t4"
    return t4


def test_a_sync_of_two_generations_writes_one_row_with_the_capacity_of_both(applied: KubeWorld, tmp_path):
    """What sync does with a cluster's listing, given the listing the drivers give of a replacement
    (generation 2 of t4 marked as such, as the cloud's tags hold it): one catalog row."""
    _pods_on_both(applied)
    listed = [
        dataclasses.replace(p, fleet_name="t4", generation=2) if p.name == "t4g2" else p
        for p in _listed(applied, "azure")
    ]
    entry = compile_file(applied.fleet).cluster("azure")
    assert entry is not None
    pools = [ObservedPool(p, capacity("aks", p)) for p in fleet_pools(listed)]
    allocation = allocation_of(KubeAccess(sandbox=applied.sandbox.directory), entry, pools, listed)
    store = Store(f"sqlite:///{tmp_path / 'catalog.db'}")
    store.migrate()
    store.record_cluster(identity(entry.target), pools, [], now(), allocation=allocation)
    _t4_row(store.live_pools(cluster="azure"))


def test_sync_through_the_cli_writes_one_row_for_two_generations(applied: KubeWorld):
    _pods_on_both(applied)
    assert next(p for p in _listed(applied, "azure") if p.name == "t4g2").fleet_name == "t4"
    synced = applied.run("sync", str(applied.fleet))
    assert synced.exit_code == 0, synced.output
    _t4_row(json.loads(applied.run("catalog", "ls", "--json").stdout))


def test_a_pool_made_before_the_label_is_found_by_the_clouds_label_and_told_to_get_it(applied: KubeWorld):
    _without_pool_label(applied, "azure", "whole")
    (node,) = applied.node_names("azure", "kubernetes.azure.com/agentpool=whole")
    assert applied.node_names("azure", f"{POOL_NODE_LABEL}=whole") == []

    code, pools = applied.verify("--cluster", "azure")
    assert code == 1
    whole = pools[("azure", "whole")]
    assert (whole["status"], whole["nodes"]) == ("degraded", 1)  # found by kubernetes.azure.com/agentpool
    assert whole["problems"] == [{"node": node, "message": f"label {POOL_NODE_LABEL}=whole is missing"}]
    assert pools[("azure", "t4")]["status"] == "ok"

    plan = applied.run("plan", str(applied.fleet))
    assert "~ whole will be updated in place" in plan.stdout, plan.output  # once, in place
    assert applied.run("apply", str(applied.fleet), "--auto-approve").exit_code == 0
    assert applied.node_names("azure", f"{POOL_NODE_LABEL}=whole") == [node]
    assert applied.verify("--cluster", "azure")[0] == 0


def test_every_cloud_sets_the_fleet_pool_label_on_its_nodes(applied: KubeWorld):
    for cluster, pool in (("azure", "t4"), ("gcp", "shared"), ("aws", "mig")):
        compiled = compile_file(applied.fleet).cluster(cluster)
        assert compiled is not None
        label = hardware.load().clouds[compiled.cloud.key].pool_label
        assert label is not None
        by_cloud = applied.node_names(cluster, f"{label.key}={pool}")
        assert by_cloud and applied.node_names(cluster, f"{POOL_NODE_LABEL}={pool}") == by_cloud


ACK_FLEET = """\
clusters:
  - name: ali
    cloud: ack
    region: cn-hangzhou
    clusterId: c0123456789abcdef0123456789ab{suffix}
    vswitches: [vsw-bp1a2b3c4d5e6f7g8h9i0]
    pools:
      - {{name: a10, instanceType: ecs.gn7i-c8g1.2xlarge, gpu: {{sharing: memory, isolation: memory}},
         nodes: {{count: 1}}}}
"""


def test_on_ack_both_generations_and_a_node_without_the_label_are_the_pools(tmp_path):
    """ACK's own pool label holds the pool's ID: a node without provisioner.io/pool is found by the
    ID the cloud's listing gives the fleet pool."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(ACK_FLEET.format(suffix=uuid.uuid4().hex[:4]), encoding="utf-8")
    compiled = compile_file(fleet).cluster("ali")
    assert compiled is not None
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings()).start([compiled.target])
    env = {
        "PROVISIONER_SANDBOX": str(sandbox.directory),
        "PROVISIONER_LOCK_DIR": "",
        "PROVISIONER_CATALOG": "",
    }

    def verify() -> tuple[int, dict]:
        result = CliRunner().invoke(main, ["verify", str(fleet), "--json"], env=env, catch_exceptions=False)
        return result.exit_code, json.loads(result.stdout)["pools"][0]

    try:
        applied = CliRunner().invoke(main, ["apply", str(fleet), "--auto-approve"], env=env)
        assert applied.exit_code == 0, applied.output
        driver, ref = connect("ack", sandbox.directory), compiled.target.ref
        desired = desired_state(compiled.pools[0])
        second = dataclasses.replace(
            desired, name=cloud_name("a10", 2, compiled.cloud), fleet_name="a10", generation=2
        )
        driver.create_pool(ref, second)
        code, found = verify()
        assert (code, found["status"], found["nodes"], found["problems"]) == (0, "ok", 2, [])

        labels = tuple((k, v) for k, v in desired.labels if k != POOL_NODE_LABEL)
        driver.update_pool(ref, dataclasses.replace(desired, labels=labels))  # as made before the label
        first_id = next(p.cloud_id for p in driver.list_pools(ref) if p.name == "a10")
        api = client.CoreV1Api(config.new_client_from_config(str(sandbox.kubeconfig), context="ali"))
        (node,) = api.list_node(label_selector=f"alibabacloud.com/nodepool-id={first_id}").items
        assert POOL_NODE_LABEL not in node.metadata.labels
        code, found = verify()
        assert (code, found["status"], found["nodes"]) == (1, "degraded", 2)
        assert found["problems"] == [
            {"node": node.metadata.name, "message": f"label {POOL_NODE_LABEL}=a10 is missing"}
        ]
    finally:
        sandbox.stop()
