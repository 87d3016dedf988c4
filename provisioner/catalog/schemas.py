"""JSON Schemas of what `catalog serve` answers, for its OpenAPI document: a pool row's read from
the catalog's table (its columns' types and whether they may be empty), the other rows' from the
code that builds them. Exact: every key required, no other key, null only where it may be."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, String, Text

from provisioner.actions import ACTIONS
from provisioner.capacity import ISOLATION_LEVELS
from provisioner.catalog.models import ClusterRow, PoolRow
from provisioner.tiers import ALLOCATION_STATES, TIERS

MOMENT = {"type": "string", "format": "date-time"}
CLUSTER_STATUSES = ("ok", "error", "new")
SLICE_UNITS = ("slice", "GiB")
SHARINGS = ("exclusive", "time-slicing", "mps", "memory")
ALLOCATION_MODES = ("device-plugin", "dra")  # fleet.py's gpu.allocation
DRIFT_KINDS = (*dict.fromkeys(a.drift for a in ACTIONS), "conflict")
_TYPES = ((Boolean, "boolean"), (Integer, "integer"), (Float, "number"), (String, "string"), (Text, "string"))
# Columns whose values are one of a few words, or a JSON document of a known shape.
_SHAPES: dict[str, dict[str, Any]] = {
    "sharing": {"enum": list(SHARINGS)},
    "isolation": {"enum": list(ISOLATION_LEVELS)},
    "slice_unit": {"enum": list(SLICE_UNITS)},
    "allocation_mode": {"enum": list(ALLOCATION_MODES)},
    "status": {"enum": list(CLUSTER_STATUSES)},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "taints": {"type": "array", "items": {"type": "string"}},  # key=value:Effect
    # pooljson.template_json: the resources a new node will advertise, and its labels and taints
    # where the cloud's autoscaler reads them from hints.
    "autoscaler_hints": {
        "type": "object",
        "properties": {
            "resources": {"type": "object", "additionalProperties": {"type": "integer"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "taints": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["resources"],
        "additionalProperties": False,
    },
}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _column(column: Any) -> dict[str, Any]:
    if column.name in _SHAPES:
        schema = _SHAPES[column.name]
    elif isinstance(column.type, DateTime):
        schema = MOMENT
    elif isinstance(column.type, JSON):
        schema = {}
    else:
        schema = next({"type": name} for kind, name in _TYPES if isinstance(column.type, kind))
    return _nullable(schema) if column.nullable else schema


def _exact(properties: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def pool() -> dict[str, Any]:
    """A live pool as `catalog ls --json` prints it (statements.pool_dict)."""
    from provisioner.catalog.statements import ALLOCATION_COLUMNS, COLUMN_OF, LISTED_KEYS

    pools, clusters = PoolRow.__table__.columns, ClusterRow.__table__.columns
    listed = {key: _column(pools[COLUMN_OF.get(key, key)]) for key in LISTED_KEYS}
    return _exact(
        {
            "cluster": {"type": "string"},
            "cloud": {"type": "string"},
            **listed,
            "first_seen": MOMENT,
            "last_seen": MOMENT,  # its cluster's last listing
            "deleted_at": {"type": "null"},  # live
            "adopted_at": _column(pools["adopted_at"]),
            "cluster_status": _column(clusters["status"]),
            **{key: _column(pools[key]) for key in ALLOCATION_COLUMNS},
        }
    )


def cluster() -> dict[str, Any]:
    """A cluster as Store.clusters() gives it."""
    columns = ClusterRow.__table__.columns
    keys = ("cloud", "account", "location", "in_fleet", "status", "last_error", "last_sync_at", "observed_at")
    return _exact({"cluster": {"type": "string"}, **{key: _column(columns[key]) for key in keys}})


def capacity() -> dict[str, Any]:
    """A GPU pool's row of `catalog inspect --json` (views.capacity_rows)."""
    count, maybe = {"type": "integer"}, _nullable({"type": "integer"})
    return _exact(
        {
            "cluster": {"type": "string"},
            "pool": {"type": "string"},
            "gpu": {"type": "string"},
            "slice": {"type": "string"},
            "slice_unit": {"enum": list(SLICE_UNITS)},
            "isolation": {"enum": list(ISOLATION_LEVELS)},
            "memory_per_slice_gb": _nullable({"type": "number"}),
            "slices_per_node": count,
            "gpus_now": maybe,
            "slices_now": maybe,
            "gpus_max": count,
            "slices_max": count,
            "slices_advertised": maybe,
            "slices_allocated": maybe,
            "allocation_stale": {"type": "boolean"},
            "slices_free": maybe,  # now, by the last sync's allocation (tiers.py)
            "slices_growable": maybe,  # what growing to its maximum adds
            "nodes_left": maybe,
            "grows_from_zero": _nullable({"type": "boolean"}),
        }
    )


