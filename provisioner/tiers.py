"""Capacity tiers: whether a catalog pool can take a pod now, after a scale-up, or not at all.

`place` chooses by tier first, then by its choice rule within the tier (placement.py):

1. free: the pool's nodes have slices free for the pod now, by the allocation the last sync read
   from the cluster's Kubernetes API (the catalog's k8s_nodes, slices_advertised,
   slices_allocated, allocation_at), or that `place --live` reads itself;
2. unknown: nothing says what is free: the catalog holds no allocation for the pool (its cluster's
   Kubernetes API was never asked) or the figures are stale (it did not answer at the last sync),
   and the pool may have nodes. Ranked after pools known to have room and before pools that must
   grow: a platform engineer would rather try a pool that may well have room (and whose pods then
   wait only as long as on a growing pool) than pay for a new node while one may be free; and a
   catalog synced without Kubernetes access places as it always did, by shape alone;
3. growable: no slice free for it, but the pool autoscales, is below its maximum size and its
   autoscaler can start a node for the pod: a pool with running nodes always can (the autoscaler
   builds its template from a running node), a pool at zero only where its row says
   `grows_from_zero` (the cloud's autoscaler knows the slices itself, or the pool carries the
   node-template hints);
4. full (no tier): none of those; `place` refuses it, naming why.

Free counts come from the pool's totals: a pod asking several units (whole GPUs, GiB of a memory
scheduler) may find them split over nodes or GPUs, so the count is at most what fits. Nodes now
are the larger of what Kubernetes counted and what the cloud reports (a node still starting
counts against the maximum). A pool autoscales where its row says so, else where its bounds
differ (pools.Scaling: equal bounds are a fixed size; the catalog keeps the bounds only).
Nothing here imports a database or SDK: rows are `catalog ls --json` rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TIERS = ("free", "unknown", "growable")  # in the order place prefers them
# What the free counts were read from: the last sync (known, stale, none: never), or `--live`.
ALLOCATION_STATES = ("known", "stale", "none", "live")


@dataclass(frozen=True)
class Standing:
    """What a pool has for pods whatever they ask, in its own unit (slices, or GiB)."""

    free_units: int | None  # free now; None: unknown
    nodes_now: int | None  # None: neither Kubernetes nor the cloud said
    nodes_left: int | None  # below the maximum, where the pool autoscales; None: nodes unknown
    growable: bool  # its autoscaler can add a node for the pool's slices now
    allocation: str  # known | stale | none (never read)
    blocked: str  # why it cannot grow, a phrase ("" where it can)

    def tier(self, units: int) -> str | None:
        """The tier of a pod asking `units` of the pool's unit; None: full."""
        if self.free_units is not None and self.free_units >= units:
            return "free"
        if self.free_units is None:
            return "unknown"
        return "growable" if self.growable else None


def allocation_state(row: Mapping[str, Any]) -> str:
    if row.get("allocation_at") is None:
        return "none"
    return "stale" if row.get("allocation_stale") else "known"


def autoscales(row: Mapping[str, Any]) -> bool:
    given = row.get("autoscaling")
    return bool(given) if given is not None else row["min_nodes"] < row["max_nodes"]


def standing(row: Mapping[str, Any]) -> Standing:
    """A catalog row's standing (module docstring)."""
    allocation = allocation_state(row)
    counted = [row.get("current_nodes")]
    if allocation == "known":
        counted.append(row.get("k8s_nodes"))
    known = [n for n in counted if n is not None]
    nodes_now = max(known) if known else None
    if allocation == "known":
        free: int | None = max(0, (row.get("slices_advertised") or 0) - (row.get("slices_allocated") or 0))
    else:
        free = 0 if nodes_now == 0 else None  # no node, nothing free
    if not autoscales(row):
        return Standing(free, nodes_now, 0, False, allocation, "it does not autoscale")
    if nodes_now is None:
        return Standing(free, None, None, False, allocation, "the catalog does not know its nodes now")
    left = max(0, row["max_nodes"] - nodes_now)
    if left == 0:
        at_most = f"it is at its maximum of {row['max_nodes']} nodes"
        return Standing(free, nodes_now, 0, False, allocation, at_most)
    if nodes_now == 0 and row.get("grows_from_zero") is not True:
        why = (
            "the catalog does not know whether its autoscaler can start it from zero nodes (sync again)"
            if row.get("grows_from_zero") is None
            else "at zero nodes its autoscaler cannot start a node for its slices (no autoscaler hints)"
        )
        return Standing(free, 0, left, False, allocation, why)
    return Standing(free, nodes_now, left, True, allocation, "")


def unknown_reason(state: str) -> str:
    """Why the free slices are unknown, for allocation state `state` (stale or none)."""
    if state == "stale":
        return "the allocation figures are stale (its Kubernetes API did not answer at the last sync)"
    return "the catalog holds no allocation for it (sync with its Kubernetes API reachable, or --live)"


def pool_capacity(row: Mapping[str, Any]) -> dict[str, Any]:
    """A pool's free and reachable slices in its own unit, for `catalog inspect` and the page:
    free now (None: unknown), and what growing to its maximum adds (None: its nodes unknown)."""
    found = standing(row)
    if found.nodes_left is None:
        grows = None  # its nodes now are unknown
    else:
        grows = found.nodes_left * row["slices_per_node"] if found.growable else 0
    return {
        "slices_free": found.free_units,
        "slices_growable": grows,
        "nodes_left": found.nodes_left,
        "grows_from_zero": row.get("grows_from_zero"),
    }
