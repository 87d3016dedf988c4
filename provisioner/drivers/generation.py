"""What a driver writes on a pool of a create-first replacement (provisioner/generations.py) and
reads back: which fleet pool and generation a cloud pool is (the markers of pools.py), and how
many nodes a new generation starts with.

A first generation carries no markers, so the pools made before replacements existed read back
as they always did. A marker that is not what the tool writes reads as sanely as it can: a
generation that is no whole number of 1 or more reads as 1, its fleet name kept (the pool still
belongs to that fleet pool, and its generation 1 sorts it with the oldest, to be drained
first); without a fleet name there is no generation (None, 1), whatever the other marker says.
"""

from __future__ import annotations

from provisioner.pools import FLEET_POOL_TAG_KEY, GENERATION_TAG_KEY, PoolState

FIRST = 1


def generation_tags(desired: PoolState) -> dict[str, str]:
    """The cloud tags (AKS tags, GKE resource labels, EKS node-group tags) naming `desired`'s fleet
    pool and generation; none for a first generation."""
    if desired.generation <= FIRST:
        return {}
    return {FLEET_POOL_TAG_KEY: desired.pool_name, GENERATION_TAG_KEY: str(desired.generation)}


def read_generation(fleet_name: str | None, generation: str | None) -> tuple[str | None, int]:
    """(PoolState.fleet_name, PoolState.generation) from the markers' values as the cloud holds them."""
    if not fleet_name:
        return None, FIRST
    text = (generation or "").strip()
    number = int(text) if text.isdecimal() and text.isascii() else FIRST
    return fleet_name, max(number, FIRST)


def read_generation_tags(tags: dict[str, str]) -> tuple[str | None, int]:
    return read_generation(tags.get(FLEET_POOL_TAG_KEY), tags.get(GENERATION_TAG_KEY))


def starting_nodes(desired: PoolState) -> int:
    """The nodes a new pool starts with, the whole pool's: its minimum, or where apply hands it the
    node count of the generation it replaces (`desired.nodes`), that count within its bounds, so
    the new generation has the old one's capacity before the old is drained. A fixed size is
    the fixed size."""
    scaling = desired.scaling
    if desired.nodes is None:
        return scaling.min
    return min(max(desired.nodes, scaling.min), scaling.max)
