"""verify, inspect and sync on DRA pools over the wire: examples/dra.yaml's pools applied into the
sandbox (a device-plugin pool beside them on EKS), NVIDIA's DRA driver installed in each cluster
with the values `provisioner render` prints, then broken as users break it, through the official
client as kubectl would."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from kubernetes import client, config
from ruamel.yaml import YAML

from provisioner.cli import main
from provisioner.compile import compile_file, desired_state
from provisioner.drivers.registry import connect
from provisioner.kube.verify import NO_DRA_API
from provisioner.sandbox.server import Sandbox, SandboxSettings

EXAMPLE = Path(__file__).parents[2] / "examples" / "dra.yaml"
DRA_POOLS = {
    ("azure-dra", "a100dra"),
    ("azure-dra", "t4drats"),
    ("gcp-dra", "l4-dra"),
    ("aws-dra", "p4de-dra"),
    ("aws-dra", "g5-dra-ts"),
    ("ali-dra", "a10-dra"),
}
EKS_POOL = "eks.amazonaws.com/nodegroup"
OFF = "nvidia.com/gpu.deploy.device-plugin"  # the GPU Operator's device plugin, on EKS and AKS
PLUGIN_POOL = {"name": "plugin", "instanceType": "g5.xlarge", "nodes": {"count": 1}}
OLD = "old-dra"  # an AKS cluster at Kubernetes 1.33: no resource.k8s.io there


class DraWorld:
    """examples/dra.yaml's clusters, named afresh (moto's EKS state lives as long as the process),
    with a device-plugin pool added to aws-dra, and an AKS cluster at 1.33 in a fleet of its own."""

    def __init__(self, tmp_path: Path):
        suffix = uuid.uuid4().hex
        yaml = YAML(typ="safe", pure=True)
        document = yaml.load(EXAMPLE.read_text(encoding="utf-8"))
        for cluster in document["clusters"]:
            if "clusterId" in cluster:
                cluster["clusterId"] = f"c{suffix}"
            else:
                cluster["cluster"] = f"{cluster['cluster']}-{suffix[:8]}"
            if cluster["name"] == "aws-dra":
                cluster["pools"].append(PLUGIN_POOL)
        self.fleet = tmp_path / "dra.yaml"
        with self.fleet.open("w", encoding="utf-8") as out:
            yaml.dump(document, out)
        old = dict(document["clusters"][0], name=OLD, cluster=f"old-{suffix[:8]}")
        old["pools"] = [p for p in old["pools"] if "mig" not in p["gpu"]]
        self.old_fleet = tmp_path / "old.yaml"
        with self.old_fleet.open("w", encoding="utf-8") as out:
            yaml.dump({"clusters": [old]}, out)
        self.compiled = compile_file(self.fleet)
        [self.old] = compile_file(self.old_fleet).clusters
        targets = [c.target for c in (*self.compiled.clusters, self.old)]
        settings = SandboxSettings(kubernetes_versions={OLD: "1.33.4"})
        self.sandbox = Sandbox(tmp_path / "sandbox", settings).start(targets)
        self.runner = CliRunner()
        self.out = tmp_path / "rendered"

    def run(self, *args: str) -> Result:
        env = {
            "PROVISIONER_SANDBOX": str(self.sandbox.directory),
            "PROVISIONER_LOCK_DIR": "",
            "PROVISIONER_CATALOG": "",
        }
        return self.runner.invoke(main, list(args), env=env, catch_exceptions=False)

    def ok(self, *args: str) -> str:
        result = self.run(*args)
        assert result.exit_code == 0, result.output
        return result.stdout

    def core(self, cluster: str) -> client.CoreV1Api:
        return client.CoreV1Api(config.new_client_from_config(str(self.sandbox.kubeconfig), context=cluster))

    def resource(self, cluster: str) -> client.ResourceV1Api:
        return client.ResourceV1Api(
            config.new_client_from_config(str(self.sandbox.kubeconfig), context=cluster)
        )

    def install(self, cluster: str, *extra: str) -> str:
        """`helm install -f <the values render printed for the cluster>`, as that file's comment says."""
        values = self.out / cluster / "dra-driver-values.yaml"
        directory = str(self.sandbox.directory)
        return self.ok(
            "sandbox",
            "install-dra-driver",
            "--dir",
            directory,
            "--cluster",
            cluster,
            "-f",
            str(values),
            *extra,
        )

    def uninstall(self, cluster: str) -> None:
        self.ok("sandbox", "uninstall-dra-driver", "--dir", str(self.sandbox.directory), "--cluster", cluster)

    def verify(self, fleet: Path | None = None) -> tuple[int, dict[tuple[str, str], dict[str, Any]]]:
        result = self.run("verify", str(fleet or self.fleet), "--json")
        assert result.exit_code in (0, 1), result.output
        return result.exit_code, {(p["cluster"], p["pool"]): p for p in json.loads(result.stdout)["pools"]}

    def node(self, cluster: str, selector: str) -> str:
        [found] = self.core(cluster).list_node(label_selector=selector).items
        return found.metadata.name


