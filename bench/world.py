"""A sandbox of N GKE clusters with k pools each, run in a child process.

The child keeps the emulators' request handling off the measured process's interpreter lock, as
a real cloud would be. Pools are seeded straight into the emulator's state, before latency is
switched on, so building a 300-cluster world takes a moment.
"""

from __future__ import annotations

import multiprocessing
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from provisioner.compile import CompiledFleet, compile_file
from provisioner.fleet import GkeCluster
from provisioner.pools import OWNER_TAG_KEY, OWNER_TAG_VALUE
from provisioner.sandbox.gke.models import Accelerator, Autoscaling, NodePool
from provisioner.sandbox.server import Sandbox, SandboxSettings
from provisioner.sandbox.serving import serve_alone

POOL = (
    "      - {{name: pool-{i}, instanceType: g2-standard-8, gpu: {{sharing: time-slicing, replicas: 4}},"
    " nodes: {{min: 0, max: 4}}}}\n"
)


def fleet_text(clusters: int, pools: int) -> str:
    lines = ["clusters:\n"]
    for c in range(clusters):
        lines.append(
            f"  - name: c{c:04d}\n    cloud: gke\n    project: bench-project\n    location: us-central1\n"
            f"    cluster: gke-{c:04d}\n    pools:\n"
        )
        lines.extend(POOL.format(i=i) for i in range(pools))
    return "".join(lines)


@dataclass
class BenchWorld:
    directory: Path
    fleet: Path
    compiled: CompiledFleet
    process: multiprocessing.process.BaseProcess
    control: Connection

    @property
    def sandbox_dir(self) -> Path:
        return self.directory / "sandbox"

    @property
    def clusters(self) -> list[GkeCluster]:
        return [c.target for c in self.compiled.clusters]

    def stop(self) -> None:
        self.control.send("stop")
        self.process.join(timeout=30)


def start(
    clusters: int, pools: int, created: bool, latency_ms: float = 0.0, op_seconds: float = 0.0
) -> BenchWorld:
    """The fleet's clusters in a sandbox; with `created`, their pools exist already, owned."""
    directory = Path(tempfile.mkdtemp(prefix="provisioner-bench-"))
    fleet = directory / "fleet.yaml"
    fleet.write_text(fleet_text(clusters, pools), encoding="utf-8")
    compiled = compile_file(fleet)
    process, parent = fork_sandbox(
        _serve,
        directory=directory / "sandbox",
        compiled=compiled,
        created=created,
        latency_ms=latency_ms,
        op_seconds=op_seconds,
    )
    return BenchWorld(directory, fleet, compiled, process, parent)


def fork_sandbox(serve: Callable[..., None], **kwargs: Any) -> tuple[BaseProcess, Connection]:
    """serve(control=..., **kwargs) in a forked child, returned once it says it is ready."""
    process, parent = fork_unready(serve, **kwargs)
    wait_ready(parent)
    return process, parent


def fork_unready(serve: Callable[..., None], **kwargs: Any) -> tuple[BaseProcess, Connection]:
    """serve(control=..., **kwargs) in a forked child, started: several can seed at once."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(
        target=serve, kwargs={**kwargs, "control": child}, daemon=True
    )
    process.start()
    child.close()  # so a child that dies is an EOFError here, not a wait forever
    return process, parent


def wait_ready(control: Connection) -> None:
    if control.recv() != "ready":
        raise RuntimeError("the bench sandbox did not start")


def _serve(
    *,
    directory: Path,
    compiled: CompiledFleet,
    created: bool,
    latency_ms: float,
    op_seconds: float,
    control: Connection,
) -> None:
    sandbox = Sandbox(directory, SandboxSettings()).start([c.target for c in compiled.clusters])
    if created:
        for cluster in compiled.clusters:
            ref = cluster.target.ref
            backend = sandbox.emulators["gke"].backend(ref.account, ref.location)  # type: ignore[attr-defined]
            for pool in cluster.pools:
                backend.create_pool(ref.name, _as_created(pool.pool.name))
    for engine in sandbox.engines.values():
        engine.op_seconds = op_seconds
    for emulator in sandbox.emulators.values():
        emulator.app.latency = latency_ms / 1000  # type: ignore[attr-defined]
    serve_alone()
    control.send("ready")
    control.recv()  # "stop"
    sandbox.stop()


def _as_created(name: str) -> NodePool:
    """The node pool the GKE driver creates for POOL, as the emulator stores it."""
    return NodePool(
        name=name,
        machine_type="g2-standard-8",
        resource_labels={OWNER_TAG_KEY: OWNER_TAG_VALUE},
        taints=(("nvidia.com/gpu", "present", "NO_SCHEDULE"),),
        accelerators=(
            Accelerator(
                "nvidia-l4",
                1,
                sharing_strategy="TIME_SHARING",
                max_shared_clients=4,
                driver_version="DEFAULT",
            ),
        ),
        autoscaling=Autoscaling(enabled=True, min_nodes=0, max_nodes=4),
        status="RUNNING",
    )
