"""The clouds' API quotas, as the drivers pace themselves by them (clouds.yaml `quota`).

Each request counts in one quota scope: the cloud, then the ClusterRef fields its quota counts
by (ARM's subscription, GKE's project, EKS's and ACK's account and region). Pacing and sharding
(`sync --shard`) both go by this one scope, so that no two shards share a bucket.
"""

from __future__ import annotations

from provisioner import hardware
from provisioner.clusters import ClusterRef


def quota_scope(ref: ClusterRef) -> tuple[str, ...]:
    """The quota scope requests for `ref`'s cluster count in: its cloud, then the fields of its
    quota's `scope` (a cluster's own location for EKS and ACK, its subscription for AKS)."""
    fields = hardware.load().clouds[ref.cloud].quota.scope
    return (ref.cloud, *(getattr(ref, name) for name in fields))
