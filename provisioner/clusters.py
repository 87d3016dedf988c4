"""Which cluster: the neutral names the fleet, the compiler, plan, sync and the drivers share.

Nothing here knows a cloud SDK or a driver; drivers take a ClusterRef, the layers above them a
Target, and either may be made anywhere without importing `drivers/`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# major.minor, then the cloud's own rest: AKS "1.35.0", GKE "1.35.1-gke.1234000", EKS "1.35",
# ACK "1.35.1-aliyun.1"; a leading v as Kubernetes' own gitVersion writes it ("v1.35.0").
_KUBERNETES_VERSION = re.compile(
    r"^v?(?P<major>0|[1-9][0-9]*)\.(?P<minor>0|[1-9][0-9]*)(\.[0-9]+)?([-+][0-9A-Za-z.+-]+)?$"
)


@dataclass(frozen=True)
class ClusterRef:
    """Which cluster a driver acts on: the cloud, where the cluster lives and its name there.

    account and location are the two levels above the cluster in the cloud's own resource path
    (AKS subscription and resource group, GKE project and location, EKS account and region);
    `extras` holds what a cloud needs beyond them (EKS: the node role and subnets new node
    groups get).
    """

    cloud: str
    account: str
    location: str
    name: str
    extras: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """The cluster's identity: two refs with the same key are the same cluster."""
        return (self.cloud, self.account, self.location, self.name)

    @property
    def path(self) -> str:
        """`cloud/account/location/cluster`: how a cluster found by discovery is named."""
        return "/".join(self.key)


@dataclass(frozen=True)
class Target:
    """A cluster as the layers above drivers name it: the fleet's name for it (or, for a cluster
    found by discovery, its path) and the reference its driver takes."""

    name: str
    ref: ClusterRef

    @property
    def cloud(self) -> str:
        return self.ref.cloud


@dataclass(frozen=True, order=True)
class KubernetesVersion:
    """A cluster's Kubernetes version, as its cloud's API reports it: what features a cluster has
    goes by major.minor (DRA's resource.k8s.io/v1 from 1.34), so only they compare; `text` keeps
    the cloud's own string, patch and build suffix included, for messages."""

    major: int
    minor: int
    text: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str) -> KubernetesVersion:
        """Any cloud's form of a version; ValueError, naming the text, where it is none."""
        found = _KUBERNETES_VERSION.match(text.strip())
        if found is None:
            raise ValueError(f"{text!r} is not a Kubernetes version (want major.minor, as in 1.35 or 1.35.1)")
        return cls(int(found["major"]), int(found["minor"]), text.strip())

    def at_least(self, version: tuple[int, int]) -> bool:
        return (self.major, self.minor) >= version

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"
