"""Garbage collection kept off the objects a process already holds while many answers come in.

Why: a plan or sync of a few hundred clusters holds the imported SDKs (about 1,650 modules), the
fleet and its compiled pools, and takes in thousands of small answers whose garbage triggers full
collections; each walks everything held (0.1 s at 10,000 pools, compile.py), in the middle of
listings that take about 100 ms on a real cloud. Frozen, they are left out of every collection.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


class _Freezer:
    """gc.freeze is process-wide: the heap thaws when the last open heap_frozen block ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0

    def enter(self) -> None:
        with self._lock:
            self._open += 1
            gc.freeze()  # each block freezes what is alive when it starts

    def leave(self) -> None:
        with self._lock:
            self._open -= 1
            if self._open == 0:
                gc.unfreeze()


_FREEZER = _Freezer()


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """Leave the objects alive now (the imported SDKs and client, the fleet) out of garbage
    collection while many threads take in answers: a full collection would walk them all, tens of
    milliseconds each time the answers' garbage sets one off. Blocks may nest, or overlap in
    several threads: the heap thaws when the last of them ends."""
    _FREEZER.enter()
    try:
        yield
    finally:
        _FREEZER.leave()
