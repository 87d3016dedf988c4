"""A fleet pool's generations: the cloud pools that carry it, one at a time but for the length of a
create-first replacement, when the new generation runs beside the old until the old is drained.

The clouds keep pool names unique and none renames a pool but ACK (FACTS.md, "Node-pool name
rules"), so generation n > 1 has a cloud name of its own: the fleet name, cut to leave room, then
the cloud's suffix (clouds.yaml `poolName.generation`), e.g. `gpua100g2` on AKS, `gpu-a100-g2`
elsewhere. The cloud also holds which fleet pool and generation it is (pools.FLEET_POOL_TAG_KEY),
so a replacement interrupted at any step is found again by listing the cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from provisioner.hardware import CloudProfile
from provisioner.pools import PoolState


@dataclass(frozen=True)
class Generations:
    """The cloud pools of one fleet pool, oldest first: `current` the newest, `older` those a
    replacement has still to drain and delete."""

    pools: tuple[PoolState, ...]

    @property
    def current(self) -> PoolState:
        return self.pools[-1]

    @property
    def older(self) -> tuple[PoolState, ...]:
        return self.pools[:-1]

    @property
    def name(self) -> str:
        return self.current.pool_name


def group(pools: Iterable[PoolState]) -> dict[str, Generations]:
    """The cluster's pools by fleet name, each fleet pool's generations oldest first."""
    found: dict[str, list[PoolState]] = {}
    for pool in pools:
        found.setdefault(pool.pool_name, []).append(pool)
    return {
        name: Generations(tuple(sorted(of, key=lambda p: (p.generation, p.name))))
        for name, of in found.items()
    }


def cloud_name(fleet_name: str, generation: int, cloud: CloudProfile) -> str:
    """The cloud-side name of `fleet_name`'s `generation`: the fleet name itself for the first."""
    if generation <= 1:
        return fleet_name
    suffix = cloud.generation_suffix.format(n=generation)
    base = fleet_name[: cloud.pool_name_max - len(suffix)].rstrip("-_")
    return base + suffix


def next_generation(generations: Generations, cloud: CloudProfile, taken: Collection[str]) -> tuple[int, str]:
    """The generation after `generations`' newest and its cloud name, skipping a name another pool
    of the cluster or the fleet holds (`taken`): a cut name can meet another pool's."""
    generation = max(p.generation for p in generations.pools) + 1
    while (name := cloud_name(generations.name, generation, cloud)) in taken:
        generation += 1
    return generation, name


def names_in_use(observed: Sequence[PoolState], fleet: Mapping[str, object]) -> frozenset[str]:
    """Every cloud name the cluster's pools hold, and every fleet name: none may be a new generation's."""
    return frozenset({p.name for p in observed} | set(fleet))
