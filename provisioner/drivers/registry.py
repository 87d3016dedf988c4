"""Which class drives each cloud and which emulates it: wiring, kept in code (the hardware data
holds only facts about the clouds). Classes are named, not imported, so a command imports only
the SDKs of the clouds it talks to."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

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
# cloud -> "module:Class" of its sandbox emulator (provisioner.sandbox.Emulator)
EMULATORS = {
    "aks": "provisioner.sandbox.aks:AksEmulator",
    "gke": "provisioner.sandbox.gke:GkeEmulator",
    "eks": "provisioner.sandbox.eks:EksEmulator",
    "ack": "provisioner.sandbox.ack:AckEmulator",
}


def load_class(path: str) -> Any:
    """The class a "module:Class" entry names, imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def connect(cloud: str, sandbox: str | Path | None = None) -> Driver:
    """The driver for `cloud`, talking to the real cloud or, given a sandbox directory, its emulator."""
    from provisioner.sandbox.endpoints import read_endpoints

    endpoint = None
    if sandbox is not None:
        endpoint = read_endpoints(sandbox).get(cloud)
        if endpoint is None:
            raise SandboxNotRunning(f"the sandbox at {sandbox} runs no {cloud} emulator; restart it")
    return load_class(DRIVERS[cloud])(endpoint)
