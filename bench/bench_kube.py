"""verify and inspect over 100 AKS clusters of 10 GPU nodes, their Kubernetes APIs at 100 ms latency,
and verify again where the same pools are DRA pools (each cluster's ResourceSlices read too).

Each runs as `provisioner verify FLEET --kubeconfig K --json` runs, in this process (imports warm,
as for a second command): the fleet read, each cluster's context found in K by AKS's rule, every
cluster's API read, the JSON written; the run must find every pool ok (verify) or every node
(inspect), so a failure is never a fast figure. The baseline is a script looping over the
clusters with the official client: a client from the kubeconfig, then the same two reads (three
on DRA pools: the slices too), one cluster after another. Figures are in round trips (wall time /
latency); the note gives this process's CPU per cluster.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import Callable

from click.testing import CliRunner

from bench import kube_world
from bench.figures import Figure
from provisioner.cli import main

CLUSTERS = 100
LATENCY_MS = 100.0
GPU_NODES = kube_world.SHARED_NODES + kube_world.WHOLE_NODES
RUNS = 9  # of each command: a 2-core machine shared with the API servers is noisy
# Sandboxes serving the clusters, each in its own process: a fleet's API servers answer at the same
# time, one Python process would answer them one after another; more than 2 would only share 2 cores.
SANDBOX_PROCESSES = 2


def _command(name: str, world: kube_world.KubeBenchWorld) -> Callable[[], None]:
    """The command as a user runs it, checked: every pool ok, or every GPU node and no error."""
    runner = CliRunner()
    args = [name, str(world.fleet), "--kubeconfig", str(world.kubeconfig), "--json"]

    def run() -> None:
        result = runner.invoke(main, args, env={"PROVISIONER_SANDBOX": ""}, catch_exceptions=False)
        document = json.loads(result.stdout)
        if name == "verify":
            found = {p["status"] for p in document["pools"]}
            assert result.exit_code == 0 and found == {"ok"}, found
        else:
            assert result.exit_code == 0 and not document["errors"], document["errors"]
            assert len(document["nodes"]) == CLUSTERS * GPU_NODES, len(document["nodes"])

    return run


def _one_after_another(name: str, world: kube_world.KubeBenchWorld, dra: bool = False) -> Callable[[], None]:
    """Per cluster, what a script calling the official client (or kubectl) does: a client made
    from the kubeconfig, then the command's two reads (and on DRA pools the ResourceSlices)."""
    from kubernetes import client, config

    from provisioner.render import CONFIG_MAP, NAMESPACE

    contexts = [c.name for c in world.compiled.clusters]  # AKS contexts are named as the clusters

    def run() -> None:
        for context in contexts:
            core = client.CoreV1Api(config.new_client_from_config(str(world.kubeconfig), context=context))
            json.loads(core.list_node(_preload_content=False).data)
            if name == "verify":
                second = core.read_namespaced_config_map(CONFIG_MAP, NAMESPACE, _preload_content=False)
            else:
                second = core.list_pod_for_all_namespaces(_preload_content=False)
            json.loads(second.data)
            if dra:
                slices = client.ResourceV1Api(core.api_client).list_resource_slice(_preload_content=False)
                assert len(json.loads(slices.data)["items"]) == GPU_NODES, "a slice per GPU node"
            core.api_client.close()

    return run


def _timed(action: Callable[[], None], runs: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of this process over `runs` runs."""
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def _figures(name: str, world: kube_world.KubeBenchWorld, title: str, dra: bool = False) -> list[Figure]:
    """The command's median beside the same reads one cluster after another, and the floor."""
    round_trip = LATENCY_MS / 1000
    ours = _command(name, world)
    ours()  # imports and first-use set-up done, as for a second command
    wall, cpu = _timed(ours, RUNS)
    baseline, _ = _timed(_one_after_another(name, world, dra), 1)
    note = f"{cpu / CLUSTERS * 1000:.2f} ms of CPU per cluster"
    value, sequential = round(wall / round_trip, 2), round(baseline / round_trip, 1)
    return [
        Figure(title, value, "round trips", sequential, "one cluster after another", note),
        Figure(title, value, "round trips", 1.0, "floor: one round trip", note),
    ]


def run() -> list[Figure]:
    shape = f"{CLUSTERS} clusters x {GPU_NODES} nodes, {LATENCY_MS:g} ms latency"
    figures = []
    for dra in (False, True):
        world = kube_world.start(CLUSTERS, LATENCY_MS, SANDBOX_PROCESSES, dra=dra)
        try:
            if dra:
                figures += _figures("verify", world, f"verify --json on DRA pools, {shape}", dra=True)
            else:
                for name in ("verify", "inspect"):
                    figures += _figures(name, world, f"{name} --json, {shape}")
        finally:
            world.stop()
            shutil.rmtree(world.directory, ignore_errors=True)
    return figures
