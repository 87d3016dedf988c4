"""Fleet scale inside the clouds' quotas (issue 30): whole `provisioner plan` and `sync` commands,
as a user runs them, against a sandbox that enforces each cloud's published API quotas.

- plan of 3,000 clusters x 4 pools over 30 quota scopes (tests/fleets.py): its wall time beside
  the quota floor, the 429s it received, and the most memory it held with its helpers (PSS);
- sync of the same into PostgreSQL as 4 shards at once (`sync --shard I/4`), beside its floor;
- plan of 30 clusters at 200 ms latency: round trips (the latency run minus a zero-latency run),
  and the round trips a second more of latency adds (1 s to 2 s), which nothing overlaps.

The quota floor is the time the sandbox's quotas (provisioner/sandbox/quotas.py, the clouds'
documentation) allow for the requests the command made, each bucket on its own, all at once:
past a bucket's burst, a token bucket admits its refill rate, a window its size per window.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from bench import fleet_world
from bench.figures import Figure
from tests.fleets import fleet_text

BIG, SHARDS = 3000, 4
LATENCY_FLEET, LATENCY_MS = 30, 200.0
# Latencies long enough that no start-up CPU hides a round trip: the slope between them counts
# the requests in series, where at 200 ms some of them overlap the SDKs' imports on other threads.
SERIAL_MS = (1000.0, 2000.0)
RUNS = 5  # at each latency, each a whole command: the median, since one run's start-up can lag 1 s
POSTGRES = os.environ.get(
    "PROVISIONER_BENCH_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
PROVISIONER = [sys.executable, "-m", "provisioner"]


def run() -> list[Figure]:
    return [*_big_fleet(), *_plan_latency()]


def _big_fleet() -> list[Figure]:
    world = fleet_world.start(fleet_text(BIG))
    name = f"plan, {BIG:,} clusters x 4 pools over 30 quota scopes, quotas on"
    try:
        world.quotas_on()
        plan = [*PROVISIONER, "plan", str(world.fleet), "--sandbox", str(world.sandbox_dir)]
        with _PeakMemory() as memory:
            wall, usage = _timed(plan, on_start=memory.watch)
        reports = world.quota_reports()
        plan_floor, throttled = quota_floor(reports), sum(r["throttled"] for r in reports.values())
        peak_mb = memory.peak_mb
        print(
            f"bench fleet: plan {wall:.1f} s, floor {plan_floor:.1f} s, {peak_mb:.0f} MB with its helpers"
            f" ({usage.ru_maxrss / 1024:.0f} MB the largest process alone), 429s {_by_cloud(reports)}",
            file=sys.stderr,
        )
        world.quotas_on()  # afresh for the sync: its buckets full, as after a night
        database = _scratch_database()
        catalog = f"{POSTGRES.rsplit('/', 1)[0]}/{database}"
        shards = [
            [
                *PROVISIONER,
                "sync",
                str(world.fleet),
                "--sandbox",
                str(world.sandbox_dir),
                "--shard",
                f"{i}/{SHARDS}",
                "--json",
            ]
            for i in range(SHARDS)
        ]
        sync_wall, printed = _timed_together(shards, {"PROVISIONER_CATALOG": catalog})
        unread = sum(len(json.loads(shard)["allocation_stale"]) for shard in printed)
        sync_reports = world.quota_reports()
        sync_floor = quota_floor(sync_reports)
        print(
            f"bench fleet: sync {sync_wall:.1f} s, {unread} clusters unread, 429s {_by_cloud(sync_reports)}",
            file=sys.stderr,
        )
    finally:
        world.stop()
    sync = f"sync, {BIG:,} clusters x 4 pools into PostgreSQL, {SHARDS} shards at once, quotas on"
    return [
        Figure(name, round(wall, 1), "s", round(plan_floor, 1), "floor: the quotas' time for its requests"),
        Figure(name.replace("plan,", "429s received by the plan,"), throttled, "429s", 0, "goal: none"),
        Figure(name.replace("plan,", "peak memory of the plan,"), round(peak_mb), "MB", 600, "goal"),
        Figure(
            sync, round(sync_wall, 1), "s", round(sync_floor, 1), "floor: the quotas' time for its requests"
        ),
        # A sync is only as fast as it is whole: a cluster whose Kubernetes reads timed out cost it
        # the timeout, and its allocation figures were not read (kept from before, if any, as stale).
        Figure(
            sync.replace("sync,", "clusters whose Kubernetes API the sync could not read,"),
            unread,
            "clusters",
            0,
            "should be none",
        ),
    ]


def _plan_latency() -> list[Figure]:
    world = fleet_world.start(fleet_text(LATENCY_FLEET))
    command = [*PROVISIONER, "plan", str(world.fleet), "--sandbox", str(world.sandbox_dir)]
    try:
        walls = {}
        for latency in (0.0, LATENCY_MS, *SERIAL_MS):
            world.latency(latency)
            walls[latency] = sorted(_timed(command)[0] for _ in range(RUNS))[RUNS // 2]
    finally:
        world.stop()
    trips = (walls[LATENCY_MS] - walls[0.0]) / (LATENCY_MS / 1000)
    low, high = SERIAL_MS
    serial = (walls[high] - walls[low]) / ((high - low) / 1000)
    name = f"`provisioner plan`, {LATENCY_FLEET} clusters on 4 clouds, {LATENCY_MS:g} ms latency"
    floor = "floor: EKS lists, then describes"
    return [
        Figure(name, round(trips, 2), "round trips", 2.0, floor),
        # The control's floor is named apart, so issue 30's goal is not read against it.
        Figure(
            name.replace(f"{LATENCY_MS:g} ms", f"{low:g} to {high:g} ms"),
            round(serial, 2),
            "round trips",
            2.0,
            f"control {floor}",
        ),
    ]


def _by_cloud(reports: dict[str, dict]) -> str:
    """The 429s each cloud's emulator sent, for the progress line."""
    return ", ".join(f"{cloud} {report['throttled']}" for cloud, report in reports.items())


