"""apply installs the rendered device-plugin ConfigMap by server-side apply, plan shows it,
--no-kube skips it, and what other managers wrote is never touched."""

from __future__ import annotations

import json

from ruamel.yaml import YAML

from provisioner.compile import compile_file
from provisioner.render import DEVICE_PLUGIN_FILE, render_cluster
from tests.kube.conftest import CONFIG_MAP, NAMESPACE, POOLS, KubeWorld

CM = f"{NAMESPACE}/{CONFIG_MAP}"


def _rendered_data(world: KubeWorld, cluster: str) -> dict[str, str]:
    """The data of the ConfigMap `render` prints for `cluster`."""
    compiled = compile_file(world.fleet).cluster(cluster)
    assert compiled is not None
    return YAML(typ="safe").load(render_cluster(compiled).files[DEVICE_PLUGIN_FILE])["data"]


def _managers(config_map: dict) -> dict[str, tuple[str, set[str]]]:
    """manager -> (operation, the data keys it owns)."""
    return {
        e["manager"]: (e["operation"], {k[2:] for k in e["fieldsV1"].get("f:data", {}) if k.startswith("f:")})
        for e in config_map["metadata"]["managedFields"]
    }


def test_plan_shows_the_config_map_and_apply_installs_it(world: KubeWorld):
    plan = world.run("plan", str(world.fleet), "--detailed-exitcode")
    assert plan.exit_code == 2
    assert f"+ configmap {CM} will be created with keys default, time-sliced-10" in plan.stdout
    assert f"+ configmap {CM} will be created with keys default, time-sliced-4" in plan.stdout
    assert "Kubernetes: 2 device-plugin ConfigMaps to apply." in plan.stdout
    document = world.plan_json()
    assert document["kube"] == [
        {
            "cluster": cluster,
            "kind": "configmap",
            "namespace": NAMESPACE,
            "name": CONFIG_MAP,
            "action": "create",
            "keys_added": ["default", key],
            "keys_changed": [],
            "conflicts": [],
            "blocked_keys": [],
            "error": None,
        }
        for cluster, key in (("azure", "time-sliced-10"), ("aws", "time-sliced-4"))
    ]  # GKE shares GPUs itself: no ConfigMap there
    assert {c["action"] for c in document["changes"]} == {"create"}  # the pools' contract is unchanged

    applied = world.run("apply", str(world.fleet), "--auto-approve")
    assert applied.exit_code == 0, applied.output
    assert f"azure: configmap {CM}: applied: created with keys default, time-sliced-10" in applied.stdout
    for cluster in ("azure", "aws"):
        installed = world.config_map(cluster)
        assert installed is not None
        assert installed["data"] == _rendered_data(world, cluster)  # the very document render prints
        assert installed["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "provisioner"}
        assert _managers(installed) == {"provisioner": ("Apply", set(_rendered_data(world, cluster)))}
    assert world.config_map("gcp") is None
    assert world.run("plan", str(world.fleet), "--detailed-exitcode").exit_code == 0

    # A new sharing layout adds its key as a change to the ConfigMap, like a pool change.
    world.edit(lambda pools: {**pools, "aks": POOLS["aks"].replace("replicas: 10", "replicas: 5")})
    plan = world.run("plan", str(world.fleet))
    assert f"~ configmap {CM}: keys time-sliced-5 added" in plan.stdout
    [entry] = world.plan_json()["kube"]
    assert (entry["cluster"], entry["action"], entry["keys_added"]) == ("azure", "update", ["time-sliced-5"])
    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    data = world.config_map("azure")["data"]
    # The key no pool names any more stays: a node still labelled with it keeps its shares.
    assert sorted(data) == ["default", "time-sliced-10", "time-sliced-5"]


def test_no_kube_leaves_the_config_map_to_the_user(world: KubeWorld):
    plan = world.run("plan", str(world.fleet), "--no-kube", "--json")
    assert json.loads(plan.stdout)["kube"] == []
    applied = world.run("apply", str(world.fleet), "--auto-approve", "--no-kube")
    assert applied.exit_code == 0, applied.output
    assert "configmap" not in applied.stdout
    assert world.config_map("azure") is None and world.config_map("aws") is None
    # ... and verify then says what that costs.
    code, pools = world.verify()
    assert code == 1
    assert pools[("azure", "t4")]["status"] == "degraded"


def test_keys_and_config_maps_other_managers_wrote_are_never_touched(applied: KubeWorld):
    core = applied.core("azure")
    other = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
        "data": {"custom": "version: v1\n", "default": "version: v1\nflags: {migStrategy: none}\n"},
    }
    # A GitOps controller adds its own key and takes over "default" with other content.
    core.patch_namespaced_config_map(
        CONFIG_MAP,
        NAMESPACE,
        other,
        field_manager="gitops",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    before = applied.config_map("azure")
    plan = applied.run("plan", str(applied.fleet))
    assert (
        f"! key default of configmap {CM} was written by gitops, not provisioner, and differs from what "
        "the fleet needs: left alone"
    ) in plan.stdout

    applied.edit(lambda pools: {**pools, "aks": POOLS["aks"].replace("replicas: 10", "replicas: 5")})
    result = applied.run("apply", str(applied.fleet), "--auto-approve")
    assert result.exit_code == 0, result.output  # no pool needs "default" by its label
    after = applied.config_map("azure")
    assert after["data"]["custom"] == before["data"]["custom"] == "version: v1\n"
    assert after["data"]["default"] == before["data"]["default"]
    managers = _managers(after)
    assert managers["gitops"] == ("Apply", {"custom", "default"})
    assert managers["provisioner"] == ("Apply", {"time-sliced-10", "time-sliced-5"})


def test_a_config_map_the_tool_did_not_write_is_left_alone_and_its_pools_wait(world: KubeWorld):
    core = world.core("azure")
    helm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
        "data": {"default": "version: v1\n"},
    }
    core.create_namespaced_config_map(NAMESPACE, helm, field_manager="helm")
    before = world.config_map("azure")
    result = world.run("apply", str(world.fleet), "--auto-approve")
    assert result.exit_code == 1
    assert world.config_map("azure") == before  # not one field changed, resourceVersion included
    assert (
        "azure/t4 (create): not attempted: its label names device-plugin key time-sliced-10, which is "
        "not in place, so its nodes would not share their GPUs: "
        f"configmap {CM} was not written by provisioner"
    ) in " ".join(result.stdout.split())
    pools = {
        p["pool"]
        for o in json.loads(world.run("pools", str(world.fleet), "--json").stdout)
        for p in o["pools"]
        if o["cluster"] == "azure"
    }
    assert "whole" in pools and "t4" not in pools  # the pool that needs no key went ahead


