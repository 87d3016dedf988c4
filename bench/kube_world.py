"""N AKS clusters whose pools have nodes, pods and the device-plugin ConfigMap, served with their
Kubernetes APIs from child processes (as world.py serves GKE's), their contexts in one kubeconfig.

Each cluster holds what `apply` leaves there: two GPU pools of 10 nodes in all (a time-sliced one
and a whole-GPU one) besides AKS's own system pool, and the ConfigMap the tool writes, so
`verify` finds every pool ok. Pods are what a busy cluster runs: GPU workloads on the GPU nodes
and two daemonset pods on every node. All of it is seeded before latency is switched on.

With `dra`, the same two pools take their GPUs through DRA (gpu.allocation: dra), and each cluster
has NVIDIA's DRA driver installed with the values `provisioner render` gives it, so its kubelet
plugin publishes a ResourceSlice per GPU node; the GPU nodes then run only the daemonset pods.
"""

from __future__ import annotations

import multiprocessing
import tempfile
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from bench import world
from provisioner.compile import CompiledCluster, CompiledFleet, compile_file, desired_state
from provisioner.kube.configmap import desired_document
from provisioner.render import dra_driver_values
from provisioner.sandbox.kube.models import KubeCluster
from provisioner.sandbox.server import Sandbox, SandboxSettings
from provisioner.sandbox.serving import serve_alone

SHARED_NODES, WHOLE_NODES = 6, 4  # 10 GPU nodes per cluster
GPU_PODS = {"shared": 3, "whole": 1}  # per node, one GPU (or one share) each
DAEMONSET_PODS = ("kube-proxy", "node-exporter")  # on every node, requesting no GPU
CLUSTER = """\
  - name: aks-{c:04d}
    cloud: aks
    subscription: 33333333-3333-3333-3333-333333333333
    resourceGroup: rg-bench
    cluster: aks-{c:04d}
    pools:
      - {{name: shared, instanceType: Standard_NC4as_T4_v3, gpu: {{sharing: time-slicing, replicas: 10}},
         nodes: {{count: {shared}}}}}
      - {{name: whole, instanceType: Standard_NC4as_T4_v3, nodes: {{count: {whole}}}}}
"""


DRA_CLUSTER = """\
  - name: aks-{c:04d}
    cloud: aks
    subscription: 33333333-3333-3333-3333-333333333333
    resourceGroup: rg-bench
    cluster: aks-{c:04d}
    pools:
      - name: shared
        instanceType: Standard_NC4as_T4_v3
        gpu: {{sharing: time-slicing, replicas: 10, allocation: dra, draFeatureGates: [TimeSlicingSettings]}}
        nodes: {{count: {shared}}}
      - name: whole
        instanceType: Standard_NC4as_T4_v3
        gpu: {{allocation: dra}}
        nodes: {{count: {whole}}}
"""


def fleet_text(clusters: int, dra: bool = False) -> str:
    """Fleet clusters named as their AKS clusters, so the context `az aks get-credentials` would
    write (the cluster's name) is the one the sandbox's kubeconfig holds."""
    template = DRA_CLUSTER if dra else CLUSTER
    body = "".join(template.format(c=c, shared=SHARED_NODES, whole=WHOLE_NODES) for c in range(clusters))
    return "clusters:\n" + body


@dataclass
class KubeBenchWorld:
    directory: Path
    fleet: Path
    compiled: CompiledFleet
    processes: list[multiprocessing.process.BaseProcess]
    controls: list[Connection]

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    def stop(self) -> None:
        for control in self.controls:
            control.send("stop")
        for process in self.processes:
            process.join(timeout=30)


def start(clusters: int, latency_ms: float, processes: int = 1, dra: bool = False) -> KubeBenchWorld:
    """The fleet's clusters served by `processes` sandboxes, each in its own child process (as
    separate API servers answer at the same time), their contexts in one kubeconfig; with `dra`,
    its pools DRA pools and the DRA driver installed."""
    directory = Path(tempfile.mkdtemp(prefix="provisioner-bench-kube-"))
    fleet = directory / "fleet.yaml"
    fleet.write_text(fleet_text(clusters, dra), encoding="utf-8")
    compiled = compile_file(fleet)
    children, controls = [], []
    for shard in range(processes):
        process, parent = world.fork_unready(
            _serve,
            directory=directory / f"sandbox-{shard}",
            latency_ms=latency_ms,
            clusters=compiled.clusters[shard::processes],
        )
        children.append(process)
        controls.append(parent)
    for parent in controls:
        world.wait_ready(parent)
    _merge_kubeconfigs(
        [directory / f"sandbox-{shard}" / "kubeconfig" for shard in range(processes)],
        directory / "kubeconfig",
    )
    return KubeBenchWorld(directory, fleet, compiled, children, controls)


def _merge_kubeconfigs(paths: list[Path], into: Path) -> None:
    yaml = YAML(typ="safe", pure=True)
    merged: dict[str, Any] = {}
    for path in paths:
        document = yaml.load(path.read_text(encoding="utf-8"))
        if not merged:
            merged = document
        else:
            for item in ("clusters", "users", "contexts"):
                merged[item] += document[item]
    with into.open("w", encoding="utf-8") as out:
        yaml.dump(merged, out)


def _serve(
    *, directory: Path, clusters: tuple[CompiledCluster, ...], latency_ms: float, control: Connection
) -> None:
    from provisioner.drivers.aks import _properties

    sandbox = Sandbox(directory, SandboxSettings()).start([c.target for c in clusters])
    assert sandbox.kube is not None
    for cluster in clusters:
        ref = cluster.target.ref
        backend = sandbox.emulators["aks"].backend(ref.account, ref.location)  # type: ignore[attr-defined]
        for pool in cluster.pools:  # as the AKS driver creates it; operations end at once here
            backend.put_pool(ref.name, pool.pool.name, _properties(desired_state(pool)))
        _seed_cluster(sandbox.kube.cluster(cluster.name), cluster)
    for emulator in (*sandbox.emulators.values(), sandbox.kube):
        emulator.app.latency = latency_ms / 1000
    serve_alone()
    control.send("ready")
    control.recv()  # "stop"
    sandbox.stop()


def _seed_cluster(kube: KubeCluster, compiled: CompiledCluster) -> None:
    document = desired_document(compiled)
    assert document is not None, "AKS clusters take the device-plugin ConfigMap"
    meta = document["metadata"]
    kube.apply_config_map(meta["namespace"], meta["name"], document, "provisioner", force=True)
    if compiled.dra_pools:  # helm install -f <render's values>, as the values file says
        kube.install_dra_driver(dra_driver_values(compiled))
    for n, (name, node) in enumerate(sorted(kube.nodes().items())):
        pool = node["metadata"]["labels"].get("kubernetes.azure.com/agentpool", "")
        for app in DAEMONSET_PODS:
            kube.create_pod("kube-system", _pod(f"{app}-{n:02d}", name, None))
        for i in range(0 if compiled.dra_pools else GPU_PODS.get(pool, 0)):
            kube.create_pod("ml", _pod(f"train-{n:02d}-{i}", name, "nvidia.com/gpu"))


def _pod(name: str, node: str, resource: str | None) -> dict[str, Any]:
    limits = {resource: "1"} if resource else {}
    container = {"name": "main", "image": "registry.example/app:1", "resources": {"limits": limits}}
    metadata = {"name": name, "labels": {"app": name.split("-", maxsplit=1)[0]}}
    return {"metadata": metadata, "spec": {"nodeName": node, "containers": [container]}}
