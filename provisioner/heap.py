"""Garbage collection kept off the objects a process already holds while many answers come in."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """Leave the objects alive now (the imported SDKs and client, the fleet) out of garbage
    collection while many threads take in answers: a full collection would walk them all, tens of
    milliseconds each time the answers' garbage sets one off."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
