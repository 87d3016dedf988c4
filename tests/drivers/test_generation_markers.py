"""The generation markers' values as drivers write and read them, and a new generation's first
nodes (provisioner/drivers/generation.py); over the wire in the driver contract."""

from __future__ import annotations

import dataclasses

import pytest

from provisioner.drivers.generation import generation_tags, read_generation, starting_nodes
from provisioner.pools import FLEET_POOL_TAG_KEY, GENERATION_TAG_KEY, PoolState, Scaling

POOL = PoolState(
    name="a100g2",
    instance_type="Standard_NC24ads_A100_v4",
    gpus_per_node=1,
    mig_setting=None,
    sharing=None,
    spot=False,
    disk_size_gb=None,
    scaling=Scaling(1, 4, autoscaling=True),
    labels=(),
    taints=(),
    fleet_name="a100",
    generation=2,
)


def test_a_first_generation_carries_no_markers_and_a_later_one_both() -> None:
    assert generation_tags(dataclasses.replace(POOL, name="a100", fleet_name=None, generation=1)) == {}
    assert generation_tags(POOL) == {FLEET_POOL_TAG_KEY: "a100", GENERATION_TAG_KEY: "2"}


@pytest.mark.parametrize(
    ("fleet", "generation", "read"),
    [
        ("a100", "2", ("a100", 2)),
        ("a100", "12", ("a100", 12)),
        (None, None, (None, 1)),  # a first generation, or a pool the tool did not make
        (None, "2", (None, 1)),  # no fleet pool named: no generation of one
        ("", "2", (None, 1)),
        ("a100", None, ("a100", 1)),  # still that fleet pool's, sorted with its oldest
        ("a100", "two", ("a100", 1)),
        ("a100", "0", ("a100", 1)),
        ("a100", "-3", ("a100", 1)),
        ("a100", "٣", ("a100", 1)),  # a digit Python's int() takes and no cloud tool writes
    ],
)
def test_markers_read_back_as_the_rule_says(
    fleet: str | None, generation: str | None, read: tuple[str | None, int]
) -> None:
    assert read_generation(fleet, generation) == read


@pytest.mark.parametrize(
    ("scaling", "nodes", "start"),
    [
        (Scaling(1, 4, autoscaling=True), None, 1),  # no generation replaced: the minimum
        (Scaling(1, 4, autoscaling=True), 3, 3),
        (Scaling(1, 4, autoscaling=True), 0, 1),
        (Scaling(1, 4, autoscaling=True), 9, 4),
        (Scaling.fixed(2), 5, 2),  # a fixed size is the size
    ],
)
def test_a_new_generation_starts_with_the_old_ones_nodes_within_its_bounds(
    scaling: Scaling, nodes: int | None, start: int
) -> None:
    assert starting_nodes(dataclasses.replace(POOL, scaling=scaling, nodes=nodes)) == start
