"""What a pool's cluster autoscaler must be told to start it from zero nodes, and how each cloud's
tags spell it.

At zero nodes the autoscaler builds the pool's node from a template that holds the instance
type's physical `nvidia.com/gpu` count (kubernetes/autoscaler#5278, #8095): a pod that asks for
`nvidia.com/gpu.shared`, seven MIG slices' worth or GiB of `aliyun.com/gpu-mem` fits no such node
and never starts one. `node_template` says what the node will advertise instead; `hint_tags`
and `read_hint_tags` write and read it in the tag form the cloud's autoscaler reads
(clouds.yaml `autoscaler.hints`), so drivers only carry the tags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from provisioner.hardware import AutoscalerHints, CloudProfile
from provisioner.nvidia import GPU_RESOURCE
from provisioner.pools import NodeTemplate, PoolState, Taint

# Where a GPU stack shares GPUs under another name, no GPU is left to advertise as a whole one.
NO_WHOLE_GPUS = 0
# A compute share is requested in percent of a GPU (clouds.yaml placement.computeShare).
PERCENT_PER_GPU = 100
EFFECT_STRENGTH = ("PreferNoSchedule", "NoSchedule", "NoExecute")  # weakest first
MAX_RESOURCE_HINTS = 3  # the slice resource, nvidia.com/gpu, and a compute share


class Offers(Protocol):
    """What one node of a pool advertises: the compiler's NodeSetup for a pool the fleet asks for,
    capacity()'s Capacity for one a cloud holds (the same names, so either serves)."""

    @property
    def resource(self) -> str: ...
    @property
    def slices_per_node(self) -> int: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def slice_unit(self) -> str: ...
    @property
    def isolation(self) -> str: ...


def node_template(cloud: CloudProfile, state: PoolState, offers: Offers) -> NodeTemplate | None:
    """The template a pool's autoscaler needs, or None where it needs none: the pool does not
    autoscale, its cloud's autoscaler knows the pool's sharing itself, it has no GPU slices, or
    its nodes advertise exactly the whole GPUs the instance type has."""
    hints = cloud.autoscaler_hints
    if hints is None or not state.scaling.autoscaling or not offers.slices_per_node:
        return None
    resources = {offers.resource: offers.slices_per_node}
    if offers.resource != GPU_RESOURCE:
        resources[GPU_RESOURCE] = NO_WHOLE_GPUS
    share = cloud.placement.compute_share_resource if cloud.placement else None
    if share and offers.slice_unit == "GiB" and offers.isolation == cloud.placement.compute_share_isolation:
        resources[share] = PERCENT_PER_GPU * offers.gpus_per_node
    if resources == {GPU_RESOURCE: offers.gpus_per_node}:
        return None  # what the autoscaler reads from the instance type already
    # The node starts with what the cloud adds to a Spot pool too (clouds.yaml spotAdds).
    labels = {**state.label_map, **(cloud.spot_labels if state.spot else {})}
    taints = (*state.taints, *(cloud.spot_taints if state.spot else ()))
    return NodeTemplate(
        tuple(resources.items()),
        tuple(labels.items()) if hints.label else (),
        _one_per_key(taints) if hints.taint else (),
    )


def most_hint_tags(cloud: CloudProfile, labels: int, taints: int) -> int:
    """The most tags a pool with `labels` and `taints` can take for its hints: its slice resource,
    nvidia.com/gpu and a compute share, then a label or taint each, a Spot pool's adds included."""
    hints = cloud.autoscaler_hints
    if hints is None:
        return 0
    spot = len(cloud.spot_labels) * bool(hints.label) + len(cloud.spot_taints) * bool(hints.taint)
    return MAX_RESOURCE_HINTS + labels * bool(hints.label) + taints * bool(hints.taint) + spot


