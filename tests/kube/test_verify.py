"""verify end to end: apply into the sandbox, then break each thing users meet breaking, through
the real kubernetes client as kubectl would, and read what verify says."""

from __future__ import annotations

from tests.kube.conftest import CONFIG_MAP, NAMESPACE, KubeWorld

CM = f"{NAMESPACE}/{CONFIG_MAP}"


def _summary(pools: dict) -> dict:
    return {key: (p["status"], p["nodes"], p["problems"]) for key, p in pools.items()}


def _problems(pools: dict, cluster: str, pool: str) -> list[tuple[str | None, str]]:
    return [(p["node"], p["message"]) for p in pools[(cluster, pool)]["problems"]]


def test_every_pool_is_ok_after_apply(applied: KubeWorld):
    code, pools = applied.verify()
    assert code == 0
    assert _summary(pools) == {
        ("azure", "t4"): ("ok", 2, []),
        ("azure", "whole"): ("ok", 1, []),
        ("gcp", "shared"): ("ok", 3, []),  # a regional cluster: the count is per zone, three zones
        ("gcp", "empty"): ("no nodes yet", 0, []),
        ("aws", "mig"): ("ok", 1, []),
        ("aws", "shared"): ("ok", 1, []),
    }
    text = applied.run("verify", str(applied.fleet))
    assert text.exit_code == 0
    assert "All 6 pools give what the fleet promises (or have no nodes yet)." in text.stdout


def test_a_missing_config_map_turns_sharing_off(applied: KubeWorld):
    applied.core("azure").delete_namespaced_config_map(CONFIG_MAP, NAMESPACE)
    nodes = applied.node_names("azure", "kubernetes.azure.com/agentpool=t4")
    code, pools = applied.verify()
    assert code == 1
    missing = f"the ConfigMap {CM} does not exist"
    assert _problems(pools, "azure", "t4") == [
        (None, f"the pool's label names time-sliced-10, but {missing}"),
        *[
            (
                node,
                f"sharing is off: node {node} advertises nvidia.com/gpu: 1, expected "
                f"nvidia.com/gpu.shared: 10; its label names time-sliced-10, but {missing}",
            )
            for node in nodes
        ],
    ]
    assert pools[("azure", "t4")]["status"] == "degraded"
    assert pools[("azure", "whole")]["status"] == "ok"  # whole GPUs need no ConfigMap key
    assert pools[("aws", "shared")]["status"] == "ok"  # another cluster's ConfigMap is its own


def test_a_missing_key_is_caught_and_apply_puts_it_back(applied: KubeWorld):
    # kubectl edit: another manager removes the key
    applied.core("azure").patch_namespaced_config_map(
        CONFIG_MAP, NAMESPACE, {"data": {"time-sliced-10": None}}, field_manager="kubectl-edit"
    )
    first, second = applied.node_names("azure", "kubernetes.azure.com/agentpool=t4")
    code, pools = applied.verify()
    assert code == 1
    assert _problems(pools, "azure", "t4") == [
        (None, "the pool's label names time-sliced-10, which the ConfigMap lacks"),
        (
            first,
            f"sharing is off: node {first} advertises nvidia.com/gpu: 1, expected nvidia.com/gpu.shared: 10; "
            "its label names time-sliced-10, which the ConfigMap lacks",
        ),
        (
            second,
            f"sharing is off: node {second} advertises nvidia.com/gpu: 1, "
            "expected nvidia.com/gpu.shared: 10; its label names time-sliced-10, which the ConfigMap lacks",
        ),
    ]
    plan = applied.run("plan", str(applied.fleet))
    assert f"~ configmap {CM}: keys time-sliced-10 added" in plan.stdout
    assert applied.run("apply", str(applied.fleet), "--auto-approve").exit_code == 0
    assert applied.verify()[0] == 0


def test_a_label_changed_with_kubectl_is_named_with_its_effect(applied: KubeWorld):
    first, second = applied.node_names("azure", "kubernetes.azure.com/agentpool=t4")
    core = applied.core("azure")
    core.patch_node(first, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "time-sliced-4"}}})
    core.patch_node(second, {"metadata": {"labels": {"team": "ops"}}})
    code, pools = applied.verify()
    assert code == 1
    assert _problems(pools, "azure", "t4") == [
        (
            first,
            f"sharing is off: node {first} advertises nvidia.com/gpu: 1, expected nvidia.com/gpu.shared: 10; "
            "label nvidia.com/device-plugin.config is time-sliced-4, expected time-sliced-10; "
            "its label names time-sliced-4, which the ConfigMap lacks",
        ),
        (second, "label team is ops, expected ml"),
    ]


def test_a_failed_mig_reconfiguration_is_caught(applied: KubeWorld):
    (node,) = applied.node_names("aws", "eks.amazonaws.com/nodegroup=mig")
    assert applied.sandbox.kube is not None
    applied.sandbox.kube.cluster("aws").fail_mig(node)
    code, pools = applied.verify("--cluster", "aws")
    assert code == 1
    assert set(pools) == {("aws", "mig"), ("aws", "shared")}  # --cluster: only that cluster
    assert _problems(pools, "aws", "mig") == [
        (
            node,
            f"node {node} advertises nvidia.com/gpu: 8, expected nvidia.com/gpu: 56; "
            "MIG is not in place: nvidia.com/mig.config.state is failed, expected success",
        )
    ]
    assert pools[("aws", "shared")]["status"] == "ok"


def test_a_node_missing_its_taint_is_caught(applied: KubeWorld):
    (node,) = applied.node_names("azure", "kubernetes.azure.com/agentpool=whole")
    applied.core("azure").patch_node(node, {"spec": {"taints": []}})  # kubectl taint ... -
    code, pools = applied.verify()
    assert code == 1
    assert _problems(pools, "azure", "whole") == [
        (node, "taint nvidia.com/gpu=present:NoSchedule is missing")
    ]
    assert pools[("azure", "t4")]["status"] == "ok"


def test_an_unreachable_cluster_is_reported_and_the_others_go_on(applied: KubeWorld):
    closed = applied.with_closed_context("gcp")
    code, pools = applied.verify("--kubeconfig", str(closed))
    assert code == 1
    for pool in ("shared", "empty"):
        verdict = pools[("gcp", pool)]
        assert (verdict["status"], verdict["nodes"]) == ("unreachable", 0)
        [(node, message)] = _problems(pools, "gcp", pool)
        assert node is None
        assert message.startswith("the Kubernetes API (context gcp) is unreachable: ")
        assert "refused" in message
    others = {key: p["status"] for key, p in pools.items() if key[0] != "gcp"}
    assert others == dict.fromkeys(others, "ok") and len(others) == 4


def test_verify_names_an_unknown_cluster(applied: KubeWorld):
    result = applied.run("verify", str(applied.fleet), "--cluster", "nope")
    assert result.exit_code == 1
    assert "no cluster 'nope' in" in result.output and "clusters: azure, gcp, aws" in result.output
