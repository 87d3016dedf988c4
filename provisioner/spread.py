"""Large batches of requests spread over this machine's cores, in helper processes.

A cloud listing spends most of the client's time in its SDK's CPU (0.4-1.2 ms a request, bench
`listing`), so past a hundred or so clusters one interpreter, not the network, sets a plan's wall
time. `spread` hands a share of a large batch to helper processes, each with its own SDK clients,
connections and threads, and hands each result back as soon as it is made.

Helpers are forked once, while this process runs a single thread: fork copies only the calling
thread, and a lock another thread held then would stay held in the child. A process that already
runs threads when it first needs helpers (a test's in-process sandbox, a server) does its work
alone. Helpers live as long as this process, keep their clients and connections warm between
batches, leave Ctrl-C to it, and end with it.
"""

from __future__ import annotations

import functools
import os
import pickle
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

# Below this many items, one process's CPU for them fits within about one round trip (a hundred
# listings at 0.5-1 ms each against 100 ms), so helpers would gain nothing.
SPREAD_FROM = 100
MAX_HELPERS = 3
# Threads that hand helpers' results to `each`, one per result in flight, as a listing here runs
# `then` on its own thread: a catalog write holds its caller until the batch it joined commits,
# so with fewer threads the catalog's batches could hold no more results than there are threads.
DELIVERY_THREADS = 256

# items, emit(index into items, result), and the part of a cloud's requests at once these items
# may take (one process's). It runs here or, pickled, in a helper: a module-level function or a
# functools.partial of one.
Batch = Callable[[Sequence[Any], Callable[[int, Any], None], float], None]


def spread(batch: Batch, items: Sequence[Any], each: Callable[[int, Any], None]) -> None:
    """Run `batch` over `items`, shared between this process and its helpers when the items are
    many; each(index, result) runs here for every item, as its result comes in (from a helper, on
    a thread of this process). An error a batch raised is raised here once every share has ended.
    A helper that dies leaves its unfinished items to this process."""
    helpers = _HELPERS.for_batch(len(items))
    if helpers and not _sendable(batch):
        helpers = []  # what it needs cannot cross to another process (a test's fake clock, say)
    processes = len(helpers) + 1
    shares = [list(range(start, len(items), processes)) for start in range(processes)]
    part = 1 / processes  # of a cloud's requests at once, for each process
    runs = [_Run(helper, share, items, each) for helper, share in zip(helpers, shares[1:], strict=True)]
    for run in runs:
        run.start(batch, part)
    mine = shares[0]
    try:
        if mine:
            batch([items[i] for i in mine], lambda k, result: each(mine[k], result), part)
        for run in runs:
            run.join()
    except BaseException:  # Ctrl-C, or this share's error: helpers' work is not wanted any more
        for run in runs:
            run.stop()
        for run in runs:
            run.join()  # what they sent before is handed to `each` all the same
        raise
    errors = [run.error for run in runs if run.error is not None]
    if errors:
        raise errors[0]
    left = [i for run in runs for i in run.unfinished()]
    if left:  # a helper died, or its items could not be sent: this process does them
        batch([items[i] for i in left], lambda k, result: each(left[k], result), part)


def _sendable(batch: Batch) -> bool:
    try:
        pickle.dumps(batch)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


@dataclass
class _Helper:
    connection: Connection
    process: Any  # multiprocessing's Process
    alive: bool = True