@pytest.fixture
def world(tmp_path: Path) -> Iterator[DraWorld]:
    made = DraWorld(tmp_path)
    yield made
    made.sandbox.stop()


@pytest.fixture
def installed(world: DraWorld) -> DraWorld:
    """The fleet applied, render's files written, the DRA driver installed with them everywhere."""
    world.ok("apply", str(world.fleet), "--auto-approve")
    world.ok("render", str(world.fleet), "--out-dir", str(world.out))
    for cluster in world.compiled.clusters:
        world.install(cluster.name)
    return world


def _problems(pools: dict, cluster: str, pool: str) -> list[tuple[str | None, str]]:
    return [(p["node"], p["message"]) for p in pools[(cluster, pool)]["problems"]]


def test_verify_passes_once_the_driver_runs_with_the_values_render_prints(world: DraWorld):
    world.ok("apply", str(world.fleet), "--auto-approve")
    world.ok("render", str(world.fleet), "--out-dir", str(world.out))
    code, pools = world.verify()
    assert code == 1  # no driver yet: nothing published for any DRA pool's node
    assert {key for key, p in pools.items() if p["status"] == "degraded"} == DRA_POOLS
    g5 = world.node("aws-dra", f"{EKS_POOL}=g5-dra-ts")
    [(node, message)] = _problems(pools, "aws-dra", "g5-dra-ts")
    assert node == g5
    assert message.startswith(
        f"the DRA driver gpu.nvidia.com publishes no devices for node {g5}, expected 4 GPU"
    )

    for cluster in world.compiled.clusters:
        world.install(cluster.name)
    code, pools = world.verify()
    assert code == 0, pools
    assert {key: (p["status"], p["nodes"], p["allocation_mode"]) for key, p in pools.items()} == {
        **dict.fromkeys(DRA_POOLS, ("ok", 1, "dra")),
        ("aws-dra", "plugin"): ("ok", 1, "device-plugin"),
    }


def test_the_off_switch_label_removed_fails_naming_the_node(installed: DraWorld):
    g5 = installed.node("aws-dra", f"{EKS_POOL}=g5-dra-ts")
    installed.core("aws-dra").patch_node(
        g5, {"metadata": {"labels": {OFF: None}}}
    )  # kubectl label node g5 key-
    code, pools = installed.verify()
    assert code == 1
    problems = _problems(pools, "aws-dra", "g5-dra-ts")
    assert [node for node, _ in problems] == [g5] * len(problems)
    # the GPU Operator labels a node without the key "true" (its state_manager.go), and its device
    # plugin then runs there; the driver's kubelet plugin, selected by "false", leaves
    assert problems == [
        (
            g5,
            f"the DRA driver gpu.nvidia.com publishes no devices for node {g5}, expected 4 GPU devices "
            "(gpu.nvidia.com): its kubelet plugin runs only on the nodes its Helm values select "
            f"(kubeletPlugin.nodeSelector {OFF}=false, as `provisioner render` prints them); "
            f"label {OFF} is true, expected false",
        ),
        (
            g5,
            f"node {g5} of a DRA pool advertises nvidia.com/gpu: 4 through a device plugin instead of "
            f"the DRA driver; the label {OFF}=false keeps the device plugin off",
        ),
    ]
    assert pools[("aws-dra", "p4de-dra")]["status"] == "ok"


