"""Large batches of requests spread over this machine's cores, in helper processes.

A cloud listing spends most of the client's time in its SDK's CPU (5 to 20 times a bare HTTP
request's, bench `listing`), so past a hundred or so clusters one interpreter, not the network,
sets a plan's wall time. `spread` hands a share of a large batch to helper processes, each with
its own SDK clients, connections and threads, and hands each result back as soon as it is made.

Helpers are forked once, on Linux, while this process runs a single thread: fork copies only
the calling thread, and a lock another thread held then would stay held in the child (macOS's
system frameworks are not safe to use after a fork at all). A process that already runs threads
when it first needs helpers (a test's in-process sandbox, a server) does its work alone. Helpers
live as long as this process, keep their clients and connections warm between batches, leave
Ctrl-C to it (they run in a process group of their own), and end with it: each holds only its
own end of its pipe, so this process's exit, however it happens, ends their reads.

Why a real fleet needs it: a listing costs 0.4-1.2 ms of the SDK's CPU (bench `client CPU per
listing`; EKS adds a describe per node group), so a 300-cluster plan is 0.3-0.6 s of one core
where the clouds answer in about 100 ms; their quotas (ARM's 250-read burst per subscription and
region, GKE's 3,000 requests a minute per project; clouds.yaml requestsAtOnce) hold such a fleet
in one burst when it spans a few subscriptions or projects, so the interpreter, not the network
nor the quota, sets the wall time: 1.9 round trips with a helper against about 3 alone (bench
`plan, 300 clusters`), and sync's floor a third lower.

Paced by the clouds' quotas, a process spreads only work whose items name their quota scope:
each scope's items all go to one process, each helper starts from this process's buckets, and
what it drew is added to them when its share is done (quotas.Pacer.drawn_since, add_drawn), so
requests this process sends meanwhile in the same scopes add up with the helper's. At 3,000
clusters one interpreter's listings took 24-32 s of CPU, more than the 20 s EKS's quota needs
for them (bench `fleet`).
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from provisioner.quotas import PACER, Schedule

# Below this many items, one process's CPU for them fits within about one round trip where a
# listing costs 0.5-1 ms (a hundred against 100 ms), so helpers would gain little.
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


def spread(
    batch: Batch,
    items: Sequence[Any],
    each: Callable[[int, Any], None],
    here: float = 1.0,
    scope: Callable[[Any], Hashable] | None = None,
) -> None:
    """Run `batch` over `items`, shared between this process and its helpers when the items are
    many; each(index, result) runs here for every item, as its result comes in (from a helper, on
    a thread of this process). An error a share raised is raised here once every share has ended
    and been handed over; Ctrl-C stops the helpers at once (their work is reads). A helper that
    dies, or items that cannot be sent to one, are done in this process afterwards (what a dead
    helper drew is unknown: its scopes' buckets are taken as emptied when it died).

    `here` is this process's share beside a helper's (1: as many items): less where `each` does
    work of its own for every result, which only this process can do. `scope` names the quota
    scope an item's requests count in: without it, a process pacing by the quotas works alone."""
    if here <= 0:
        raise ValueError(f"this process's share must be above 0, not {here}")
    paced = PACER.pacing is not None
    helpers = _HELPERS.claim(len(items)) if scope is not None or not paced else []
    try:
        if helpers and not _sendable(batch):
            _HELPERS.give_back(helpers)  # what it needs cannot cross to another process
            helpers = []
        weights = [here] + [1.0] * len(helpers)
        # Of a cloud's requests at once, each process takes the part its share is of the items.
        named = [scope(item) for item in items] if paced and scope is not None else None
        if named is not None:
            shares = _shares_by_scope(named, weights)
            parts = [len(share) / len(items) for share in shares]  # whole scopes: as dealt
        else:
            shares = _shares(len(items), weights)
            parts = [w / sum(weights) for w in weights]
        scopes = [frozenset(named[i] for i in share) if named else frozenset() for share in shares[1:]]
        runs = [
            _Run(helper, share, items, each, part, of_share)
            for helper, share, part, of_share in zip(helpers, shares[1:], parts[1:], scopes, strict=True)
        ]
        _run_shares(batch, runs, functools.partial(_here, batch, items, shares[0], each, parts[0]))
    finally:
        _HELPERS.give_back(helpers)
    left = [i for run in runs for i in run.unfinished()]
    # Every other share has ended: these may take all of a cloud's requests at once.
    _here(batch, items, left, each, 1.0)


def fork_helpers(items: int) -> None:
    """Fork now the helpers a batch of `items` would use, while this process still runs one
    thread: a command calls it before it starts threads of its own beside that batch (plan's
    ConfigMap reads, sync's progress), which would keep any helper from being forked later."""
    if items >= SPREAD_FROM:
        _HELPERS.fork()


def _shares(count: int, weights: list[float]) -> list[list[int]]:
    """Item indices for each process, in proportion to `weights` and interleaved (each share a
    mix of the whole, as the fleet's order groups clusters by cloud or region): each item goes to
    the process furthest below its proportion."""
    shares: list[list[int]] = [[] for _ in weights]
    for index in range(count):
        behind = min(range(len(weights)), key=lambda k: (len(shares[k]) + 1) / weights[k])
        shares[behind].append(index)
    return shares


def _shares_by_scope(scopes: list[Hashable], weights: list[float]) -> list[list[int]]:
    """Item indices for each process, every item of one scope in one process: scopes largest
    first (ties in the order they come), each to the process whose share, with it, stands
    lowest beside its weight."""
    members: dict[Hashable, list[int]] = {}
    for index, named in enumerate(scopes):
        members.setdefault(named, []).append(index)
    shares: list[list[int]] = [[] for _ in weights]
    for group in sorted(members.values(), key=len, reverse=True):
        lowest = min(range(len(weights)), key=lambda k: (len(shares[k]) + len(group)) / weights[k])
        shares[lowest].extend(group)
    return [sorted(share) for share in shares]


def _here(
    batch: Batch, items: Sequence[Any], indices: list[int], each: Callable[[int, Any], None], part: float
) -> None:
    """`batch` over items[indices] in this process, each result handed over by its index in `items`."""
    if indices:
        batch([items[i] for i in indices], lambda k, result: each(indices[k], result), part)


def _run_shares(batch: Batch, runs: list[_Run], here: Callable[[], None]) -> None:
    """Start the helpers' shares, do this process's (`here`), and wait for every share to end."""
    try:
        for run in runs:
            run.start(batch)
        here()
    except Exception:
        for run in runs:
            run.join()  # the helpers' shares end, and are handed over, before the error is raised
        raise
    except BaseException:  # Ctrl-C
        _stop(runs)
        raise
    try:
        for run in runs:
            run.join()
    except BaseException:  # Ctrl-C while the helpers finish
        _stop(runs)
        raise
    errors = [run.error for run in runs if run.error is not None]
    if errors:
        raise errors[0]


def _stop(runs: list[_Run]) -> None:
    for run in runs:
        run.stop()
    for run in runs:
        run.join()  # what they sent before is handed to `each` all the same


def _sendable(batch: Batch) -> bool:
    try:
        pickle.dumps(batch)
    except Exception:  # PicklingError, or what an object's own __reduce__ raises
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
    part: float  # of a cloud's requests at once
    scopes: frozenset[Hashable]  # the quota scopes its items' requests count in (paced only)
    done: set[int] = field(default_factory=set)
    error: BaseException | None = None
    reader: threading.Thread | None = None
    deliveries: list[Future[None]] = field(default_factory=list)
    unsent: bool = False
    paced: tuple[Schedule, float] = ({}, 0.0)  # the buckets' schedule sent with the share, and when
    drawn_back: bool = False  # the helper said what it drew in them

    def start(self, batch: Batch) -> None:
        self.paced = (PACER.state(), time.monotonic())  # the buckets as this helper starts from them
        try:
            share = [self.items[i] for i in self.share]
            self.helper.connection.send((batch, share, self.part, self.paced))
        except OSError:  # the helper has died
            self.helper.alive = False
            return
        except Exception:  # items that cannot be pickled (whole, before a byte is sent): done here
            self.unsent = True
            return
        self.reader = threading.Thread(target=self._read, name="spread-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            self._read_results()
        except Exception as exc:  # a result this process cannot take: the helper is not used again
            self.error = self.error or exc
            self.helper.alive = False
            self.helper.process.terminate()  # reaped by the caller's thread, never this one
        finally:
            if not self.drawn_back:  # it died, or was ended, without a word of its draws
                PACER.drained(self.scopes)

    def _read_results(self) -> None:
        while True:
            try:
                kind, value = self.helper.connection.recv()
            except (EOFError, OSError, pickle.UnpicklingError):  # the helper died, maybe mid-message
                self.helper.alive = False
                return
            if kind == "paced":  # what the helper drew in each bucket, added to this process's
                PACER.add_drawn(value, *self.paced)
                self.drawn_back = True
                continue
            if kind != "results":
                self.error = self.error or (value if kind == "failed" else None)
                return
            for index, result in value:
                self.done.add(index)
                self.deliveries.append(_deliveries().submit(self._deliver, self.share[index], result))

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
        if not self.helper.alive:
            self.helper.process.join(timeout=5)  # reaped here, on the caller's thread only

    def unfinished(self) -> list[int]:
        if self.unsent:
            return list(self.share)
        if self.helper.alive or self.error is not None:
            return []
        return [self.share[k] for k in range(len(self.share)) if k not in self.done]


class _Helpers:
    """This process's helpers, forked at the first batch that wants them; a helper works one
    batch at a time, so two batches at once (two threads) share out the idle ones."""

    def __init__(self) -> None:
        self._helpers: list[_Helper] | None = None
        self._busy: set[int] = set()
        self._lock = threading.Lock()

    def in_a_helper(self) -> None:
        """In a helper: none of the parent's helpers, and a lock not held (fork copied it held)."""
        self._helpers, self._busy, self._lock = [], set(), threading.Lock()

    def fork(self) -> None:
        with self._lock:
            if self._helpers is None:
                self._helpers = _fork(_helper_count()) if _forkable() else []

    def claim(self, items: int) -> list[_Helper]:
        if items < SPREAD_FROM:
            return []
        self.fork()
        with self._lock:
            assert self._helpers is not None
            for gone in [h for h in self._helpers if not h.alive]:
                gone.process.join(timeout=5)  # reaped, so no zombie outlives it
            self._helpers = [h for h in self._helpers if h.alive]
            idle = [h for h in self._helpers if id(h) not in self._busy]
            self._busy.update(id(h) for h in idle)
            return idle

    def give_back(self, helpers: list[_Helper]) -> None:
        with self._lock:
            self._busy.difference_update(id(h) for h in helpers)


def _forkable() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    if threading.active_count() > 1:
        _log.debug("not forking helpers: %d threads run already", threading.active_count())
        return False
    return True


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
    helpers: list[_Helper] = []
    for _ in range(count):
        mine, theirs = context.Pipe()
        # The child closes every end of this process's: else its reads would never end with it.
        ours = [mine, *(h.connection for h in helpers)]
        process = context.Process(target=_serve, args=(theirs, ours), name="provisioner-helper", daemon=True)
        process.start()
        theirs.close()
        helpers.append(_Helper(mine, process))
    return helpers


def _serve(connection: Connection, parents: list[Connection]) -> None:
    """A helper: run each batch sent, sending its results as they are made, then how it ended."""
    for end in parents:
        end.close()
    _HELPERS.in_a_helper()
    os.setpgrp()  # the terminal's Ctrl-C is the parent's to handle
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
            batch, items, part, (paced, since) = connection.recv()
        except (EOFError, OSError):
            return  # the parent has gone
        PACER.merge(paced)
        try:
            batch(items, emit, part)
            ended: tuple[str, Any] = ("done", None)
        except Exception as exc:
            ended = ("failed", exc if _picklable(exc) else RuntimeError(f"{type(exc).__name__}: {exc}"))
        try:
            with sending:
                connection.send(("paced", PACER.drawn_since(paced, since)))
                connection.send(ended)
        except OSError:
            return  # the parent has gone


def _picklable(value: object) -> bool:
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:
        return False
    return True


_log = logging.getLogger(__name__)
_HELPERS = _Helpers()
