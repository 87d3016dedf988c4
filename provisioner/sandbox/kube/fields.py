"""Who owns which fields of a ConfigMap: managedFields per field manager at key granularity, as
server-side apply keeps them (Kubernetes "Server-Side Apply" docs: field management, conflicts,
forcing, removal of fields the applier stops applying).

An object's fields are its leaves (`leaves`): a path per data key, label, annotation. Each manager's
entry (`Entry`) holds the paths it owns under one operation; `update` and `apply` move ownership as
an Update (create, replace, patch) and an Apply do.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from provisioner.sandbox.kube.exceptions import Conflict
from provisioner.sandbox.kube.objects import now

Path = tuple[str, ...]  # a field of a ConfigMap: ("data", key), ("metadata", "labels", key)...


@dataclass
class Entry:
    """One managedFields entry: a manager's fields under one operation."""

    manager: str
    operation: str  # Apply | Update
    time: str
    fields: set[Path] = field(default_factory=set)
    api_version: str = "v1"  # the group version the manager wrote in

    def render(self) -> dict[str, Any]:
        tree: dict[str, Any] = {}
        for path in sorted(self.fields):
            node = tree
            for part in path:
                node = node.setdefault(f"f:{part}", {})
        return {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": tree,
        }

    def describe(self) -> str:
        """How a conflict names the manager (apimachinery fieldmanager, printManager)."""
        return (
            f'"{self.manager}"' if self.operation == "Apply" else f'"{self.manager}" using {self.api_version}'
        )


# A ConfigMap's keyed sections (a field per key) and its atomic fields (one field, whole).
CONFIG_MAP_SECTIONS, CONFIG_MAP_ATOMIC = ("data", "binaryData"), ("immutable",)


def leaves(
    obj: dict[str, Any] | None,
    sections: tuple[str, ...] = CONFIG_MAP_SECTIONS,
    atomic: tuple[str, ...] = CONFIG_MAP_ATOMIC,
) -> dict[Path, Any]:
    """An object's managed fields and their values: a field per key of its `sections`, of its
    labels and annotations, and each of its `atomic` fields whole (a resource.k8s.io spec)."""
    if not obj:
        return {}
    out: dict[Path, Any] = {}
    for section in sections:
        for key, value in (obj.get(section) or {}).items():
            out[(section, key)] = value
    metadata = obj.get("metadata") or {}
    for section in ("labels", "annotations"):
        for key, value in (metadata.get(section) or {}).items():
            out[("metadata", section, key)] = value
    for name in atomic:
        if name in obj:
            out[(name,)] = obj[name]
    return out


def with_leaves(
    obj: dict[str, Any],
    values: dict[Path, Any],
    sections: tuple[str, ...] = CONFIG_MAP_SECTIONS,
    atomic: tuple[str, ...] = CONFIG_MAP_ATOMIC,
) -> dict[str, Any]:
    """`obj` with its managed fields replaced by `values`."""
    out = copy.deepcopy(obj)
    metadata = out.setdefault("metadata", {})
    for section in sections:
        out.pop(section, None)
    for section in ("labels", "annotations"):
        metadata.pop(section, None)
    for name in atomic:
        out.pop(name, None)
    for path, value in sorted(values.items(), key=lambda item: item[0]):
        if len(path) == 1:
            out[path[0]] = copy.deepcopy(value)
        elif path[0] == "metadata":
            metadata.setdefault(path[1], {})[path[2]] = value
        else:
            out.setdefault(path[0], {})[path[1]] = value
    return out


def update(
    entries: list[Entry],
    before: dict[Path, Any],
    after: dict[Path, Any],
    manager: str,
    *,
    api_version: str = "v1",
) -> None:
    """An Update operation: the manager takes the fields it changed from everyone else; fields
    it removed leave every manager's set."""
    changed = {p for p, v in after.items() if before.get(p, object()) != v}
    removed = set(before) - set(after)
    for entry in entries:
        entry.fields -= changed | removed
    if changed:
        mine = next((e for e in entries if e.manager == manager and e.operation == "Update"), None)
        if mine is None:
            mine = Entry(manager, "Update", now(), api_version=api_version)
            entries.append(mine)
        mine.fields |= changed
        mine.time = now()
    entries[:] = [e for e in entries if e.fields]


def apply(
    entries: list[Entry],
    before: dict[Path, Any],
    applied: dict[Path, Any],
    manager: str,
    force: bool,
    *,
    api_version: str = "v1",
) -> dict[Path, Any]:
    """An Apply operation, giving the object's fields after it: the manager owns exactly the fields
    it applies; a field another manager owns with a different value is a conflict unless forced
    (then it changes hands); fields it applied before and applies no more are removed unless another
    manager owns them. An entry left with no field is the caller's to drop when it stores."""
    mine = next((e for e in entries if e.manager == manager and e.operation == "Apply"), None)
    if mine is None:
        mine = Entry(manager, "Apply", now(), api_version=api_version)
        entries.append(mine)
    conflicts = [
        (path, other)
        for path in sorted(applied)
        for other in entries
        if other is not mine and path in other.fields and before.get(path) != applied[path]
    ]
    if conflicts and not force:
        if not mine.fields:
            entries.remove(mine)
        raise _conflict(conflicts)
    for path, other in conflicts:
        other.fields.discard(path)
    result = dict(before)
    for path in mine.fields - set(applied):
        if not any(path in e.fields for e in entries if e is not mine):
            result.pop(path, None)
    result.update(applied)
    mine.fields, mine.time = set(applied), now()
    return result


def _path_text(path: Path) -> str:
    return "." + ".".join(path)


def _conflict(conflicts: list[tuple[Path, Entry]]) -> Conflict:
    """The API server's apply conflict (apimachinery fieldmanager conflict.go, NewConflictError)."""
    causes = [
        {"type": "FieldManagerConflict", "message": f"conflict with {e.describe()}", "field": _path_text(p)}
        for p, e in conflicts
    ]
    if len(conflicts) == 1:
        path, entry = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {entry.describe()}: {_path_text(path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for path, entry in conflicts:
            by_manager.setdefault(entry.describe(), []).append(_path_text(path))
        parts = [
            f"conflicts with {m}:" + "".join(f"\n- {p}" for p in paths) for m, paths in by_manager.items()
        ]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(parts)
    return Conflict(message, {"causes": causes})