def quota_floor(reports: dict[str, dict]) -> float:
    """The seconds each bucket's quota needs for the requests counted in it, the longest of them."""
    longest = 0.0
    for report in reports.values():
        for bucket in report.get("buckets", []):
            limit = report["limits"][bucket["class"]]
            longest = max(longest, _seconds_for(limit, bucket["requests"]))
    return longest


def _seconds_for(limit: dict, requests: int) -> float:
    if limit["kind"] == "token_bucket":
        return max(0.0, requests - limit["size"]) / limit["refill_per_second"]
    return (math.ceil(requests / limit["size"]) - 1) * limit["window_seconds"]


def _timed(
    command: Sequence[str], env: dict[str, str] | None = None, on_start: Callable[[int], None] | None = None
) -> tuple[float, resource.struct_rusage]:
    """The command's wall time and resource use, run to its end (`on_start` given its pid); its
    output is not kept."""
    with tempfile.TemporaryFile() as errors:  # not a pipe: a long run's progress would fill one
        began = time.perf_counter()
        child = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=errors, env={**os.environ, **(env or {})}
        )
        if on_start is not None:
            on_start(child.pid)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - began
        _check(command, os.waitstatus_to_exitcode(status), errors)
    return wall, usage


class _PeakMemory:
    """The most memory a command and its helper processes held at once, sampled: the sum of their
    proportional set sizes (Linux's Pss, smaps_rollup), which counts a page a helper still shares
    with its parent since the fork once between them, where each one's RSS would count it again."""

    EVERY = 0.25  # seconds between samples

    def __init__(self) -> None:
        self.peak_mb = 0.0
        self._root: int | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def watch(self, pid: int) -> None:
        self._root = pid
        self._thread.start()

    def __enter__(self) -> _PeakMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(self.EVERY):
            assert self._root is not None
            self.peak_mb = max(self.peak_mb, sum(_pss_kb(p) for p in _tree(self._root)) / 1024)


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, as /proc lists each thread's children."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        found.append(parent)
        tasks: list[Path] = []
        with contextlib.suppress(OSError):  # the process has ended
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        for task in tasks:
            with contextlib.suppress(OSError):  # the thread has ended
                todo.extend(int(child) for child in (task / "children").read_text().split())
    return found


def _pss_kb(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0  # gone, or a zombie: it holds nothing now


def _timed_together(commands: Sequence[Sequence[str]], env: dict[str, str]) -> tuple[float, list[str]]:
    """Wall time from starting every command at once to the last one's end, and what each printed."""
    with contextlib.ExitStack() as stack:
        outputs = [stack.enter_context(tempfile.TemporaryFile()) for _ in commands]
        errors = [stack.enter_context(tempfile.TemporaryFile()) for _ in commands]
        started = time.perf_counter()
        children = [
            subprocess.Popen(c, stdout=out, stderr=err, env={**os.environ, **env})
            for c, out, err in zip(commands, outputs, errors, strict=True)
        ]
        codes = [child.wait() for child in children]
        wall = time.perf_counter() - started
        for command, code, err in zip(commands, codes, errors, strict=True):
            _check(command, code, err)
        printed = []
        for out in outputs:
            out.seek(0)
            printed.append(out.read().decode())
    return wall, printed


def _check(command: Sequence[str], code: int, errors: IO[bytes]) -> None:
    if code not in (0, 2):  # 2: plan's changes, never an error here
        errors.seek(0)
        raise RuntimeError(f"{' '.join(command)} exited {code}: {errors.read().decode()[-2000:]}")


def _scratch_database() -> str:
    """A new, empty PostgreSQL database for the catalog; sync creates its tables."""
    import sqlalchemy

    name = f"bench_{uuid.uuid4().hex[:12]}"
    engine = sqlalchemy.create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return name
