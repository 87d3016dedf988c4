"""Saved plans (`plan --out FILE`): the fleet as it was read, the changes, and a fingerprint of
each cluster as observed, so `apply FILE` can refuse a plan whose clusters changed since.

Nothing from a cloud SDK or a credential is in it: the fleet text, pool settings and digests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner import __version__
from provisioner.plan import Plan

FORMAT = "provisioner-plan/1"


class NotAPlan(ValueError):
    pass


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
    """The saved plan in `path`; NotAPlan where the file is something else (a fleet file, say)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise NotAPlan(str(path)) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise NotAPlan(str(path))
    return SavedPlan(
        fleet_path=document["fleet"]["path"],
        fleet_text=document["fleet"]["text"],
        destroy=document["destroy"],
        fingerprints=document["clusters"],
        changes=document["changes"],
    )
