"""Saved plans (`plan --out FILE`): the fleet as it was read, the changes, and a fingerprint of
each cluster as observed, so `apply FILE` can refuse a plan whose clusters changed since.

Nothing from a cloud SDK or a credential is in it: the fleet text, pool settings and digests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner import __version__
from provisioner.plan import Plan

FORMAT = "provisioner-plan/1"
# What marks a file as a saved plan however damaged the rest is: it is then never read as a fleet.
_MARKER = re.compile(rb'"format"\s*:\s*"provisioner-plan/')
# No plan is near this size (a fleet and its changes); a bigger file, or an endless one, is no plan.
MAX_BYTES = 32 * 1024 * 1024


class NotAPlan(ValueError):
    pass


class DamagedPlan(ValueError):
    """The file is a saved plan (it says so) but its contents are not one: hand-edited or damaged."""


@dataclass(frozen=True)
class SavedPlan:
    fleet_path: str
    fleet_text: str
    destroy: bool
    fingerprints: dict[str, str]  # cluster name -> fingerprint of its pools when planned
    changes: list[dict[str, Any]]


def save(plan: Plan, fleet_path: str, fleet_text: str, out: Path) -> None:
    document = {
        "format": FORMAT,
        "provisioner": __version__,
        "fleet": {"path": fleet_path, "text": fleet_text},
        "destroy": plan.destroy,
        "clusters": {c.target.name: c.fingerprint for c in plan.clusters},
        "changes": plan.json()["changes"],
    }
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def load(path: Path) -> SavedPlan:
    """The saved plan in `path`; NotAPlan where the file is something else (a fleet file, say),
    DamagedPlan naming the first field that is wrong where it is a plan no longer whole."""
    with path.open("rb") as handle:
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise NotAPlan(str(path))
    try:
        document = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        if _MARKER.search(raw):  # it was a plan: damaged, not a fleet file to compile
            raise DamagedPlan(f"{path}: damaged saved plan: not valid UTF-8 JSON") from None
        raise NotAPlan(str(path)) from None
    if not isinstance(document, dict) or not isinstance(document.get("format"), str):
        raise NotAPlan(str(path))
    if document["format"] != FORMAT:
        if document["format"].startswith("provisioner-plan/"):
            raise DamagedPlan(
                f"{path}: saved plan format {document['format']!r} is not {FORMAT!r}: "
                "make the plan again with this version"
            )
        raise NotAPlan(str(path))
    try:
        return _saved(document)
    except _Wrong as wrong:
        raise DamagedPlan(f"{path}: damaged saved plan: {wrong}") from None


class _Wrong(Exception):
    pass


def _field(document: dict[str, Any], name: str, kind: type, what: str) -> Any:
    """document[name] (a dotted path), checked to be a `kind`; _Wrong naming it otherwise."""
    value: Any = document
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            raise _Wrong(f"{name} is missing")
        value = value[part]
    if not isinstance(value, kind):
        raise _Wrong(f"{name} must be {what}")
    return value


def _saved(document: dict[str, Any]) -> SavedPlan:
    _field(document, "fleet", dict, "an object")
    clusters = _field(document, "clusters", dict, "an object of cluster name to fingerprint")
    if not all(isinstance(v, str) for v in clusters.values()):
        raise _Wrong("clusters must be an object of cluster name to fingerprint (a string)")
    changes = _field(document, "changes", list, "a list")
    for index, change in enumerate(changes):
        if not isinstance(change, dict):
            raise _Wrong(f"changes[{index}] must be an object")
    return SavedPlan(
        fleet_path=_field(document, "fleet.path", str, "a string"),
        fleet_text=_field(document, "fleet.text", str, "a string"),
        destroy=_field(document, "destroy", bool, "true or false"),
        fingerprints=clusters,
        changes=changes,
    )
