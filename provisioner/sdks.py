"""The cloud SDKs and the kubernetes client are imported late, when a command first needs them
(`validate` and `--help` import none), and once, from one thread."""

from __future__ import annotations

import importlib
import threading

_IMPORT_LOCK = threading.Lock()
_IMPORTED: set[tuple[str, ...]] = set()  # what import_sdk imported whole, for no lock once it has


def import_sdk(*modules: str) -> None:
    """Import an SDK's modules now, from one thread: SDKs import more on first use, and first
    imports racing in worker threads can deadlock (importlib's _DeadlockError). Called again
    (once per cluster, from a hundred threads at once), it returns at once."""
    if modules in _IMPORTED:
        return
    with _IMPORT_LOCK:
        for module in modules:
            importlib.import_module(module)
        _IMPORTED.add(modules)
