"""The cluster's Kubernetes version and what follows from it: what /version reports, whether the
API serves resource.k8s.io/v1, and which feature gates are on by default.

Sources: kubernetes/enhancements keps/sig-node/4381-dra-structured-parameters/kep.yaml (DRA stable
in v1.34, resource.k8s.io/v1 in k8s.io/api v0.34.0); keps/sig-scheduling/5004-dra-extended-
resource/kep.yaml and the features table (DRAExtendedResource: 1.34 alpha default off, 1.36 beta
default on, 1.37 GA): docs/FACTS.md "Dynamic Resource Allocation (DRA)".
"""

from __future__ import annotations

import re
from typing import Any

from provisioner.sandbox.versions import DEFAULT_KUBERNETES_VERSION

DEFAULT_VERSION = f"{DEFAULT_KUBERNETES_VERSION}.0"  # a sandbox cluster's unless its seed names one
RESOURCE_V1_SINCE = (1, 34)  # resource.k8s.io/v1 is GA (and served by default) from 1.34
EXTENDED_RESOURCE_DEFAULT_ON = (1, 36)  # DRAExtendedResource beta, on by default, from 1.36
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of "1.35.0", "v1.35.2-gke.100" or "1.34"."""
    found = _VERSION.match(text.strip())
    if not found:
        raise ValueError(f"not a Kubernetes version: {text!r} (expected MAJOR.MINOR[.PATCH], e.g. 1.35.0)")
    return int(found[1]), int(found[2]), int(found[3] or 0)


def normalized(text: str | None) -> str:
    """MAJOR.MINOR.PATCH of `text`, the default version where none is given."""
    major, minor, patch = parse(text or DEFAULT_VERSION)
    return f"{major}.{minor}.{patch}"


def serves_resource_v1(version: str) -> bool:
    return parse(version)[:2] >= RESOURCE_V1_SINCE


def extended_resource_enabled(version: str) -> bool:
    """DRAExtendedResource at its default for `version` (the sandbox sets no gates by hand)."""
    return parse(version)[:2] >= EXTENDED_RESOURCE_DEFAULT_ON


def version_info(version: str) -> dict[str, Any]:
    """GET /version (version.Info) of an API server at `version`."""
    major, minor, patch = parse(version)
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": f"v{major}.{minor}.{patch}",
        "gitCommit": "sandbox",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }
