"""The schema and the store's rules, on both databases."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from click.testing import CliRunner, Result
from rich.console import Console
from sqlalchemy import text

from provisioner.capacity import capacity
from provisioner.catalog.listing import Allocation, ClusterIdentity, DriftFinding, ObservedPool
from provisioner.catalog.models import Base
from provisioner.catalog.store import Store
from provisioner.catalog.url import CatalogError, redacted
from provisioner.catalog.views import pools_table
from provisioner.cli import main
from provisioner.compile import compile_file, desired_state
from tests.conftest import EXAMPLES

HEAD = "0008"  # the newest migration
IDENTITY = ClusterIdentity("gcp-ml", "gke", "my-project", "us-central1", "ml-gke")


def observed(fleet: str = "fleet.yaml", cluster: str = "gcp-ml") -> list[ObservedPool]:
    compiled = compile_file(EXAMPLES / fleet).cluster(cluster)
    return [
        ObservedPool(desired_state(p), capacity(compiled.cloud.key, desired_state(p))) for p in compiled.pools
    ]


def test_the_migrations_build_exactly_the_models_and_run_twice(catalog_url: str):
    store = Store(catalog_url)
    store.migrate()
    store.migrate()  # a no-op at head
    with store.engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert differences == []


def test_an_older_listing_never_overwrites_a_newer_one(catalog_url: str):
    store = Store(catalog_url)
    store.migrate()
    now = datetime.now(UTC)
    assert store.record_cluster(IDENTITY, observed(), [], now)
    assert not store.record_cluster(IDENTITY, observed()[:1], [], now - timedelta(minutes=5))
    assert [p["pool"] for p in store.live_pools()] == ["a100-mig", "l4-timeshare"]


def test_a_pool_that_comes_back_is_first_seen_again(catalog_url: str):
    store = Store(catalog_url)
    store.migrate()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    pools = observed()
    store.record_cluster(IDENTITY, pools, [], start)
    store.record_cluster(IDENTITY, pools[1:], [], start + timedelta(days=1))
    store.record_cluster(IDENTITY, pools, [], start + timedelta(days=2))
    back = {p["pool"]: p for p in store.live_pools()}
    assert back["a100-mig"]["first_seen"] == "2026-11-03T00:00:00+00:00"
    assert back["l4-timeshare"]["first_seen"] == "2026-11-01T00:00:00+00:00"
    assert back["a100-mig"]["deleted_at"] is None


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://app:hunter2@db.example/catalog",
            "postgresql+psycopg://app:***@db.example/catalog",
        ),
        (
            "postgresql+psycopg:///catalog?host=/run/pg&password=hunter2&sslmode=require",
            "postgresql+psycopg:///catalog?host=/run/pg&password=***&sslmode=require",
        ),
        (
            "postgresql://db/c?PassWord=a&pwd=b&passwd=c&sslpassword=d&token=e&Access_Token=f&user=app",
            "postgresql://db/c?PassWord=***&pwd=***&passwd=***&sslpassword=***&token=***&Access_Token=***&user=app",
        ),
        ("postgresql://db/c?pass%77ord=hunter2", "postgresql://db/c?pass%77ord=***"),  # decoded, a password
        ("postgresql://a@b:hun@ter2@db/c", "postgresql://a@b:***@db/c"),  # '@' in user and password
        ("postgresql://app:hunter2@db/c?password=x", "postgresql://app:***@db/c?password=***"),
        ("app:hunter2@db/c", "app:***@db/c"),  # no scheme: still a password
        ("sqlite:////home/me@corp/catalog.db", "sqlite:////home/me@corp/catalog.db"),
        (
            "postgresql://db:5432/c?passfile=/home/me/.pgpass",
            "postgresql://db:5432/c?passfile=/home/me/.pgpass",
        ),
        ("host=db user=app password=hunter2", "host=db user=app password=***"),  # a libpq DSN
    ],
)
def test_redacted_hides_a_password_wherever_it_sits(url: str, shown: str):
    assert redacted(url) == shown


def _ls(url: str) -> Result:
    return CliRunner().invoke(
        main, ["catalog", "ls", "--catalog", url], env={"PROVISIONER_SANDBOX": ""}, catch_exceptions=False
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql+psycopg://postgres:hunter2@127.0.0.1:1/catalog", "cannot connect (Connection refused)"),
        (
            "postgresql+psycopg://postgres:hunter2@127.0.0.1:5432/no_such_catalog",
            'no such database (FATAL: database "no_such_catalog" does not exist)',
        ),
        (
            "postgresql+psycopg://postgres:hunter2@127.0.0.1:port/catalog",
            "not a valid catalog URL (want e.g. sqlite:///PATH or postgresql+psycopg://USER@HOST/DATABASE)",
        ),
        (
            "postgres:hunter2@127.0.0.1/catalog",
            "not a valid catalog URL (want e.g. sqlite:///PATH or postgresql+psycopg://USER@HOST/DATABASE)",
        ),
        (
            "mongodb://u:hunter2@127.0.0.1/catalog",
            "not a valid catalog URL (no database kind 'mongodb'; "
            "want e.g. sqlite:///PATH or postgresql+psycopg://USER@HOST/DATABASE)",
        ),
        (
            "mysql://u:hunter2@127.0.0.1/catalog",
            "no driver for this kind of database is installed (No module named 'MySQLdb')",
        ),
    ],
)
def test_a_catalog_that_cannot_be_opened_is_one_clear_error(url: str, problem: str):
    result = _ls(url)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"error: catalog {redacted(url)}: {problem}\n"
    assert "hunter2" not in result.stderr


def test_a_sqlite_catalog_that_is_a_directory_or_not_a_database_is_one_clear_error(tmp_path: Path):
    assert _ls(f"sqlite:///{tmp_path}").stderr == (
        f"error: catalog sqlite:///{tmp_path}: not a SQLite file (it is a directory)\n"
    )
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all " * 100, encoding="utf-8")
    assert _ls(f"sqlite:///{text}").stderr == (
        f"error: catalog sqlite:///{text}: not a SQLite file (file is not a database)\n"
    )
    inside_a_file = text / "catalog.db"
    # Reading makes no catalog: it says how to make one...
    assert _ls(f"sqlite:///{inside_a_file}").stderr == (
        f"error: catalog sqlite:///{inside_a_file}: there is no catalog here yet "
        "(`provisioner sync FLEET` makes one)\n"
    )
    # ... and making one where it cannot be made says why.
    with pytest.raises(CatalogError) as refused:
        Store(f"sqlite:///{inside_a_file}")
    assert (
        str(refused.value)
        == f"catalog sqlite:///{inside_a_file}: cannot make its directory ({text} is a file)"
    )


MIGRATE_WHEN_TOLD = """
import sys
import traceback
from sqlalchemy import text
from provisioner.catalog.store import Store

