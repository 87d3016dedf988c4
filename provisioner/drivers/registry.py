"""Which class drives each cloud: wiring, kept in code (the hardware data holds only facts about
the clouds). Classes are named, not imported, so a command imports only the SDKs of the clouds it
talks to. A sandbox's addresses are read here, where the drivers are made: the emulators
(provisioner.sandbox) are the sandbox's, and drivers import nothing of them."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

from provisioner import quotas
from provisioner.drivers import Driver
from provisioner.errors import SandboxNotRunning

# cloud -> "module:Class" of its Driver
DRIVERS = {
    "aks": "provisioner.drivers.aks:AksDriver",
    "gke": "provisioner.drivers.gke:GkeDriver",
    "eks": "provisioner.drivers.eks:EksDriver",
    "ack": "provisioner.drivers.ack:AckDriver",
}
# The modules the drivers' SDKs and the kubernetes client import, by name prefix: commands that
# talk to no cloud (validate, --help) must import none of them.
SDK_MODULE_PREFIXES = (
    "boto3",
    "botocore",
    "azure",
    "google.cloud",
    "google.auth",
    "google.api_core",
    "alibabacloud_",
    "darabonba",
    "Tea",
    "kubernetes",
)


def load_class(path: str) -> Any:
    """The class a "module:Class" entry names, imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def connect(cloud: str, sandbox: str | Path | None = None) -> Driver:
    """The driver for `cloud`, talking to the real cloud or, given a sandbox directory, its emulator."""
    endpoint = None
    if sandbox is not None:
        endpoint = read_endpoints(sandbox).get(cloud)
        if endpoint is None:
            raise SandboxNotRunning(f"the sandbox at {sandbox} runs no {cloud} emulator; restart it")
    quotas.set_pacing(pacing_for(sandbox))
    return load_class(DRIVERS[cloud])(endpoint)


def pacing_for(sandbox: str | Path | None) -> quotas.Pacing | None:
    """The quotas requests are paced by: a real cloud's as published; a sandbox's as
    `sandbox serve --quotas` wrote them in its endpoints file ({"scale", "speedup"}), or None
    where it enforces none (or is not there: connecting says so)."""
    if sandbox is None:
        return quotas.Pacing()
    try:
        enforced = read_endpoints(sandbox).get("quotas")
    except SandboxNotRunning:
        return None
    if not isinstance(enforced, dict):
        return None
    scale, speedup = enforced.get("scale", 1.0), enforced.get("speedup", 1.0)
    if not (_positive_number(scale) and _positive_number(speedup)):
        # 0 would pace at no rate at all (a division by zero), a negative one backwards
        raise SandboxNotRunning(
            f"the sandbox's endpoints file says quotas {enforced!r}: scale and speedup must be "
            "numbers above 0; restart it"
        )
    return quotas.Pacing(float(scale), float(speedup))


def _positive_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf


ENDPOINTS_FILE = "endpoints.json"  # as `sandbox serve --dir DIR` writes it


def read_endpoints(directory: str | Path) -> dict[str, str]:
    """The emulator addresses `provisioner sandbox serve --dir DIR` wrote, by cloud."""
    path = Path(directory) / ENDPOINTS_FILE
    try:
        endpoints = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SandboxNotRunning(
            f"no sandbox at {directory}: {path} does not exist; start one with "
            f"`provisioner sandbox serve --dir {directory}`"
        ) from None
    except (OSError, ValueError) as exc:
        raise SandboxNotRunning(f"{path} is not a sandbox's endpoints file: {exc}") from None
    if not isinstance(endpoints, dict):
        raise SandboxNotRunning(f"{path} is not a sandbox's endpoints file")
    return endpoints
