"""Per-cluster locks: a second holder waits or gives up naming the first; a killed holder frees it.
On one machine they are lock files; across machines, PostgreSQL advisory locks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.compile import compile_file
from provisioner.errors import LockHeld, LockUnusable
from provisioner.locks import FileLocks, PostgresLocks, cluster_locks
from provisioner.sandbox.server import SandboxSettings
from tests.worlds import World

KEY = ("gke", "project", "europe-west4", "cluster")


def hold_in_another_process(directory: Path) -> subprocess.Popen:
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from provisioner.locks import FileLocks
        with FileLocks(Path({str(directory)!r})).hold({KEY!r}, 5, "cluster"):
            print("held", flush=True)
            time.sleep(60)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_holder_gives_up_naming_the_first_and_a_killed_holder_blocks_nobody(tmp_path: Path):
    locks = FileLocks(tmp_path, poll=0.05)
    holder = hold_in_another_process(tmp_path)
    try:
        started = time.monotonic()
        with (
            pytest.raises(
                LockHeld, match=rf"cluster gcp is locked by pid {holder.pid} on .*gave up after 0.3 s"
            ),
            locks.hold(KEY, 0.3, "cluster gcp"),
        ):
            pass
        assert time.monotonic() - started >= 0.3
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with locks.hold(KEY, 0.0, "cluster gcp"):  # no wait at all: the kernel dropped the dead holder's lock
        pass


def test_other_clusters_are_not_blocked(tmp_path: Path):
    locks = FileLocks(tmp_path)
    with locks.hold(KEY, 0, "one"), locks.hold(("gke", "project", "europe-west4", "other"), 0, "two"):
        pass


def test_a_waiter_gets_the_lock_once_it_is_released(tmp_path: Path):
    holder = hold_in_another_process(tmp_path)
    holder.send_signal(signal.SIGTERM)
    with FileLocks(tmp_path, poll=0.05).hold(KEY, 10, "cluster"):
        pass
    holder.wait()


ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A scratch database on the PostgreSQL at 127.0.0.1:5432, dropped afterwards."""
    import psycopg

    database = f"provisioner_locks_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{database}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def hold_in_postgres(url: str, key: tuple[str, ...], lock_dir: Path) -> subprocess.Popen:
    """Another process holding the cluster's lock through PostgreSQL, with lock files of its own."""
    script = textwrap.dedent(
        f"""
        import sys
        from provisioner.locks import cluster_locks
        with cluster_locks(None, None, {url!r}).hold({key!r}, 5, "cluster"):
            print("held", flush=True)
            sys.stdin.readline()  # until told to end, or killed
        """
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PROVISIONER_LOCK_DIR": str(lock_dir)},
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_applies_with_their_own_lock_directories_share_the_postgresql_lock(tmp_path: Path, postgres_url: str):
    world = World(tmp_path, SandboxSettings())
    gcp = compile_file(world.fleet).cluster("gcp").target.ref
    holder = hold_in_postgres(postgres_url, gcp.key, tmp_path / "machine-a")
    apply = [sys.executable, "-m", "provisioner", "apply", str(world.fleet), "--auto-approve"]
    env = {
        **os.environ,
        "PROVISIONER_SANDBOX": str(world.sandbox.directory),
        "PROVISIONER_LOCK_DIR": str(tmp_path / "machine-b"),  # no lock file in common with the holder
        "PROVISIONER_LOCK_URL": postgres_url,
    }
    try:
        blocked = subprocess.run(
            [*apply, "--lock-timeout", "0.5"], env=env, capture_output=True, text=True, check=False
        )
        assert blocked.returncode == 1, blocked.stdout + blocked.stderr
        assert f"cluster gcp is locked by pid {holder.pid} on {socket.gethostname()} (user " in blocked.stdout
        assert "Apply incomplete: 6 created" in blocked.stdout  # the other clusters went ahead
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        # No wait at all: the server dropped the killed holder's lock with its connection.
        finished = subprocess.run(
            [*apply, "--lock-timeout", "0"], env=env, capture_output=True, text=True, check=False
        )
        assert finished.returncode == 0, finished.stdout + finished.stderr
        assert "Apply complete: 3 created" in finished.stdout
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        world.sandbox.stop()


def test_a_postgresql_waiter_gets_the_lock_once_its_holder_ends(tmp_path: Path, postgres_url: str):
    holder = hold_in_postgres(postgres_url, KEY, tmp_path / "machine-a")
    locks = PostgresLocks(postgres_url, poll=0.05)
    with (
        pytest.raises(LockHeld, match=rf"cluster gcp is locked by pid {holder.pid} on "),
        locks.hold(KEY, 0.2, "cluster gcp"),
    ):
        pass
    assert holder.stdin is not None
    holder.stdin.write("done\n")
    holder.stdin.flush()
    with locks.hold(KEY, 30, "cluster gcp"):  # waits for the holder to let go, then holds it
        assert holder.wait(timeout=30) == 0


def test_the_lock_kind_is_postgresql_where_the_catalog_or_lock_url_is(tmp_path: Path):
    postgres = "postgresql+psycopg://postgres@127.0.0.1:5432/catalog"
    assert isinstance(cluster_locks(tmp_path, postgres, None), PostgresLocks)
    assert isinstance(cluster_locks(tmp_path, f"sqlite:///{tmp_path}/c.db", postgres), PostgresLocks)
    assert isinstance(cluster_locks(tmp_path, f"sqlite:///{tmp_path}/c.db", None), FileLocks)
    with pytest.raises(LockUnusable, match="--lock-url must be a PostgreSQL URL"):
        cluster_locks(tmp_path, None, f"sqlite:///{tmp_path}/locks.db")


def test_a_postgresql_lock_that_cannot_connect_is_an_error_without_the_password():
    url = "postgresql+psycopg://postgres:s3cret-pw@127.0.0.1:1/db?sslpassword=t0ken"
    with pytest.raises(LockUnusable) as raised, PostgresLocks(url).hold(KEY, 0, "cluster gcp"):
        pass
    message = str(raised.value)
    assert message.startswith(
        "cannot lock cluster gcp in PostgreSQL "
        "postgresql+psycopg://postgres:***@127.0.0.1:1/db?sslpassword=***: "
    )
    assert "s3cret-pw" not in message and "t0ken" not in message
