"""Progress where nothing is redrawn: `apply` run as CI or a CronJob runs it, its stdout a pipe.

Each operation's start and outcome must reach the pipe when it happens, and on long operations a
"still running" line, as `terraform apply` logs "Still creating... [1m0s elapsed]". The apply runs
as a real process (its stdout a pipe), against `sandbox serve` or a sandbox in the test's process;
lines are read as they arrive, and what is checked is their order and what the clouds hold when a
line arrives, never how long anything took.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from tests.conftest import ROOT

# Each pool operation (a cluster runs one at a time): what the test reads when a line arrives (one
# listing, its driver already loaded) has the 3 s until the next operation begins.
OP_SECONDS = "3"
HEARTBEAT = "0.5"  # seconds between "still running" lines (PROVISIONER_PROGRESS_INTERVAL)


def fleet_text(suffix: str) -> str:
    """One AKS pool, three GKE pools: GKE's last pool is created two operations after AKS's."""
    return f"""\
clusters:
  - name: azure
    cloud: aks
    subscription: 22222222-2222-2222-2222-222222222222
    resourceGroup: rg-{suffix}
    cluster: aks-{suffix}
    pools:
      - {{name: spare, instanceType: Standard_NC4as_T4_v3, nodes: {{count: 1}}}}
  - name: gcp
    cloud: gke
    project: project-{suffix}
    location: europe-west4
    cluster: gke-{suffix}
    pools:
      - {{name: mig, instanceType: a2-highgpu-1g, gpu: {{mig: 1g.5gb}}, nodes: {{min: 0, max: 3}}}}
      - {{name: shared, instanceType: g2-standard-8, gpu: {{sharing: mps, replicas: 4}},
         nodes: {{min: 0, max: 2}}}}
      - {{name: spare, instanceType: g2-standard-8, nodes: {{count: 3}}}}  # one per zone
"""


@pytest.fixture
def sandbox(tmp_path: Path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text(uuid.uuid4().hex[:8]), encoding="utf-8")
    directory = tmp_path / "sandbox"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = ["sandbox", "serve", "--dir", str(directory), "--seed", str(fleet), "--op-seconds", OP_SECONDS]
    server = subprocess.Popen(
        [sys.executable, "-m", "provisioner", *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not (directory / "endpoints.json").exists():
            assert server.poll() is None, "sandbox serve exited"
            assert time.monotonic() < deadline, "sandbox serve wrote no endpoints.json"
            time.sleep(0.1)
        yield fleet, directory
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)


def run_piped(fleet: Path, directory: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PROVISIONER_LOCK_DIR": "",
        "PROVISIONER_CATALOG": "",
        "PROVISIONER_PROGRESS_INTERVAL": HEARTBEAT,
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "provisioner",
            *args,
            str(fleet),
            "--auto-approve",
            "--sandbox",
            str(directory),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def owned(directory: Path, fleet: Path, cluster: str) -> set[str]:
    target = compile_file(fleet).cluster(cluster).target
    return {p.name for p in connect(target.cloud, directory).list_pools(target.ref) if p.owned}


def test_apply_logs_each_operation_when_it_ends_and_what_still_runs(sandbox: tuple[Path, Path]):
    fleet, directory = sandbox
    assert owned(directory, fleet, "gcp") == set()  # and the driver loaded before apply starts
    apply = run_piped(fleet, directory, "apply", "--no-kube")
    assert apply.stdout is not None
    lines: list[str] = []
    first_done: dict[str, object] | None = None
    heartbeat_running: bool | None = None
    for arrived in apply.stdout:  # each line as the pipe delivers it
        line = arrived.rstrip("\n")
        lines.append(line)
        if first_done is None and re.fullmatch(r"✓ \S+: created \(\d+s\)", line):
            # What holds when the first outcome arrives: the apply runs on, GKE's last pool is not made.
            first_done = {
                "line": line,
                "running": apply.poll() is None,
                "gcp": owned(directory, fleet, "gcp"),
            }
        if heartbeat_running is None and line.startswith("still running ("):
            heartbeat_running = apply.poll() is None
    assert apply.wait(timeout=60) == 0, apply.stderr.read() if apply.stderr else ""
    assert first_done is not None, lines
    assert first_done["running"], "the first outcome arrived only once apply had exited"
    assert "spare" not in first_done["gcp"], f"{first_done['line']!r} arrived after GKE's last pool existed"
    assert lines[-1] == "Apply complete: 4 created, 0 updated, 0 replaced, 0 deleted."
    # Each cluster's operations one after another, each start before its outcome, in the log's order.
    # (clusters start in any order; the plan before them names no "gcp/" pool)
    gcp = [line for line in lines if line.startswith(("gcp/", "✓ gcp/"))]
    assert [re.sub(r" \(\d+s\)$", "", line) for line in gcp] == [
        "gcp/mig: creating…",
        "✓ gcp/mig: created",
        "gcp/shared: creating…",
        "✓ gcp/shared: created",
        "gcp/spare: creating…",
        "✓ gcp/spare: created",
    ]
    first = lines.index(str(first_done["line"]))
    assert first < lines.index("gcp/spare: creating…")  # told before the last operation even began
    # The heartbeat names what runs, while it runs: between gcp/spare's start and its outcome.
    assert heartbeat_running, "no heartbeat line arrived while apply ran"
    spare = lines[lines.index("gcp/spare: creating…") : lines.index(gcp[-1])]
    assert any(re.fullmatch(r"still running \((\d+m)?\d+s\): gcp/spare create", line) for line in spare), (
        spare
    )


def test_destroy_logs_its_operations_the_same_way(tmp_path: Path):
    """The pools made at once (the sandbox's operations instant), then destroyed at OP_SECONDS each."""
    from provisioner.sandbox.server import Sandbox, SandboxSettings

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text(uuid.uuid4().hex[:8]), encoding="utf-8")
    targets = [c.target for c in compile_file(fleet).clusters]
    running = Sandbox(tmp_path / "sandbox", SandboxSettings()).start(targets)
    try:
        _destroy_logs(fleet, running)
    finally:
        running.stop()


