"""A pool as JSON, spelled one way wherever it is printed or stored.

Three outputs show pools: `plan --json` (the compared fields, before and after), `pools --json`
(each pool the clusters hold, with what it offers) and `catalog ls --json` (the same, as the
catalog stored it). Each field is spelled here once, so they cannot drift apart: taints as
`key=value:Effect` strings, labels as a map, sharing in capacity's words, node counts as bounds.
"""

from __future__ import annotations

from typing import Any

from provisioner import hardware
from provisioner.autoscaler import starts_from_zero
from provisioner.capacity import Capacity, sharing_text
from provisioner.pools import POOL_FIELDS, NodeTemplate, PoolState, Scaling


def value_json(name: str, value: Any) -> Any:
    """A PoolState field as plain JSON, in the spelling plan output shows."""
    if isinstance(value, Scaling):
        return f"{value.min}-{value.max}" if value.autoscaling else value.min
    if name == "labels":
        return dict(value)
    if name == "taints":
        return [str(t) for t in value]
    if isinstance(value, NodeTemplate):
        return template_json(value)
    if name == "sharing" and value is not None:
        return sharing_text(value.strategy, value.clients_per_gpu)  # in the cloud's own words
    return value


def template_json(template: NodeTemplate) -> dict[str, Any]:
    """The autoscaler's hints: resources per node, and the labels and taints where they carry them."""
    shown: dict[str, Any] = {"resources": dict(template.resources)}
    if template.labels:
        shown["labels"] = dict(template.labels)
    if template.taints:
        shown["taints"] = [str(t) for t in template.taints]
    return shown


def state_json(state: PoolState) -> dict[str, Any]:
    """The fields a plan compares, and whose pool it is."""
    return {"name": state.name, "owned": state.owned} | {
        name: value_json(name, getattr(state, name)) for name in POOL_FIELDS
    }


def observed_json(state: PoolState, offers: Capacity, cloud: str) -> dict[str, Any]:
    """A pool as a cluster holds it, with what it offers (capacity()'s reading, whether the cloud
    keeps MIG and sharing in a pool field or a node label) and whether its autoscaler can start
    it from zero for its slices: `pools --json`, and the catalog's row, which keeps the keys it
    has columns for."""
    return {
        "pool": state.pool_name,  # the fleet's name, the same across a replacement's generations
        "cloud_name": state.name,
        "instance_type": state.instance_type,
        "gpu": offers.gpu_model,
        "gpus_per_node": offers.gpus_per_node,
        "mig_setting": state.mig_setting,
        "mig": offers.mig_profile,
        "sharing": offers.sharing,
        "replicas": offers.replicas,
        "slices_per_node": offers.slices_per_node,
        "memory_per_slice_gb": offers.memory_per_slice_gb,
        "isolation": offers.isolation,
        "slice_unit": offers.slice_unit,
        "allocation_mode": offers.allocation_mode,
        "cloud_id": state.cloud_id,
        "min_nodes": state.scaling.min,
        "max_nodes": state.scaling.max,
        "autoscaling": state.scaling.autoscaling,
        "current_nodes": state.nodes,
        "spot": state.spot,
        "disk_size_gb": state.disk_size_gb,
        "labels": value_json("labels", state.labels),
        "taints": value_json("taints", state.taints),
        "owned": state.owned,
        "autoscaler_hints": template_json(state.autoscaler_hints) if state.autoscaler_hints else None,
        "grows_from_zero": starts_from_zero(hardware.load().clouds[cloud], state, offers),
    }
