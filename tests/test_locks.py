"""Per-cluster locks: a second holder waits or gives up naming the first; a killed holder frees it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from provisioner.errors import LockHeld
from provisioner.locks import FileLocks

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