def test_a_wrong_node_selector_publishes_nothing_on_the_pools_nodes(installed: DraWorld):
    installed.uninstall("aws-dra")
    installed.install("aws-dra", "--set", "kubeletPlugin.nodeSelector.team=nobody")
    code, pools = installed.verify()
    assert code == 1
    for pool, expected in (("p4de-dra", "24 MIG 2g.20gb devices (mig.nvidia.com)"), ("g5-dra-ts", "4 GPU")):
        node = installed.node("aws-dra", f"{EKS_POOL}={pool}")
        [(named, message)] = _problems(pools, "aws-dra", pool)
        assert named == node
        assert message.startswith(
            f"the DRA driver gpu.nvidia.com publishes no devices for node {node}, expected {expected}"
        )
        assert f"kubeletPlugin.nodeSelector {OFF}=false" in message
    assert pools[("aws-dra", "plugin")]["status"] == "ok"
    assert pools[("azure-dra", "a100dra")]["status"] == "ok"  # another cluster's driver is its own


def test_the_driver_on_a_device_plugin_pools_node_is_caught(installed: DraWorld):
    installed.uninstall("aws-dra")
    installed.install("aws-dra", "--set", "kubeletPlugin.nodeSelector=null")  # every GPU node
    code, pools = installed.verify()
    assert code == 1
    plugin = installed.node("aws-dra", f"{EKS_POOL}=plugin")
    [(node, message)] = _problems(pools, "aws-dra", "plugin")
    assert node == plugin
    assert message.startswith(
        f"the DRA driver gpu.nvidia.com publishes 1 GPU device for node {plugin} of a device-plugin pool"
    )


def test_a_cluster_before_1_34_has_no_resource_api_and_verify_says_so(world: DraWorld):
    ref = world.old.cluster.ref
    for pool in world.old.pools:  # as apply would create it; plan refuses DRA pools before 1.34
        connect(ref.cloud, world.sandbox.directory).create_pool(ref, desired_state(pool))
    code, pools = world.verify(world.old_fleet)
    assert code == 1
    assert {key: (p["status"], _problems(pools, *key)) for key, p in pools.items()} == {
        (OLD, "t4drats"): ("degraded", [(None, NO_DRA_API)])
    }


def _shared_claim(name: str) -> dict[str, Any]:
    """One claim that pods share (a time-sliced GPU between pods: DRA shares only through one claim)."""
    parameters = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing"},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
                "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}],
            }
        },
    }


def _pod(name: str, claim: str) -> dict[str, Any]:
    container = {"name": "main", "image": "cuda:12", "resources": {"claims": [{"name": "gpu"}]}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [container],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def test_inspect_and_sync_count_the_devices_claims_hold(installed: DraWorld):
    resources, core = installed.resource("aws-dra"), installed.core("aws-dra")
    for claim in ("team-a", "team-b"):
        resources.create_namespaced_resource_claim("ml", _shared_claim(claim))
    for pod, claim in (("a1", "team-a"), ("a2", "team-a"), ("a3", "team-a"), ("b1", "team-b")):
        assert core.create_namespaced_pod("ml", _pod(pod, claim)).status.phase == "Running"
    g5 = installed.node("aws-dra", f"{EKS_POOL}=g5-dra-ts")

    document = json.loads(
        installed.ok("inspect", str(installed.fleet), "--cluster", "aws-dra", "--json", "-d")
    )
    rows = {(n["pool"], n["resource"]): n for n in document["nodes"]}
    assert rows[("g5-dra-ts", "gpu.nvidia.com")] == {
        "cluster": "aws-dra",
        "pool": "g5-dra-ts",
        "node": g5,
        "resource": "gpu.nvidia.com",
        "allocated": 2,
        "total": 4,
        "pods": [{"pod": f"ml/{p}", "amount": 1} for p in ("a1", "a2", "a3", "b1")],
    }
    mig = rows[("p4de-dra", "mig.nvidia.com")]
    assert (mig["allocated"], mig["total"]) == (0, 24)
    assert rows[("plugin", "nvidia.com/gpu")]["total"] == 1  # the device plugin's pool, as before

    installed.ok("sync", str(installed.fleet))
    listed = json.loads(installed.ok("catalog", "ls", "--json"))
    figures = {
        r["pool"]: (r["k8s_nodes"], r["slices_advertised"], r["slices_allocated"])
        for r in listed
        if r["cluster"] == "aws-dra" and r["gpu"]
    }
    # 4 A10Gs x 4 pods each; held: 3 pods on one GPU, 1 on another. 8 A100s x 3 MIG 2g.20gb.
    assert figures == {"g5-dra-ts": (1, 16, 4), "p4de-dra": (1, 24, 0), "plugin": (1, 1, 0)}
