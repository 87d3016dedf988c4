"""`place --live`: the catalog's pools with their allocation read from each cluster's Kubernetes
API now instead of the last sync's (the same counting as `sync`: inspect.pool_allocation).

A cluster is reached as `verify` and `inspect` reach it: through the fleet's entry for it
(`kubeContext`, or the context its cloud's CLI writes) where a fleet is given, else through the
kubeconfig context named as the catalog names the cluster (the sandbox's, and kubeconfigs whose
contexts are named after the clusters). A cluster that does not answer keeps its synced figures,
marked stale: `place` then counts its free slices as unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from provisioner.capacity import resource_of
from provisioner.errors import KubeUnreachable
from provisioner.kube.contexts import KubeAccess, at_once, each_cluster
from provisioner.kube.inspect import UNFINISHED, all_pool_label_keys, inspect_cluster, pool_allocation


def live_rows(
    rows: Sequence[Mapping[str, Any]],
    access: KubeAccess,
    fleet_clusters: Mapping[str, Any] | None = None,
    asked: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """`rows` with the allocation of the clusters named in `asked` (default: every cluster with a
    live GPU pool) read now, and per cluster that did not answer, why."""
    gpu_rows = [r for r in rows if r.get("gpu") and r.get("deleted_at") is None]
    names = sorted({r["cluster"] for r in gpu_rows} if asked is None else set(asked))
    targets = [
        (
            name,
            (fleet_clusters or {}).get(name),
            {r["pool"]: _counting(r) for r in gpu_rows if r["cluster"] == name},
        )
        for name in names
    ]
    results = each_cluster(functools.partial(_read, access), targets)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    read = {
        name: found for (name, _, _), (found, _) in zip(targets, results, strict=True) if found is not None
    }
    errors = {name: error for (name, _, _), (_, error) in zip(targets, results, strict=True) if error}
    shown = []
    for given in rows:
        row = dict(given)
        if row["cluster"] in read:
            found = read[row["cluster"]].get(row["pool"])
            row |= {
                "k8s_nodes": found.nodes if found else 0,
                "slices_advertised": found.advertised if found else 0,
                "slices_allocated": found.allocated if found else 0,
                "allocation_at": now,
                "allocation_stale": False,
                "allocation_live": True,
            }
        elif row["cluster"] in errors and row.get("allocation_at") is not None:
            row["allocation_stale"] = True
        shown.append(row)
    return shown, errors


class _Counting(NamedTuple):
    """How a catalog pool's allocation is read: data only, so a helper process can read it too."""

    resource: str  # what its nodes advertise, or a DRA pool's DeviceClass
    cloud_id: str | None  # for nodes without provisioner.io/pool that name their pool by ID (ACK)
    dra: bool
    dra_replicas: int | None  # a shared DRA pool's pods per device


def _counting(row: Mapping[str, Any]) -> _Counting:
    dra = row.get("allocation_mode") == "dra"
    return _Counting(resource_of(row), row.get("cloud_id"), dra, row.get("replicas") if dra else None)


def _read(access: KubeAccess, target: tuple[str, Any, Mapping[str, _Counting]]) -> tuple[Any, str | None]:
    """One cluster's allocation per pool, or why its Kubernetes API could not say."""
    name, cluster, pools = target
    # A node is its fleet pool's by provisioner.io/pool; one without it by its cloud's pool label.
    ids = {p.cloud_id: pool for pool, p in pools.items() if p.cloud_id}  # ACK's holds the ID
    dra = any(p.dra for p in pools.values())
    try:
        with access.for_cluster(cluster) if cluster is not None else access.connect(name, name) as kube:
            uses = inspect_cluster(kube, all_pool_label_keys(), ids, dra=dra)
    except KubeUnreachable as error:
        return None, str(error)
    shared = {pool: p.dra_replicas for pool, p in pools.items() if p.dra_replicas}
    return pool_allocation(uses, {pool: p.resource for pool, p in pools.items()}, shared), None


def share_claims(
    access: KubeAccess, cluster: str, fleet: str | None, namespace: str | None
) -> tuple[dict[str, int], str | None]:
    """The ResourceClaims in `namespace` (default: default) of the catalog's cluster `cluster`, by
    name, each with the pods that use it: those it is reserved for (status.reservedFor) and those
    not finished that name it but are not scheduled yet, so two placements in a row do not both
    count a claim as empty; or {} and why they could not be read (a cluster before Kubernetes 1.34
    does not serve resource.k8s.io/v1)."""
    entry = None
    if fleet is not None:
        from provisioner.fleet import load

        entry = next((c for c in load(fleet).clusters if c.name == cluster), None)
    where = namespace or "default"
    try:
        with access.for_cluster(entry) if entry is not None else access.connect(cluster, cluster) as kube:
            listed, pods = at_once(lambda: kube.resource_claims(where), lambda: kube.pods(UNFINISHED))
    except KubeUnreachable as error:
        return {}, f"cannot read the ResourceClaims in namespace {where}: {error}"
    if listed is None:
        return {}, f"the cluster serves no resource.k8s.io/v1 (Kubernetes before 1.34): no claims in {where}"
    naming: dict[str, set[str]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("namespace") != where:
            continue
        for claim_ref in (pod.get("spec") or {}).get("resourceClaims") or []:
            if claim_ref.get("resourceClaimName"):
                naming.setdefault(claim_ref["resourceClaimName"], set()).add(meta.get("name", ""))
    # A claim not made yet that pods already name is taken by them as much as a made one.
    users = {name: len(pods_naming) for name, pods_naming in naming.items()}
    for item in listed:
        name = item["metadata"]["name"]
        reserved = {r.get("name", "") for r in (item.get("status") or {}).get("reservedFor") or []}
        users[name] = len(reserved | naming.get(name, set()))
    return users, None