def test_an_unreachable_cluster_api_stops_only_the_pools_that_need_a_key(world: KubeWorld):
    closed = world.with_closed_context("azure")
    plan = world.run("plan", str(world.fleet), "--kubeconfig", str(closed))
    assert plan.exit_code == 0  # a warning: plan itself changes nothing
    flat = " ".join(plan.stdout.split())
    assert (
        "! cannot reach the Kubernetes API: azure: the Kubernetes API (context azure) is unreachable" in flat
    )
    assert "pools whose label names time-sliced-10 will not be created or updated; pass --no-kube" in flat

    result = world.run("apply", str(world.fleet), "--auto-approve", "--kubeconfig", str(closed))
    assert result.exit_code == 1
    flat = " ".join(result.stdout.split())
    assert "azure/t4 (create): not attempted: its label names device-plugin key time-sliced-10" in flat
    assert "pass --no-kube if you apply the ConfigMap yourself (GitOps)" in flat
    owned = {
        (o["cluster"], p["pool"])
        for o in json.loads(world.run("pools", str(world.fleet), "--json").stdout)
        for p in o["pools"]
        if p["owned"]
    }
    assert owned == {
        ("azure", "whole"),
        ("gcp", "shared"),
        ("gcp", "empty"),
        ("aws", "mig"),
        ("aws", "shared"),
    }
    assert world.config_map("aws") is not None  # the reachable clusters got theirs
