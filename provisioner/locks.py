"""Per-cluster locks, so two applies on one cluster never interleave.

On one machine a lock is an exclusive `flock` on a file named after the cluster. The kernel drops
it when its holder exits, however it exits (`kill -9` included), so a dead holder never blocks
anyone; the file records who holds it, for the message a waiter gives up with.

Across machines (CI runners) a lock is a PostgreSQL session-level advisory lock, taken where the
catalog is PostgreSQL or `--lock-url` names one: the server drops it with its holder's connection,
however the holder dies, and a small table records who holds it, in the same words.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from provisioner.errors import LockHeld, LockUnusable


class Locks(Protocol):
    def hold(
        self, key: tuple[str, ...], timeout: float, what: str
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the lock on `key` (a cluster's target), waiting up to `timeout` seconds for it;
        LockHeld naming the holder after that."""
        ...


def is_postgresql(url: str | None) -> bool:
    return bool(url) and url.split(":", 1)[0].split("+", 1)[0] == "postgresql"  # type: ignore[union-attr]


def cluster_locks(sandbox: Path | None, catalog_url: str | None, lock_url: str | None) -> Locks:
    """The one place the kind of lock is chosen: PostgreSQL's, shared by every machine that reaches
    it, where `--lock-url` or a PostgreSQL catalog names one; else this machine's lock files."""
    if lock_url and not is_postgresql(lock_url):
        raise LockUnusable("--lock-url must be a PostgreSQL URL, e.g. postgresql+psycopg://host/db")
    url = lock_url or (catalog_url if is_postgresql(catalog_url) else None)
    return PostgresLocks(url) if url else FileLocks(default_directory(sandbox))


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


class PostgresLocks:
    """Session-level advisory locks (pg_try_advisory_lock, polled) on one connection per held lock."""

    TABLE = "provisioner_lock_holders"

    def __init__(self, url: str, poll: float = 0.2):
        self.url = url
        self.poll = poll

    @staticmethod
    def lock_id(key: tuple[str, ...]) -> int:
        """A stable signed 64-bit number for the cluster's target: advisory locks are keyed by one."""
        digest = hashlib.sha256("\0".join(key).encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    @contextlib.contextmanager
    def hold(self, key: tuple[str, ...], timeout: float, what: str) -> Iterator[None]:
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        lock_id = self.lock_id(key)
        connection = self._connect(what)
        try:
            try:
                self._take(connection, key, lock_id, timeout, what)
            except SQLAlchemyError as exc:
                raise self._unusable(what, exc) from None
            try:
                yield
            finally:
                with contextlib.suppress(SQLAlchemyError):  # a lost session has dropped the lock already
                    connection.execute(text(f"DELETE FROM {self.TABLE} WHERE lock_id = :id"), {"id": lock_id})
                    connection.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": lock_id})
        finally:
            connection.close()  # the server drops any advisory lock still held with the session

    def _take(self, connection: Any, key: tuple[str, ...], lock_id: int, timeout: float, what: str) -> None:
        from sqlalchemy import text

        deadline = time.monotonic() + timeout
        while not connection.execute(text("SELECT pg_try_advisory_lock(:id)"), {"id": lock_id}).scalar():
            if time.monotonic() >= deadline:
                holder = self._holder(connection, lock_id)
                raise LockHeld(f"{what} is locked by {holder}; gave up after {timeout:g} s")
            time.sleep(self.poll)
        connection.execute(
            text(
                f"INSERT INTO {self.TABLE} (lock_id, target, pid, host, username, since) "
                "VALUES (:id, :target, :pid, :host, :user, :since) ON CONFLICT (lock_id) DO UPDATE "
                "SET target = :target, pid = :pid, host = :host, username = :user, since = :since"
            ),
            {"id": lock_id, "target": "/".join(key), **_me()},
        )

    def _connect(self, what: str) -> Any:
        """An autocommit connection of its own (the lock lives as long as it), the holders table made."""
        from sqlalchemy import create_engine, text
        from sqlalchemy.exc import SQLAlchemyError
        from sqlalchemy.pool import NullPool

        try:
            engine = create_engine(self.url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
            connection = engine.connect()
            # Two first uses at once would race in CREATE TABLE: a fixed advisory lock serialises it.
            connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": _DDL_LOCK})
            try:
                connection.execute(
                    text(
                        f"CREATE TABLE IF NOT EXISTS {self.TABLE} (lock_id bigint PRIMARY KEY, "
                        "target text NOT NULL, pid integer NOT NULL, host text NOT NULL, "
                        "username text NOT NULL, since text NOT NULL)"
                    )
                )
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": _DDL_LOCK})
        except (SQLAlchemyError, ValueError) as exc:
            raise self._unusable(what, exc) from None
        return connection

    def _unusable(self, what: str, exc: Exception) -> LockUnusable:
        """The failure in one line, naming the server without any password or token of its URL."""
        from provisioner.catalog.url import HIDDEN, redacted, secrets_of

        reason = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]
        for secret in secrets_of(self.url):
            reason = reason.replace(secret, HIDDEN)
        return LockUnusable(f"cannot lock {what} in PostgreSQL {redacted(self.url)}: {reason}")

    def _holder(self, connection: Any, lock_id: int) -> str:
        from sqlalchemy import text

        row = connection.execute(
            text(f"SELECT pid, host, username, since FROM {self.TABLE} WHERE lock_id = :id"), {"id": lock_id}
        ).one_or_none()
        if row is None:
            return "another provisioner process"
        return f"pid {row.pid} on {row.host} (user {row.username}, since {row.since})"


# The advisory lock that serialises making the holders table (an arbitrary fixed 64-bit number).
_DDL_LOCK = PostgresLocks.lock_id(("provisioner", "lock-holders-table"))


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