for line in sys.stdin:
    if line == "next\\n":  # a first use, as a new process's: a new engine, connected and waiting
        store = Store(sys.argv[1])
        with store.engine.connect() as conn:  # connected before the start, so all five migrate at once
            conn.execute(text("SELECT 1"))
        print("ready", flush=True)
    elif line == "go\\n":
        try:
            store.migrate()
            print("migrated", flush=True)
        except Exception as error:
            print("failed: " + traceback.format_exception_only(error)[-1].strip(), flush=True)
        store.engine.dispose()
"""


class _Migrators:
    """Five processes, each making a fresh first use of the catalog when told, and migrating when
    told, all at once; one set for every round (a process's start-up is most of a round)."""

    def __init__(self, catalog_url: str):
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        self.workers = [
            subprocess.Popen(
                [sys.executable, "-c", MIGRATE_WHEN_TOLD, catalog_url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(5)
        ]

    def _tell(self, word: str) -> list[str]:
        for worker in self.workers:
            worker.stdin.write(word + "\n")
            worker.stdin.flush()
        answers = []
        for worker in self.workers:
            answer = worker.stdout.readline()
            if not answer:  # it ended: say why
                _, stderr = worker.communicate(timeout=120)
                pytest.fail(f"a worker ended: {stderr.strip()[-2000:]}")
            answers.append(answer.rstrip("\n"))
        return answers

    def migrate_at_once(self) -> list[str]:
        """Each connected and waiting, then told to migrate one after the other at once; the error
        line of each that failed."""
        assert self._tell("next") == ["ready"] * 5
        return [answer for answer in self._tell("go") if answer != "migrated"]

    def close(self) -> None:
        for worker in self.workers:
            worker.communicate(timeout=120)  # its stdin closed: it ends


def test_five_first_uses_at_once_all_migrate_the_fresh_catalog(catalog_url: str):
    store = Store(catalog_url)
    migrators = _Migrators(catalog_url)
    try:
        for _ in range(3):  # three fresh starts: a race lost once in a while shows up
            assert migrators.migrate_at_once() == []
            with store.engine.begin() as conn:
                assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
                assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [HEAD]
                Base.metadata.drop_all(conn)
                conn.execute(text("DROP TABLE alembic_version"))
    finally:
        migrators.close()


def test_clusters_queued_behind_the_writer_are_written_in_one_batch_each_on_its_own(catalog_url: str):
    """Writers that queue while one writes go in the next transaction together, each in its own
    savepoint: one cluster whose rows the database refuses fails alone, and a stale listing is
    still refused; the others are stored."""
    import dataclasses

    from sqlalchemy.exc import IntegrityError

    store = Store(catalog_url)
    store.migrate()
    pools = observed()
    at = datetime.now(UTC)
    store.record_cluster(ClusterIdentity("kept", "gke", "p", "l", "kept"), pools, [], at)
    store.record_cluster(ClusterIdentity("c0", "gke", "p", "l", "c0"), pools, [], at)
    refused = [ObservedPool(dataclasses.replace(pools[0].state, name=None), pools[0].capacity)]  # NOT NULL
    calls = {
        **{f"c{i}": (ClusterIdentity(f"c{i}", "gke", "p", "l", f"c{i}"), pools, at) for i in range(20)},
        "kept": (ClusterIdentity("kept", "gke", "p", "l", "kept"), refused, at + timedelta(seconds=1)),
        "stale": (ClusterIdentity("c0", "gke", "p", "l", "c0"), [], at - timedelta(days=1)),
    }
    outcomes: dict[str, object] = {}

    def record(name: str) -> None:
        identity, listed, when = calls[name]
        try:
            outcomes[name] = store.record_cluster(identity, listed, [], when)
        except Exception as error:  # which error, the test looks at
            outcomes[name] = error

    _in_one_batch(store, [lambda n=name: record(n) for name in calls])

    assert isinstance(outcomes.pop("kept"), IntegrityError)
    assert outcomes.pop("stale") is False
    assert outcomes == {f"c{i}": True for i in range(20)}
    live = store.live_pools()
    names = {pool.state.name for pool in pools}
    assert {(p["cluster"], p["pool"]) for p in live} == {
        (cluster, name) for cluster in ["kept", *(f"c{i}" for i in range(20))] for name in names
    }


def test_a_refused_listing_fails_alone_with_the_database_s_words_and_nothing_else_said(
    catalog_url: str, caplog: pytest.LogCaptureFixture
):
    """A listing whose rows the database refuses (here, in a statement sent without waiting for
    the one before it, on PostgreSQL) is one IntegrityError with the database's own words, its
    cluster's rows as they were, no warning logged by the driver; the next write goes through."""
    import dataclasses

    from sqlalchemy.exc import IntegrityError

    from provisioner.catalog.database import reason_of

    store = Store(catalog_url)
    store.migrate()
    pools, at = observed(), datetime.now(UTC)
    store.record_cluster(IDENTITY, pools, [], at)
    refused = ObservedPool(dataclasses.replace(pools[0].state, name=None), pools[0].capacity)  # NOT NULL
    with caplog.at_level("WARNING"), pytest.raises(IntegrityError) as caught:
        store.record_cluster(IDENTITY, [*pools[1:], refused], [], at + timedelta(seconds=1))
    assert "null" in reason_of(caught.value).lower() and "name" in reason_of(caught.value)
    assert caplog.records == []
    assert [p["pool"] for p in store.live_pools()] == sorted(p.state.name for p in pools)
    assert store.record_cluster(IDENTITY, pools[1:], [], at + timedelta(seconds=2))
    assert [p["pool"] for p in store.live_pools()] == sorted(p.state.name for p in pools[1:])


def test_a_batch_is_written_in_shared_statements_with_the_rows_one_at_a_time_would_write(catalog_url: str):
    """Twelve clusters queued together are written by a few statements that each cover them all,
    and leave the rows twelve writes one after another leave: pools gone, adopted, allocation
    kept stale, drift, and a stale listing refused."""
    from sqlalchemy import event

    store = Store(catalog_url)
    store.migrate()
    pools = observed()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    later = start + timedelta(hours=1)
    drift = [DriftFinding(pools[0].state.name, "changed", [{"field": "nodes", "fleet": 2, "cloud": 1}])]
    allocation = {p.state.name: Allocation(nodes=2, advertised=8, allocated=3) for p in pools}

    def first(name: str) -> None:
        store.record_cluster(
            ClusterIdentity(name, "gke", "p", "l", name), pools, [], start, allocation=allocation
        )

    def second(name: str) -> bool:
        when = start - timedelta(days=1) if name.endswith("-stale") else later  # an older listing
        identity = ClusterIdentity(name, "gke", "p", "l", name)
        adopted = [pools[0].state.name]
        return store.record_cluster(identity, pools[:1], drift, when, allocation=None, adopted=adopted)

    names = [f"c{i}" for i in range(11)] + ["c-stale"]
    for name in names:
        first(f"one-{name}")
        first(f"all-{name}")
    alone = {name: second(f"one-{name}") for name in names}

    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    together: dict[str, bool] = {}
    _in_one_batch(store, [lambda n=name: together.__setitem__(n, second(f"all-{n}")) for name in names])

    assert together == alone == {**dict.fromkeys(names[:-1], True), "c-stale": False}
    written = [s for s in statements if not s.lstrip().upper().startswith(("SAVEPOINT", "RELEASE", "BEGIN"))]
    assert len(written) <= 10, written  # one per kind of row (and a read of the rows held), not per cluster

    def rows(prefix: str) -> list[tuple]:
        found = [
            {**p, "cluster": p["cluster"].removeprefix(prefix)}
            for name in names
            for p in store.pools_ever(f"{prefix}{name}")
        ]
        drifted = [
            {**d, "cluster": d["cluster"].removeprefix(prefix)}
            for d in store.drift()
            if d["cluster"].startswith(prefix)
        ]
        return sorted(map(repr, found)) + sorted(map(repr, drifted))

    assert rows("all-") == rows("one-")
    gone = [p for p in store.pools_ever("all-c0") if p["pool"] == pools[1].state.name]
    assert gone and gone[0]["deleted_at"] is not None
    kept = [p for p in store.pools_ever("all-c-stale") if p["deleted_at"] is None]
    assert len(kept) == len(pools)  # the stale listing changed nothing


def _in_one_batch(store: Store, writes: list[Callable[[], object]]) -> None:
    """Each write on a thread of its own, every writer held back until all have queued: the
    store then writes them in one batch."""
    blocker = threading.Lock()
    blocker.acquire()
    store._writer = _Holding(blocker, store._writer)
    threads = [threading.Thread(target=write) for write in writes]
    for thread in threads:
        thread.start()
    while len(store._queue) < len(writes):
        threading.Event().wait(0.01)
    blocker.release()
    for thread in threads:
        thread.join()
    store._writer = store._writer.inner


class _Holding:
    """A lock that first waits for `gate`: the test holds writers back until all have queued."""

    def __init__(self, gate: threading.Lock, inner: object):
        self.gate, self.inner = gate, inner

    def __enter__(self) -> None:
        with self.gate:
            pass
        self.inner.__enter__()  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)  # type: ignore[attr-defined]


def test_on_sqlite_reads_never_wait_for_a_writer(tmp_path: Path):
    """WAL lets readers read while one writes: a read takes no write lock, so neither a writer
    mid-transaction nor another reader (`catalog serve`'s many threads) makes it wait."""
    path = tmp_path / "catalog.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    store.record_cluster(IDENTITY, observed(), [], datetime.now(UTC))
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a sync's write transaction, holding the write lock
    read: list[object] = []
    reader = threading.Thread(
        target=lambda: read.extend([store.live_pools(), store.clusters(), store.changes(), store.drift()])
    )
    reader.start()
    reader.join(timeout=30)  # a read that waited for the lock would wait the busy timeout: 60 s
    waited = reader.is_alive()
    writer.execute("ROLLBACK")
    reader.join()
    assert not waited
    assert [p["pool"] for p in read[0]] == ["a100-mig", "l4-timeshare"]


def test_a_listing_that_changes_nothing_rewrites_no_pool_row_yet_each_is_seen_again(catalog_url: str):
    """A stable fleet's nightly sync: no pool row is written, yet their last_seen moves; a pool
    that changed is written and one that is gone is marked gone, last seen in the listing before."""
    import dataclasses

    from sqlalchemy import event

    store = Store(catalog_url)
    store.migrate()
    two = observed()
    third = ObservedPool(dataclasses.replace(two[1].state, name="third"), two[1].capacity)
    pools = [*two, third]
    who = ClusterIdentity("c", "gke", "p", "l", "c")
    start = datetime(2026, 11, 1, tzinfo=UTC)
    store.record_cluster(who, pools, [], start)
    before = {p["pool"]: p for p in store.pools_ever("c")}

    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    store.record_cluster(who, pools, [], start + timedelta(hours=1))
    written = [s for s in statements if s.lstrip().upper().startswith(("INSERT INTO POOLS", "UPDATE POOLS"))]
    assert all("allocation_stale" in s for s in written), written  # (no allocation was asked)
    again = {p["pool"]: p for p in store.pools_ever("c")}
    assert again == {
        name: {**row, "last_seen": (start + timedelta(hours=1)).isoformat()} for name, row in before.items()
    }

    statements.clear()
    bigger = dataclasses.replace(pools[0].state.scaling, max=pools[0].state.scaling.max + 1)
    changed = dataclasses.replace(pools[0].state, scaling=bigger)
    later = start + timedelta(hours=2)
    store.record_cluster(who, [ObservedPool(changed, pools[0].capacity), pools[1]], [], later)
    assert [s for s in statements if s.lstrip().upper().startswith("INSERT INTO POOLS")]
    now_rows = {p["pool"]: p for p in store.pools_ever("c")}
    assert now_rows[pools[1].state.name]["last_seen"] == later.isoformat()
    assert now_rows[pools[1].state.name]["deleted_at"] is None
    assert all(now_rows[p.state.name]["deleted_at"] == later.isoformat() for p in pools[2:])
    seen_before = (start + timedelta(hours=1)).isoformat()
    assert all(now_rows[p.state.name]["last_seen"] == seen_before for p in pools[2:])
    assert now_rows[pools[0].state.name]["deleted_at"] is None
    assert now_rows[pools[0].state.name]["max_nodes"] == bigger.max


@pytest.mark.parametrize("catalog_url", ["postgresql"], indirect=True)
def test_on_postgresql_a_batch_takes_six_round_trips_whatever_its_size(catalog_url: str, tmp_path: Path):
    """Each round trip of the writer is a wait for the database and, in a process busy listing,
    for the interpreter lock after it. A batch, its clusters seen again or rewritten, takes six:
    the pooled connection's liveness check, BEGIN, the clusters' upsert, the read of their rows,
    every other statement at once, and COMMIT. libpq's own trace counts them (a ReadyForQuery
    ends each)."""
    import dataclasses

    from psycopg import pq
    from sqlalchemy import event

    store = Store(catalog_url)
    store.migrate()
    pools = observed()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    names = [f"c{i}" for i in range(12)]
    for name in names:
        store.record_cluster(ClusterIdentity(name, "gke", "p", "l", name), pools, [], start)
    store.engine.dispose()
    connections: list[Any] = []
    event.listen(
        store.engine.pool, "connect", lambda dbapi_connection, _: connections.append(dbapi_connection)
    )
    with store.engine.connect():  # the one connection the writer will take from the pool
        pass
    trace = tmp_path / "libpq.trace"

    def round_trips(listed: list[ObservedPool], when: datetime) -> int:
        (pgconn,) = [c.pgconn for c in connections]
        with trace.open("w") as out:
            pgconn.trace(out.fileno())
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
            writes = [
                lambda n=n: store.record_cluster(ClusterIdentity(n, "gke", "p", "l", n), listed, [], when)
                for n in names
            ]
            _in_one_batch(store, writes)
            pgconn.untrace()  # flushes what libpq buffered
        return sum("ReadyForQuery" in line for line in trace.read_text().splitlines())

    assert round_trips(pools, start + timedelta(hours=1)) == 6  # seen again
    flipped = dataclasses.replace(pools[0].state, spot=not pools[0].state.spot)
    assert round_trips([ObservedPool(flipped, pools[0].capacity)], start + timedelta(hours=2)) == 6
    assert sorted((p["cluster"], p["spot"]) for p in store.live_pools()) == sorted(
        (n, flipped.spot) for n in names
    )


def test_migration_0007_upgrades_a_catalog_without_losing_its_rows(catalog_url: str):
    """A catalog at 0006 (before pools kept their autoscaler hints) with pools and allocation in
    it: upgraded, every row is kept as it was, the new keys NULL until the next sync fills them."""
    from alembic import command
    from alembic.config import Config

    from provisioner.catalog.database import MIGRATIONS

    store = Store(catalog_url)
    store.migrate()
    pools, at = observed(), datetime.now(UTC)
    allocation = {pools[0].state.name: Allocation(nodes=1, advertised=7, allocated=2)}
    store.record_cluster(IDENTITY, pools, [], at, allocation=allocation)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0006")
        columns = {c["name"] for c in conn.dialect.get_columns(conn, "pools")}
        assert not columns & {"autoscaler_hints", "grows_from_zero"}
        before = conn.execute(text("SELECT * FROM pools ORDER BY id")).mappings().all()
    store.migrate()
    with store.engine.begin() as conn:
        after = conn.execute(text("SELECT * FROM pools ORDER BY id")).mappings().all()
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [HEAD]
    assert [{k: v for k, v in row.items() if k in before[0]} for row in after] == [dict(r) for r in before]
    assert {(row["autoscaler_hints"], row["grows_from_zero"]) for row in after} == {(None, None)}
    assert len(after) == len(pools)
    # The next listing fills them.
    store.record_cluster(IDENTITY, pools, [], at + timedelta(seconds=1))
    assert {p["grows_from_zero"] for p in store.live_pools()} == {True}


DRA = ClusterIdentity("azure-dra", "aks", "sub", "ml", "ml-aks")


def test_migration_0008_gives_rows_written_before_the_device_plugin_and_goes_back_down(catalog_url: str):
    """A catalog at 0007 (before pools kept how GPUs reach their pods) with pools and allocation in
    it: upgraded, every row is kept and reads device-plugin (the tool compiled no DRA pool then);
    the next listing writes what it reads back, dra for a DRA pool; downgraded, the column goes."""
    from alembic import command
    from alembic.config import Config

    from provisioner.catalog.database import MIGRATIONS

    store = Store(catalog_url)
    store.migrate()
    pools, at = observed(), datetime.now(UTC)
    allocation = {pools[0].state.name: Allocation(nodes=1, advertised=7, allocated=2)}
    store.record_cluster(IDENTITY, pools, [], at, allocation=allocation)
    store.record_cluster(DRA, observed("dra.yaml", "azure-dra"), [], at)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0007")
        columns = {c["name"] for c in conn.dialect.get_columns(conn, "pools")}
        assert "allocation_mode" not in columns
        before = conn.execute(text("SELECT * FROM pools ORDER BY id")).mappings().all()
    store.migrate()
    with store.engine.begin() as conn:
        after = conn.execute(text("SELECT * FROM pools ORDER BY id")).mappings().all()
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [HEAD]
    assert [{k: v for k, v in row.items() if k in before[0]} for row in after] == [dict(r) for r in before]
    assert {row["allocation_mode"] for row in after} == {"device-plugin"}
    # The next listings write what each pool is.
    store.record_cluster(IDENTITY, pools, [], at + timedelta(seconds=1))
    store.record_cluster(DRA, observed("dra.yaml", "azure-dra"), [], at + timedelta(seconds=1))
    assert {(p["cluster"], p["pool"]): p["allocation_mode"] for p in store.live_pools()} == {
        ("gcp-ml", "a100-mig"): "device-plugin",
        ("gcp-ml", "l4-timeshare"): "device-plugin",
        ("azure-dra", "a100dra"): "dra",
        ("azure-dra", "t4drats"): "dra",
    }
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0007")
        assert "allocation_mode" not in {c["name"] for c in conn.dialect.get_columns(conn, "pools")}
        assert len(conn.execute(text("SELECT id FROM pools")).all()) == len(after)


def test_catalog_ls_shows_each_pool_s_allocation_mode_once_a_dra_pool_is_listed(catalog_url: str):
    """`catalog ls --json` always carries allocation_mode; the table gains its column only where a
    DRA pool is listed, so a catalog of device-plugin pools keeps its narrower table."""
    store = Store(catalog_url)
    store.migrate()
    at = datetime.now(UTC)
    store.record_cluster(IDENTITY, observed(), [], at)
    plugin_only = _ls(catalog_url)
    assert plugin_only.exit_code == 0, plugin_only.output
    assert "allocation" not in plugin_only.stdout
    store.record_cluster(DRA, observed("dra.yaml", "azure-dra"), [], at)
    listed = CliRunner().invoke(
        main, ["catalog", "ls", "--catalog", catalog_url, "--json"], env={"PROVISIONER_SANDBOX": ""}
    )
    assert listed.exit_code == 0, listed.output
    assert {r["pool"]: r["allocation_mode"] for r in json.loads(listed.stdout)} == {
        "a100-mig": "device-plugin",
        "l4-timeshare": "device-plugin",
        "a100dra": "dra",
        "t4drats": "dra",
    }
    assert "allocation" in _ls(catalog_url).stdout  # the column's header, however wide the terminal
    console = Console(record=True, width=240)
    console.print(pools_table(store.live_pools()))
    rows = {
        cells[2]: cells[7]
        for line in console.export_text().splitlines()
        if len(cells := [c.strip() for c in line.strip("│┃ ").split("│")]) == 11
    }
    assert rows == {
        "a100-mig": "device-plugin",
        "l4-timeshare": "device-plugin",
        "a100dra": "dra",
        "t4drats": "dra",
    }
