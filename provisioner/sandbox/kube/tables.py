"""Lists and objects as the `Table` kubectl asks for (Accept: application/json;as=Table;
g=meta.k8s.io;v=v1): the columns the API server's printers give each kind (kubernetes
pkg/printers/internalversion printers.go: nodes NAME STATUS ROLES AGE VERSION, pods NAME READY
STATUS RESTARTS AGE (Terminating while deleted), configmaps NAME DATA AGE, deployments NAME READY
UP-TO-DATE AVAILABLE AGE, replicasets NAME DESIRED CURRENT READY AGE, poddisruptionbudgets NAME
MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE, events LAST SEEN TYPE REASON OBJECT MESSAGE;
deviceclasses and resourceclaimtemplates NAME AGE, resourceclaims NAME STATE AGE with STATE from
resourceClaimState, resourceslices NAME NODE DRIVER POOL AGE), each
row with its object's metadata (PartialObjectMetadata), so that kubectl's own columns (-L label)
read from it. Kinds without printers here answer their plain lists."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

ROLE_PREFIX = "node-role.kubernetes.io/"


def wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def _age(item: dict[str, Any]) -> str:
    """Age as kubectl's printers write it (duration.HumanDuration, coarsely)."""
    created = item.get("metadata", {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    moment = datetime.datetime.fromisoformat(created.replace("Z", "+00:00"))
    seconds = max(0, int((datetime.datetime.now(datetime.UTC) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _node(item: dict[str, Any]) -> list[Any]:
    ready = next((c for c in item.get("status", {}).get("conditions", []) if c.get("type") == "Ready"), {})
    status = "Ready" if ready.get("status") == "True" else "NotReady"
    if item.get("spec", {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    labels = item.get("metadata", {}).get("labels", {})
    roles = ",".join(sorted(k.removeprefix(ROLE_PREFIX) for k in labels if k.startswith(ROLE_PREFIX)))
    version = item.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")
    return [item["metadata"]["name"], status, roles or "<none>", _age(item), version]


def _pod(item: dict[str, Any]) -> list[Any]:
    containers = item.get("spec", {}).get("containers", [])
    statuses = item.get("status", {}).get("containerStatuses", [])
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(s.get("restartCount", 0) for s in statuses)
    phase = item.get("status", {}).get("phase", "Pending")
    if item["metadata"].get("deletionTimestamp"):
        phase = "Terminating"  # printPod: a pod being deleted reads Terminating
    return [item["metadata"]["name"], f"{ready}/{len(containers)}", phase, restarts, _age(item)]


def _deployment(item: dict[str, Any]) -> list[Any]:
    """printDeployment: READY ready/desired, UP-TO-DATE, AVAILABLE."""
    status = item.get("status") or {}
    wanted = (item.get("spec") or {}).get("replicas", 0)
    ready = f"{status.get('readyReplicas', 0)}/{wanted}"
    updated, available = status.get("updatedReplicas", 0), status.get("availableReplicas", 0)
    return [item["metadata"]["name"], ready, str(updated), str(available), _age(item)]


def _replica_set(item: dict[str, Any]) -> list[Any]:
    """printReplicaSet: DESIRED spec.replicas, CURRENT status.replicas, READY."""
    status = item.get("status") or {}
    wanted = (item.get("spec") or {}).get("replicas", 0)
    return [
        item["metadata"]["name"],
        wanted,
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        _age(item),
    ]


def _budget(item: dict[str, Any]) -> list[Any]:
    """printPodDisruptionBudget: N/A for the bound not set."""
    spec, status = item.get("spec") or {}, item.get("status") or {}
    bounds = [str(spec[k]) if spec.get(k) is not None else "N/A" for k in ("minAvailable", "maxUnavailable")]
    return [item["metadata"]["name"], *bounds, status.get("disruptionsAllowed", 0), _age(item)]


def _config_map(item: dict[str, Any]) -> list[Any]:
    data = len(item.get("data", {})) + len(item.get("binaryData", {}))
    return [item["metadata"]["name"], data, _age(item)]


def _event(item: dict[str, Any]) -> list[Any]:
    """kubectl get events: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE (printEvent, without NAME)."""
    involved = item.get("involvedObject", {})
    seen = {"metadata": {"creationTimestamp": item.get("lastTimestamp")}}
    obj = f"{involved.get('kind', '').lower()}/{involved.get('name', '')}"
    return [_age(seen), item.get("type", ""), item.get("reason", ""), obj, item.get("message", "")]


def _claim_state(item: dict[str, Any]) -> str:
    """resourceClaimState: deleted, then pending or allocated (and reserved), joined with ","."""
    states = ["deleted"] if item.get("metadata", {}).get("deletionTimestamp") else []
    status = item.get("status") or {}
    if not status.get("allocation"):
        if not states:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _resource_slice(item: dict[str, Any]) -> list[Any]:
    spec = item.get("spec") or {}
    pool = (spec.get("pool") or {}).get("name", "")
    return [item["metadata"]["name"], spec.get("nodeName", ""), spec.get("driver", ""), pool, _age(item)]


def _columns(*names: str) -> list[dict[str, Any]]:
    """Column definitions: a name column, then the others; the counts are integers."""
    kinds = dict.fromkeys(("Restarts", "Data", "Desired", "Current", "Allowed Disruptions"), "integer")
    return [{"name": "Name", "type": "string", "format": "name", "priority": 0}] + [
        {"name": name, "type": kinds.get(name, "string"), "format": "", "priority": 0} for name in names
    ]


COLUMNS: dict[str, tuple[list[dict[str, Any]], Callable[[dict[str, Any]], list[Any]]]] = {
    "Node": (_columns("Status", "Roles", "Age", "Version"), _node),
    "Pod": (_columns("Ready", "Status", "Restarts", "Age"), _pod),
    "ConfigMap": (_columns("Data", "Age"), _config_map),
    "Deployment": (_columns("Ready", "Up-to-date", "Available", "Age"), _deployment),
    "ReplicaSet": (_columns("Desired", "Current", "Ready", "Age"), _replica_set),
    "PodDisruptionBudget": (
        _columns("Min Available", "Max Unavailable", "Allowed Disruptions", "Age"),
        _budget,
    ),
    "DeviceClass": (_columns("Age"), lambda item: [item["metadata"]["name"], _age(item)]),
    "ResourceClaimTemplate": (_columns("Age"), lambda item: [item["metadata"]["name"], _age(item)]),
    "ResourceClaim": (
        _columns("State", "Age"),
        lambda item: [item["metadata"]["name"], _claim_state(item), _age(item)],
    ),
    "ResourceSlice": (_columns("Node", "Driver", "Pool", "Age"), _resource_slice),
    "Event": (
        [
            {"name": name, "type": "string", "format": "", "priority": 0}
            for name in ("Last Seen", "Type", "Reason", "Object", "Message")
        ],
        _event,
    ),
}


def table(kind: str, version: str, items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Table of `items` of `kind`; None where this API has no printer for it."""
    if kind not in COLUMNS:
        return None
    columns, cells = COLUMNS[kind]
    rows = [
        {
            "cells": cells(item),
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": item.get("metadata", {}),
            },
        }
        for item in items
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": version},
        "columnDefinitions": [{**c, "description": c["name"]} for c in columns],
        "rows": rows,
    }