def drift() -> dict[str, Any]:
    """A drifted pool as Store.drift() gives it: for a change, each field the fleet's and the
    cloud's; for a conflict, its message."""
    changed = _exact({"field": {"type": "string"}, "fleet": {}, "cloud": {}})
    conflict = _exact({"message": {"type": "string"}})
    return _exact(
        {
            "cluster": {"type": "string"},
            "pool": {"type": "string"},
            "kind": {"enum": list(DRIFT_KINDS)},
            "fields": {"type": "array", "items": {"anyOf": [changed, conflict]}},
            "detected_at": MOMENT,
        }
    )


def placement() -> dict[str, Any]:
    """`place --json` (placement.Placement.json): the pod-spec fields by their Kubernetes names;
    beyond those named, what a cloud's pods need there (e.g. hostIPC for GKE's MPS). On a DRA pool
    also: the container's resources.claims (limits empty), the pod's resourceClaims, the claim
    object to apply first (a ResourceClaimTemplate, or a shared ResourceClaim) and notes."""
    strings = {"type": "object", "additionalProperties": {"type": "string"}}
    maybe = _nullable({"type": "integer"})
    claims = {"type": "array", "items": _exact({"name": {"type": "string"}})}
    limits = {"type": "object", "additionalProperties": {"type": "integer"}}
    named = {
        "cluster": {"type": "string"},
        "cloud": {"type": "string"},
        "pool": {"type": "string"},
        "isolation": {"enum": list(ISOLATION_LEVELS)},
        "slice": _exact({"memory_gb": {"type": "number"}, "unit": {"enum": list(SLICE_UNITS)}}),
        "resources": {
            "type": "object",
            "properties": {"limits": limits, "claims": claims},
            "required": ["limits"],
            "additionalProperties": False,
        },
        "nodeSelector": strings,
        "tolerations": {"type": "array", "items": strings},
        "capacity": _exact(
            {
                "tier": {"enum": list(TIERS)},
                "free": maybe,
                "growable": maybe,
                "nodes_left": maybe,
                "at_max": {"type": "integer"},
                "allocation": {"enum": list(ALLOCATION_STATES)},
                "allocation_at": _nullable(MOMENT),
            }
        ),
    }
    pod_claim = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "resourceClaimTemplateName": {"type": "string"},
            "resourceClaimName": {"type": "string"},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    dra = {
        "allocation_mode": {"const": "dra"},
        "resourceClaims": {"type": "array", "items": pod_claim},
        "claim": {
            "type": "object",
            "properties": {
                "apiVersion": {"const": "resource.k8s.io/v1"},
                "kind": {"enum": ["ResourceClaimTemplate", "ResourceClaim"]},
            },
            "required": ["apiVersion", "kind", "metadata", "spec"],
        },
        "notes": {"type": "array", "items": {"type": "string"}},
    }
    return {"type": "object", "properties": named | dra, "required": list(named)}


def healthy() -> dict[str, Any]:
    return _exact({"status": {"const": "ok"}, "catalog": {"type": "string"}})
