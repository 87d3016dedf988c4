"""DIR/endpoints.json: where `sandbox serve --dir DIR` listens, per cloud, written here; the tool
reads it where it makes its drivers (provisioner.drivers.registry.read_endpoints). With `--quotas`
it also holds "quotas": {"scale": S, "speedup": T}, the knobs the quotas are enforced with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ENDPOINTS_FILE = "endpoints.json"


def write_endpoints(directory: Path, endpoints: dict[str, Any]) -> None:
    """Written whole then renamed, so a command starting meanwhile never reads half a file."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{ENDPOINTS_FILE}.partial"
    partial.write_text(json.dumps(endpoints, indent=2) + "\n", encoding="utf-8")
    partial.replace(directory / ENDPOINTS_FILE)


def remove_endpoints(directory: Path) -> None:
    (directory / ENDPOINTS_FILE).unlink(missing_ok=True)