def _destroy_logs(fleet: Path, running: Any) -> None:
    directory = running.directory
    applied = run_piped(fleet, directory, "apply", "--no-kube")
    assert applied.wait(timeout=60) == 0
    assert owned(directory, fleet, "gcp") == {"mig", "shared", "spare"}
    for engine in running.engines.values():
        engine.op_seconds = float(OP_SECONDS)
    destroy = run_piped(fleet, directory, "destroy")
    assert destroy.stdout is not None
    first: tuple[str, bool, set[str]] | None = None
    lines = []
    for line in destroy.stdout:
        lines.append(line.rstrip("\n"))
        if first is None and lines[-1].startswith("✓ "):
            first = (lines[-1], destroy.poll() is None, owned(directory, fleet, "gcp"))
    assert destroy.wait(timeout=60) == 0
    assert first is not None and re.fullmatch(r"✓ \S+: deleted \(\d+s\)", first[0]), lines
    assert first[1] and "spare" in first[2], f"{first[0]!r} arrived only after GKE's last pool was gone"
    assert any(line.startswith("still running (") for line in lines)
    assert lines[-1] == "Apply complete: 0 created, 0 updated, 0 replaced, 4 deleted."


@pytest.mark.parametrize("command", ["apply", "destroy"])
def test_a_bad_heartbeat_interval_is_said_before_anything_is_planned(command: str):
    from click.testing import CliRunner

    from provisioner.cli import main

    env = {"PROVISIONER_PROGRESS_INTERVAL": "every minute", "PROVISIONER_SANDBOX": ""}
    result = CliRunner().invoke(main, [command, "examples/fleet.yaml", "--auto-approve"], env=env)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        "error: PROVISIONER_PROGRESS_INTERVAL: 'every minute' is not a positive number of seconds\n"
    )


def test_sync_says_how_far_it_is_on_stderr_while_json_stays_on_stdout(tmp_path: Path):
    """A nightly sync's log shows it moving: "still syncing (...): N of M clusters done" lines on
    stderr, every PROVISIONER_PROGRESS_INTERVAL, and stdout holds only its JSON document."""
    from provisioner.sandbox.server import Sandbox, SandboxSettings

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text(uuid.uuid4().hex[:8]), encoding="utf-8")
    targets = [c.target for c in compile_file(fleet).clusters]
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings(latency_ms=300)).start(targets)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PROVISIONER_CATALOG": "",
        "PROVISIONER_PROGRESS_INTERVAL": "0.1",  # well under one listing's 300 ms round trip
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "provisioner", "sync", str(fleet), "--json", "--no-kube"],
            env={**env, "PROVISIONER_SANDBOX": str(sandbox.directory)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        sandbox.stop()
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["written"]) == ["azure", "gcp"]
    beats = re.findall(r"^still syncing \(\S+\): (\d) of 2 clusters done$", done.stderr, re.M)
    assert beats and beats == sorted(beats), done.stderr  # at least one, never going back
