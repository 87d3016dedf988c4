"""Per-cluster locks, so two applies on one cluster never interleave.

A lock is an exclusive `flock` on a file named after the cluster. The kernel drops it when its
holder exits, however it exits (`kill -9` included), so a dead holder never blocks anyone; the
file records who holds it, for the message a waiter gives up with. Locks are per machine: runs
from several machines need a shared lock (see the README).
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import re
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from provisioner.drivers import DriverError


class LockHeld(DriverError):
    """The lock stayed taken for the whole --lock-timeout."""


class LockUnusable(DriverError):
    """The lock could not be taken at all: its directory cannot be made or written, say."""


def default_directory(sandbox: Path | None) -> Path:
    if env := os.environ.get("PROVISIONER_LOCK_DIR"):
        return Path(env)
    if sandbox is not None:
        return sandbox / "locks"
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "provisioner" / "locks"


class FileLocks:
    def __init__(self, directory: Path, poll: float = 0.2):
        self.directory = directory
        self.poll = poll

    def path(self, key: tuple[str, ...]) -> Path:
        return self.directory / (re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(key)) + ".lock")

    @contextlib.contextmanager
    def hold(self, key: tuple[str, ...], timeout: float, what: str) -> Iterator[None]:
        """Hold the lock on `key` (a cluster's target), waiting up to `timeout` seconds for it."""
        path = self.path(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle = path.open("a+", encoding="utf-8")
        except OSError as exc:
            raise LockUnusable(
                f"cannot lock {what}: {exc.filename}: {exc.strerror or exc} "
                "(PROVISIONER_LOCK_DIR moves the locks)"
            ) from None
        with handle:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockHeld(
                            f"{what} is locked by {_holder(path)}; gave up after {timeout:g} s"
                        ) from None
                    time.sleep(self.poll)
            try:
                handle.seek(0)
                handle.truncate()
                handle.write(json.dumps(_me()))
                handle.flush()
                yield
            finally:
                handle.seek(0)
                handle.truncate()
                fcntl.flock(handle, fcntl.LOCK_UN)


def _me() -> dict[str, object]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "user": getpass.getuser(),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _holder(path: Path) -> str:
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {holder['pid']} on {holder['host']} (user {holder['user']}, since {holder['since']})"
    except (OSError, ValueError, KeyError):
        return "another provisioner process"
