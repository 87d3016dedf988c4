"""`sync --shard I/N`: which shard each cluster goes to, by quota scope.

All clusters of one quota scope (quotas.quota_scope: ARM's subscription, GKE's project, EKS's and
ACK's account and region) go to one shard, so no two shards draw on one bucket. Scopes are dealt
largest first (then by name) each to the shard holding the fewest clusters so far: every shard
computes the same dealing from the same fleet file, without asking the others.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from provisioner.clusters import ClusterRef
from provisioner.quotas import quota_scope

Scope = tuple[str, ...]


def parse_shard(text: str) -> tuple[int, int]:
    """'I/N' as (I, N), I from 0; ValueError saying what is wanted where it is not that."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 0 <= int(index) < int(count)):
        raise ValueError(f"{text!r}: want i/n with 0 <= i < n, e.g. 0/4")
    return int(index), int(count)


def deal(sizes: Mapping[Scope, int], count: int) -> dict[Scope, int]:
    """Each scope's shard (0 to count-1): largest scope first, ties by the scope itself, each to
    the shard with the fewest clusters so far (ties: the lowest index)."""
    loads = [(0, index) for index in range(count)]  # a heap of (clusters dealt, shard)
    dealt: dict[Scope, int] = {}
    for scope in sorted(sizes, key=lambda s: (-sizes[s], s)):
        load, index = heapq.heappop(loads)
        dealt[scope] = index
        heapq.heappush(loads, (load + sizes[scope], index))
    return dealt


@dataclass(frozen=True)
class Sharding:
    """Shard `index` of `count`, and the shard of each quota scope the fleet names."""

    index: int
    count: int
    owners: Mapping[Scope, int]

    @classmethod
    def of_fleet(cls, refs: Iterable[ClusterRef], shard: tuple[int, int] | None) -> Sharding:
        """The dealing of the fleet's clusters `refs`; shard None: one shard, which owns them all."""
        index, count = shard or (0, 1)
        return cls(index, count, deal(Counter(quota_scope(ref) for ref in refs), count))

    def owns(self, ref: ClusterRef) -> bool:
        """Whether this shard syncs the fleet's cluster `ref` (or lists `ref`'s scope to discover)."""
        return self.owners.get(quota_scope(ref)) == self.index

    def keeps_found(self, ref: ClusterRef) -> bool:
        """Whether this shard catalogs `ref`, a cluster its own discovery listings found. One in a
        scope the fleet names goes with that scope. One in a scope the fleet does not name (a
        listing reaches only its own scope in every driver today: an AKS subscription, a GKE
        project, an EKS or ACK region) stays with the shard that listed it: no other made that
        listing, and each shard lists only the scopes it owns (catalog.sync.discover)."""
        owner = self.owners.get(quota_scope(ref))
        return owner is None or owner == self.index
