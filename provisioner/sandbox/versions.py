"""The Kubernetes version each seeded cluster runs: one neutral release (major.minor.patch), which
each cloud's emulator reports in its own form (its `VersionFormat`), and the sandbox's Kubernetes
API in /version. `sandbox serve --kubernetes-version [CLUSTER=]X.Y[.Z]` sets it."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# Every seeded cluster's unless told otherwise: DRA (resource.k8s.io/v1) is GA from 1.34, and
# 1.35 is a release all four clouds offer in late 2026.
DEFAULT_KUBERNETES_VERSION = "1.35"
_RELEASE = re.compile(r"^(?P<major>0|[1-9][0-9]*)\.(?P<minor>0|[1-9][0-9]*)(\.(?P<patch>0|[1-9][0-9]*))?$")


@dataclass(frozen=True)
class Release:
    """A Kubernetes release; patch None where only major.minor was given (each cloud then picks
    its own patch, as AKS and GKE do for a version given as 1.X)."""

    major: int
    minor: int
    patch: int | None = None

    def with_default_patch(self, patch: int) -> Release:
        return self if self.patch is not None else replace(self, patch=patch)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}" + ("" if self.patch is None else f".{self.patch}")


@dataclass(frozen=True)
class VersionFormat:
    """How one cloud's API writes a cluster's version, and the patch it runs of a release given as
    major.minor: the cloud's own data, kept in its emulator's models with the source."""

    template: str  # str.format with major, minor and patch
    default_patch: int

    def resolve(self, release: Release) -> Release:
        return release.with_default_patch(self.default_patch)

    def spell(self, release: Release) -> str:
        full = self.resolve(release)
        return self.template.format(major=full.major, minor=full.minor, patch=full.patch)

    @property
    def default(self) -> str:
        """The default release as this cloud writes it."""
        return self.spell(parse_release(DEFAULT_KUBERNETES_VERSION))


def parse_release(text: str) -> Release:
    """`X.Y` or `X.Y.Z`; ValueError, saying what is allowed, for anything else."""
    found = _RELEASE.match(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a Kubernetes version: give X.Y or X.Y.Z, as in 1.35 or 1.34.2")
    patch = found["patch"]
    return Release(int(found["major"]), int(found["minor"]), None if patch is None else int(patch))


def parse_setting(text: str) -> tuple[str | None, Release]:
    """One `--kubernetes-version` value: `CLUSTER=X.Y[.Z]` (that seeded cluster's, by its fleet
    name) or `X.Y[.Z]` (every other cluster's)."""
    cluster, equals, version = text.rpartition("=")
    if equals and not cluster.strip():
        raise ValueError(f"{text!r} names no cluster before '=': give CLUSTER=X.Y[.Z] or X.Y[.Z]")
    return (cluster.strip() or None), parse_release(version)