@dataclass
class _Run:
    """One helper's share of one batch, its results read on a thread of this process."""

    helper: _Helper
    share: list[int]  # indices into items
    items: Sequence[Any]
    each: Callable[[int, Any], None]
    done: set[int] = field(default_factory=set)
    error: BaseException | None = None
    reader: threading.Thread | None = None
    deliveries: list[Future[None]] = field(default_factory=list)
    unsent: bool = False

    def start(self, batch: Batch, part: float) -> None:
        try:
            self.helper.connection.send((batch, [self.items[i] for i in self.share], part))
        except OSError:  # the helper has died
            self.helper.alive = False
            return
        except (pickle.PicklingError, AttributeError, TypeError):  # pickled whole before a byte is sent
            self.unsent = True  # items that cannot cross: this process does them
            return
        self.reader = threading.Thread(target=self._read, name="spread-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                kind, value = self.helper.connection.recv()
            except Exception as exc:  # EOF, a reset pipe, or half a message: the helper has died
                # Not while stop() waits for it: two threads waiting for one process race to reap it.
                if (
                    self.helper.alive
                    and not isinstance(exc, EOFError | OSError)
                    and self.helper.process.is_alive()
                ):
                    self.error = self.error or exc  # a result this process cannot read back
                    self.helper.process.terminate()
                self.helper.alive = False
                return
            if kind == "results":
                for index, result in value:
                    self.done.add(index)
                    self.deliveries.append(_deliveries().submit(self._deliver, self.share[index], result))
            else:
                self.error = self.error or (value if kind == "failed" else None)
                return

    def _deliver(self, index: int, result: Any) -> None:
        try:
            self.each(index, result)
        except Exception as exc:  # raised by `spread` once every share has ended
            self.error = self.error or exc

    def stop(self) -> None:
        """End the helper: the rest of its share is not wanted any more."""
        self.helper.alive = False
        self.helper.process.terminate()
        self.helper.process.join(timeout=5)  # reaped, so no zombie outlives it

    def join(self) -> None:
        if self.reader is not None:
            self.reader.join()
        wait(self.deliveries)

    def unfinished(self) -> list[int]:
        if self.unsent:
            return list(self.share)
        if self.helper.alive or self.error is not None:
            return []
        return [self.share[k] for k in range(len(self.share)) if k not in self.done]


class _Helpers:
    """This process's helpers, forked at the first batch that wants them."""

    def __init__(self) -> None:
        self._helpers: list[_Helper] | None = None
        self._lock = threading.Lock()

    def for_batch(self, items: int) -> list[_Helper]:
        if items < SPREAD_FROM:
            return []
        with self._lock:
            if self._helpers is None:
                self._helpers = _fork(_helper_count()) if threading.active_count() == 1 else []
            for gone in [h for h in self._helpers if not h.alive]:
                gone.process.join(timeout=5)  # reaped, so no zombie outlives it
            self._helpers = [h for h in self._helpers if h.alive]
            return list(self._helpers)


@functools.cache
def _deliveries() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=DELIVERY_THREADS, thread_name_prefix="spread-delivery")


def _helper_count() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(0, min(MAX_HELPERS, cores - 1))


def _fork(count: int) -> list[_Helper]:
    import multiprocessing

    if count == 0 or "fork" not in multiprocessing.get_all_start_methods():
        return []  # Windows has no fork
    context = multiprocessing.get_context("fork")
    helpers = []
    for _ in range(count):
        mine, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(theirs,), name="provisioner-helper", daemon=True)
        process.start()
        theirs.close()
        helpers.append(_Helper(mine, process))
    return helpers


def _serve(connection: Connection) -> None:
    """A helper: run each batch sent, sending its results as they are made, then how it ended."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    sending = threading.Lock()
    pending: list[tuple[int, Any]] = []
    pending_lock = threading.Lock()

    def emit(index: int, result: Any) -> None:
        """Queue a result; whoever is not already sending sends every result queued meanwhile in
        one message, so the parent's reader takes the interpreter lock once per message, not per
        result, while its own listings hold it."""
        with pending_lock:
            pending.append((index, result))
        while sending.acquire(blocking=False):
            try:
                with pending_lock:
                    chunk, pending[:] = list(pending), []
                if chunk:
                    connection.send(("results", chunk))  # OSError once the parent has gone
            finally:
                sending.release()
            with pending_lock:
                if not pending:  # else one queued while this sent, its own try having failed
                    return

    while True:
        try:
            batch, items, part = connection.recv()
        except (EOFError, OSError):
            return  # the parent has gone
        try:
            batch(items, emit, part)
            ended: tuple[str, Any] = ("done", None)
        except Exception as exc:
            ended = ("failed", exc if _picklable(exc) else RuntimeError(f"{type(exc).__name__}: {exc}"))
        try:
            with sending:
                connection.send(ended)
        except OSError:
            return  # the parent has gone


def _picklable(value: object) -> bool:
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:
        return False
    return True


_HELPERS = _Helpers()
