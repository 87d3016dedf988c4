"""The users' own tools (gcloud, the aws CLI, kubectl) against a running `sandbox serve`, each set
up hermetically: gcloud by its properties (api_endpoint_overrides/container, auth/
disable_credentials) in an empty config directory, aws by --endpoint-url and sandbox keys,
kubectl by the sandbox's kubeconfig."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT

PROVISIONER = [sys.executable, "-m", "provisioner"]


def installed(tool: str) -> str:
    """The tool's path; the aws CLI (PyPI) and kubectl (Debian) are installed where missing; a
    test without gcloud fails, saying so: it is never skipped."""
    found = shutil.which(tool)
    if found:
        return found
    if tool == "aws":
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "awscli"], check=True)
    elif tool == "kubectl":
        subprocess.run(["apt-get", "install", "-y", "-q", "kubectl"], check=True, capture_output=True)
    found = shutil.which(tool) or shutil.which(tool, path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(f"{tool} is not installed, and these tests drive it against the sandbox", pytrace=False)
    return found


@dataclass
class Served:
    """A `sandbox serve` process seeded with `fleet`, and how each CLI reaches it."""

    directory: Path
    fleet: Path
    process: subprocess.Popen[str]
    endpoints: dict[str, str] = field(default_factory=dict)

    def provisioner(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The tool's command line run in this process, as `python -m provisioner` runs it (its
        `main`), without a new interpreter importing the clouds' SDKs each time (1.5-2 s a run)."""
        from click.testing import CliRunner

        from provisioner.cli import main

        command = ["--sandbox", str(self.directory), *args]
        done = CliRunner().invoke(main, command, env={"PROVISIONER_LOCK_DIR": ""})
        stderr = done.stderr
        if done.exc_info is not None and not isinstance(done.exception, SystemExit):
            stderr += "".join(traceback.format_exception(*done.exc_info))  # as the process would print it
        return subprocess.CompletedProcess(["provisioner", *command], done.exit_code, done.stdout, stderr)

    def gcloud(self, *args: str) -> subprocess.CompletedProcess[str]:
        config = self.directory / "gcloud"
        config.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "CLOUDSDK_CONFIG": str(config),  # nothing of the user's gcloud set-up is read
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER": self.endpoints["gke"] + "/",
            "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        }
        return subprocess.run(
            [installed("gcloud"), *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    def aws(self, region: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": "sandbox",
            "AWS_SECRET_ACCESS_KEY": "sandbox",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
        command = [installed("aws"), "--endpoint-url", self.endpoints["eks"], "--region", region, *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)

    def kubectl(self, context: str, *args: str) -> subprocess.CompletedProcess[str]:
        kubeconfig = str(self.directory / "kubeconfig")
        command = [installed("kubectl"), "--kubeconfig", kubeconfig, "--context", context, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Served]:
    """A sandbox seeded with the module's FLEET text, served with its SERVE_ARGS if it has them."""
    directory = tmp_path_factory.mktemp("clis")
    fleet = directory / "fleet.yaml"
    fleet.write_text(request.module.FLEET, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [*PROVISIONER, "sandbox", "serve", "--dir", str(directory / "sandbox"), "--seed", str(fleet)]
    command += getattr(request.module, "SERVE_ARGS", [])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    sandbox = Served(directory / "sandbox", fleet, process)
    try:
        endpoints = sandbox.directory / "endpoints.json"
        deadline = time.monotonic() + 60
        while not endpoints.exists():
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the sandbox never wrote its endpoints"
            time.sleep(0.1)
        sandbox.endpoints = json.loads(endpoints.read_text())
        yield sandbox
    finally:
        process.terminate()
        process.wait(timeout=30)
