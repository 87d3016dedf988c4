"""A sandbox whose clusters serve a Kubernetes API, seeded with pools that have nodes, and the
official kubernetes client pointed at it (as kubectl would be)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from ruamel.yaml import YAML

from provisioner.sandbox.server import SandboxSettings
from tests.worlds import World

POOLS = {
    "aks": """
      - {name: t4, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: time-slicing, replicas: 10},
         nodes: {count: 2}, labels: {team: ml}}
      - {name: whole, instanceType: Standard_NC4as_T4_v3, nodes: {count: 1}}
""",
    "gke": """
      - {name: shared, instanceType: g2-standard-8, gpu: {sharing: mps, replicas: 4}, nodes: {count: 3}}
      - {name: empty, instanceType: g2-standard-8, nodes: {count: 0}}
""",
    "eks": """
      - {name: mig, instanceType: p4d.24xlarge, gpu: {mig: 1g.5gb}, nodes: {count: 1}}
      - {name: shared, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 1}}
""",
}
NAMESPACE, CONFIG_MAP = "gpu-operator", "nvidia-device-plugin-configs"


class KubeWorld(World):
    def __init__(self, tmp_path: Path):
        super().__init__(tmp_path, SandboxSettings())
        self.edit(lambda _: dict(POOLS))
        self.kubeconfig = self.sandbox.directory / "kubeconfig"

    def core(self, cluster: str) -> Any:
        """kubectl --context CLUSTER, as the official client."""
        return client.CoreV1Api(config.new_client_from_config(str(self.kubeconfig), context=cluster))

    def node_names(self, cluster: str, selector: str) -> list[str]:
        return sorted(n.metadata.name for n in self.core(cluster).list_node(label_selector=selector).items)

    def config_map(self, cluster: str) -> dict[str, Any] | None:
        try:
            raw = self.core(cluster).read_namespaced_config_map(CONFIG_MAP, NAMESPACE, _preload_content=False)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return json.loads(raw.data)

    def verify(self, *args: str) -> tuple[int, dict[tuple[str, str], dict[str, Any]]]:
        result = self.run("verify", str(self.fleet), "--json", *args)
        assert result.exit_code in (0, 1), result.output
        pools = json.loads(result.stdout)["pools"]
        return result.exit_code, {(p["cluster"], p["pool"]): p for p in pools}

    def with_closed_context(self, cluster: str) -> Path:
        """A copy of the kubeconfig whose `cluster` context points at a port nothing listens on."""
        with socket.socket() as probe:  # a port just freed: refused at once, never a hang
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        yaml = YAML(typ="safe", pure=True)
        document = yaml.load(self.kubeconfig.read_text(encoding="utf-8"))
        for entry in document["clusters"]:
            if entry["name"] == cluster:
                entry["cluster"]["server"] = f"http://127.0.0.1:{port}/clusters/{cluster}"
        path = self.kubeconfig.parent / f"kubeconfig-{cluster}-closed"
        with path.open("w", encoding="utf-8") as out:
            yaml.dump(document, out)
        return path


@pytest.fixture
def world(tmp_path: Path) -> Iterator[KubeWorld]:
    made = KubeWorld(tmp_path)
    yield made
    made.sandbox.stop()


@pytest.fixture
def applied(world: KubeWorld) -> KubeWorld:
    result = world.run("apply", str(world.fleet), "--auto-approve")
    assert result.exit_code == 0, result.output
    return world
