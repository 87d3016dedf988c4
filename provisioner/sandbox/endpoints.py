"""DIR/endpoints.json: where `sandbox serve --dir DIR` listens, per cloud. Read by every command
given --sandbox, so this module imports nothing of the emulators themselves."""

from __future__ import annotations

import json
from pathlib import Path

from provisioner.errors import SandboxNotRunning

ENDPOINTS_FILE = "endpoints.json"


def read_endpoints(directory: str | Path) -> dict[str, str]:
    """The emulator addresses `provisioner sandbox serve --dir DIR` wrote, by cloud."""
    path = Path(directory) / ENDPOINTS_FILE
    try:
        endpoints = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SandboxNotRunning(
            f"no sandbox at {directory}: {path} does not exist; start one with "
            f"`provisioner sandbox serve --dir {directory}`"
        ) from None
    except (OSError, ValueError) as exc:
        raise SandboxNotRunning(f"{path} is not a sandbox's endpoints file: {exc}") from None
    if not isinstance(endpoints, dict):
        raise SandboxNotRunning(f"{path} is not a sandbox's endpoints file")
    return endpoints


def write_endpoints(directory: Path, endpoints: dict[str, str]) -> None:
    """Written whole then renamed, so a command starting meanwhile never reads half a file."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{ENDPOINTS_FILE}.partial"
    partial.write_text(json.dumps(endpoints, indent=2) + "\n", encoding="utf-8")
    partial.replace(directory / ENDPOINTS_FILE)


def remove_endpoints(directory: Path) -> None:
    (directory / ENDPOINTS_FILE).unlink(missing_ok=True)