def _one_per_key(taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
    """A tag holds one taint per key: where a pool has a key twice, the strongest effect (the one
    that keeps the most pods off) stands for it, so the tags read back as they were written."""
    strongest: dict[str, Taint] = {}
    for taint in sorted(taints, key=lambda t: EFFECT_STRENGTH.index(t.effect)):
        strongest[taint.key] = taint
    return tuple(strongest.values())


def starts_from_zero(cloud: CloudProfile, state: PoolState, offers: Offers) -> bool:
    """Whether the pool's autoscaler can start its first node for the pool's slices: it autoscales,
    and its cloud's autoscaler knows the slices itself, or the pool's hints say at least them.
    (Once a node runs, autoscalers build the template from a running node instead.)"""
    if not state.scaling.autoscaling:
        return False
    if cloud.autoscaler_knows_sharing:
        return True
    needed = node_template(cloud, state, offers)
    if needed is None:  # the instance type's GPUs are the slices; or the tool knows no hints there
        return cloud.autoscaler_hints is not None
    held = dict(state.autoscaler_hints.resources) if state.autoscaler_hints else {}
    return all(held.get(name) == count for name, count in needed.resources)


def _key(pattern: str, name: str, hints: AutoscalerHints, *, resource: bool) -> str:
    # Azure: `_` stands for `/`, and in label and taint keys `~2` for `_` (azure_template.go).
    if not resource:
        name = name.replace("_", hints.underscore)
    return pattern.replace("{name}", name.replace("/", hints.slash))


def hint_tags(hints: AutoscalerHints | None, template: NodeTemplate | None) -> dict[str, str]:
    """The tags that spell `template` for the cloud's autoscaler (none for None)."""
    if hints is None or template is None:
        return {}
    tags = {
        _key(hints.resource, name, hints, resource=True): str(count) for name, count in template.resources
    }
    if hints.label:
        tags |= {_key(hints.label, key, hints, resource=False): value for key, value in template.labels}
    if hints.taint:
        tags |= {
            _key(hints.taint, t.key, hints, resource=False): f"{t.value}:{t.effect}" for t in template.taints
        }
    return tags


def read_hint_tags(
    hints: AutoscalerHints | None, tags: Mapping[str, str]
) -> tuple[NodeTemplate | None, dict[str, str]]:
    """The template a cloud resource's tags spell, and its other tags. Tags the autoscaler would
    not read (a count that is no integer, a taint without its effect) are left with the others."""
    if hints is None:
        return None, dict(tags)
    resources: dict[str, int] = {}
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    others: dict[str, str] = {}
    for key, value in tags.items():
        if (name := _name(hints.resource, key, hints, resource=True)) is not None and value.isdigit():
            resources[name] = int(value)
        elif hints.label and (name := _name(hints.label, key, hints, resource=False)) is not None:
            labels[name] = value
        elif (
            hints.taint
            and (name := _name(hints.taint, key, hints, resource=False)) is not None
            and (taint := _taint(name, value))
        ):
            taints.append(taint)
        else:
            others[key] = value
    if not (resources or labels or taints):
        return None, others
    return NodeTemplate(tuple(resources.items()), tuple(labels.items()), tuple(taints)), others


def _name(pattern: str, key: str, hints: AutoscalerHints, *, resource: bool) -> str | None:
    prefix, _, suffix = pattern.partition("{name}")
    if not (key.startswith(prefix) and key.endswith(suffix)) or len(key) <= len(prefix) + len(suffix):
        return None
    name = key[len(prefix) : len(key) - len(suffix)].replace(hints.slash, "/")
    return name if resource else name.replace(hints.underscore, "_")


def _taint(key: str, value: str) -> Taint | None:
    taint_value, colon, effect = value.rpartition(":")
    if not colon or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        return None
    return Taint(key, taint_value, effect)  # type: ignore[arg-type]


def autoscaler_note(cloud: CloudProfile, template: NodeTemplate | None) -> str | None:
    """What plan says of a pool the cloud's autoscaler still handles badly, with its source: a
    pool whose hints say its slices are renamed (no whole nvidia.com/gpu), where the autoscaler
    checks nvidia.com/gpu alone."""
    note = cloud.autoscaler_renamed_gpu_note
    if note is None or template is None:
        return None
    return note if dict(template.resources).get(GPU_RESOURCE) == NO_WHOLE_GPUS else None
