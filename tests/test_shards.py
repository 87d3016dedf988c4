"""sync --shard I/N's dealing: whole quota scopes, balanced by cluster count, the same in every shard."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from provisioner.clusters import ClusterRef
from provisioner.quotas import quota_scope
from provisioner.shards import Sharding, deal, parse_shard


def fleet_refs() -> list[ClusterRef]:
    """Uneven scopes on all four clouds: AKS subscriptions with several resource groups, GKE
    projects with several locations, EKS and ACK regions."""
    refs = []
    for project, size in (("big", 9), ("mid", 5), ("small", 2), ("one", 1)):
        refs += [
            ClusterRef("gke", project, ("us-central1", "europe-west4")[i % 2], f"g{i}") for i in range(size)
        ]
    for subscription, size in (("s-1", 6), ("s-2", 3)):
        refs += [ClusterRef("aks", subscription, f"rg-{i % 3}", f"a{i}") for i in range(size)]
    for region, size in (("us-west-2", 4), ("eu-west-1", 2)):
        refs += [ClusterRef("eks", "", region, f"e{i}") for i in range(size)]
    refs += [ClusterRef("ack", "", "cn-hangzhou", f"k{i}") for i in range(3)]
    return refs


def shard_members(refs: list[ClusterRef], count: int) -> list[list[ClusterRef]]:
    shardings = [Sharding.of_fleet(refs, (index, count)) for index in range(count)]
    return [[r for r in refs if s.owns(r)] for s in shardings]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_every_cluster_is_in_exactly_one_shard_with_its_whole_scope(count: int):
    refs = fleet_refs()
    members = shard_members(refs, count)
    assert sorted(r.key for shard in members for r in shard) == sorted(r.key for r in refs)
    holders = {quota_scope(r): {i for i, shard in enumerate(members) if r in shard} for r in refs}
    assert all(len(held) == 1 for held in holders.values()), holders
    # Two resource groups of one subscription, two locations of one project: one scope each.
    assert quota_scope(ClusterRef("aks", "s-1", "rg-0", "x")) == quota_scope(
        ClusterRef("aks", "s-1", "rg-2", "y")
    )
    assert quota_scope(ClusterRef("gke", "big", "us-central1", "x")) == quota_scope(
        ClusterRef("gke", "big", "europe-west4", "y")
    )


def test_four_shards_are_balanced_as_whole_scopes_allow():
    refs = fleet_refs()
    loads = sorted(len(shard) for shard in shard_members(refs, 4))
    # Scopes of 9, 6, 5, 4, 3, 3, 2, 2, 1: largest first, each to the lightest shard.
    assert loads == [8, 9, 9, 9]
    largest = max(Counter(quota_scope(r) for r in refs).values())
    assert loads[-1] - loads[0] <= largest


def test_every_shard_deals_alike_whatever_order_the_fleet_lists_its_clusters_in():
    refs = fleet_refs()
    shuffled = refs[:]
    random.Random(7).shuffle(shuffled)
    assert Sharding.of_fleet(refs, (1, 4)).owners == Sharding.of_fleet(shuffled, (2, 4)).owners


def test_deal_breaks_ties_by_scope_and_then_by_the_lowest_shard():
    sizes = {("gke", "b"): 2, ("gke", "a"): 2, ("gke", "c"): 1}
    assert deal(sizes, 2) == {("gke", "a"): 0, ("gke", "b"): 1, ("gke", "c"): 0}
    assert deal(sizes, 5) == {("gke", "a"): 0, ("gke", "b"): 1, ("gke", "c"): 2}  # shards 3, 4 empty


def test_a_found_cluster_goes_with_its_scope_or_stays_with_the_shard_that_listed_it():
    refs = fleet_refs()
    shardings = [Sharding.of_fleet(refs, (index, 4)) for index in range(4)]
    in_a_named_scope = ClusterRef("gke", "mid", "asia-east1", "shadow")
    assert [s.keeps_found(in_a_named_scope) for s in shardings].count(True) == 1
    assert next(s for s in shardings if s.keeps_found(in_a_named_scope)).owns(refs[9])  # mid's first
    beyond = ClusterRef("gke", "nobody-named", "us-central1", "shadow")  # only its lister sees it
    assert all(s.keeps_found(beyond) for s in shardings)
    assert not any(s.owns(beyond) for s in shardings)


def test_unsharded_owns_every_cluster():
    refs = fleet_refs()
    assert all(Sharding.of_fleet(refs, None).owns(r) for r in refs)


@pytest.mark.parametrize("text", ["4/4", "-1/4", "1", "a/b", "1/0", " 1/4", ""])
def test_a_bad_shard_says_what_is_wanted(text: str):
    with pytest.raises(ValueError, match=r"want i/n with 0 <= i < n, e.g. 0/4"):
        parse_shard(text)
    assert parse_shard("3/4") == (3, 4)
