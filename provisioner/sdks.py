"""The cloud SDKs and the kubernetes client are imported late, when a command first needs them
(`validate` and `--help` import none), and once, from one thread."""

from __future__ import annotations

import importlib
import threading

_IMPORT_LOCK = threading.Lock()


def import_sdk(*modules: str) -> None:
    """Import an SDK's modules now, from one thread: SDKs import more on first use, and first
    imports racing in worker threads can deadlock (importlib's _DeadlockError)."""
    with _IMPORT_LOCK:
        for module in modules:
            importlib.import_module(module)
