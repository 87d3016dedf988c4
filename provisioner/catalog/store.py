"""Reads and writes the catalog. Each cluster's listing is written whole or not at all (listings
that queue meanwhile share a transaction; should one fail, each is written again in a savepoint
of its own); concurrent writers never corrupt it: SQLite serialises them (BEGIN IMMEDIATE),
PostgreSQL locks the cluster's row (the upsert), and a listing older than the one already stored
is not written over it. A catalog that cannot be opened is a CatalogError naming the URL
(redacted) and what failed."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    DateTime,
    Engine,
    Integer,
    and_,
    any_,
    bindparam,
    case,
    create_engine,
    delete,
    event,
    exc,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from provisioner.capacity import Capacity
from provisioner.catalog.models import ChangeRow, ClusterRow, DriftRow, PoolRow, SyncRunRow
from provisioner.catalog.url import CatalogError
from provisioner.pooljson import observed_json
from provisioner.pools import PoolState

MIGRATIONS = Path(__file__).with_name("migrations")
# pg_advisory_xact_lock key that serialises migrations: first uses at once (sync pods of one
# CronJob) would otherwise race to create the same tables. A constant no other lock uses.
MIGRATION_LOCK_KEY = 0x70726F765F6D6967  # "prov_mig"
EXAMPLE_URLS = "sqlite:///PATH or postgresql+psycopg://USER@HOST/DATABASE"
# The execution option that marks a connection as one that only reads (Store.reads).
READS_ONLY = "catalog_reads_only"


def default_url(sandbox: Path | None = None) -> str:
    """PROVISIONER_CATALOG, else a SQLite file: DIR/catalog.db with a sandbox, or in XDG_DATA_HOME."""
    if url := os.environ.get("PROVISIONER_CATALOG"):
        return url
    if sandbox is not None:
        return f"sqlite:///{sandbox / 'catalog.db'}"
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{data / 'provisioner' / 'catalog.db'}"


@dataclass(frozen=True)
class ClusterIdentity:
    name: str
    cloud: str
    account: str
    location: str
    cluster: str
    in_fleet: bool = True


@dataclass(frozen=True)
class ObservedPool:
    state: PoolState
    capacity: Capacity


@dataclass(frozen=True)
class Allocation:
    """What Kubernetes says of a pool: its nodes, and the slices they advertise and pods hold."""

    nodes: int
    advertised: int
    allocated: int


class _PendingWrite:
    """One record_cluster call's listing, queued for the next batch, and what became of it."""

    def __init__(
        self,
        identity: ClusterIdentity,
        pools: Sequence[ObservedPool],
        drift: Sequence[DriftFinding],
        observed_at: datetime,
        *,
        allocation: Mapping[str, Allocation] | None,
        adopted: Collection[str],
    ):
        self.identity, self.pools, self.drift = identity, pools, drift
        self.observed_at, self.allocation, self.adopted = observed_at, allocation, adopted
        self.done = threading.Event()
        self.stored = False
        self.previous: datetime | None = None  # the listing time its cluster had before this one
        self.error: BaseException | None = None


@dataclass(frozen=True)
class DriftFinding:
    pool: str
    kind: str  # missing | extra | changed | conflict
    fields: list[dict[str, Any]]


def utc(moment: datetime | None) -> datetime | None:
    """SQLite hands datetimes back without their zone; every time stored is UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def now() -> datetime:
    return datetime.now(UTC)


View = TypeVar("View")


class Snapshot:
    """The live pools as of one state of the catalog (Store.snapshot), shared by every reader and
    thread until the catalog changes: never modify them. A view built from them (an index, an
    encoded response) is built once per snapshot, by `derived`."""

    def __init__(self, serial: int, pools: Sequence[dict[str, Any]]):
        self.serial = serial  # the catalog's change counter when the pools were read
        self.pools = tuple(pools)
        self._views: dict[Callable[..., Any], Any] = {}
        self._lock = threading.Lock()

    def derived(self, build: Callable[[Sequence[dict[str, Any]]], View]) -> View:
        """build(pools), made the first time it is asked for (by one thread; the others wait for it)."""
        with self._lock:
            if build not in self._views:
                self._views[build] = build(self.pools)
            return self._views[build]  # type: ignore[no-any-return]


class Store:
    def __init__(self, url: str):
        self.url = url  # shown only through url.redacted: it may carry a password
        with _url_errors(url):
            self.engine = _engine(url)
            _dropped_in_forked_children(self.engine)
        # Reads go through this: on SQLite they take no write lock, so they never wait for one another.
        self.reads = self.engine.execution_options(**{READS_ONLY: True})
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        self._insert = dialect.insert
        self._sql = _Statements(dialect)
        # One writer per process, writing in one transaction every listing queued meanwhile: SQLite
        # takes one writer at a time anyway (better queued here than polling its lock), and on
        # PostgreSQL one commit for many clusters beats a commit (a WAL flush) for each.
        self._writer: Any = threading.Lock()
        self._queue: list[_PendingWrite] = []  # clusters waiting to be written (record_cluster)
        self._queue_lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._snapshot_lock = threading.Lock()

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (a no-op when it is there)."""
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with _database_errors(self.url), self.engine.begin() as connection:
            # One migrator at a time; the others wait, then find the schema at head. SQLite's
            # BEGIN IMMEDIATE already serialises them; PostgreSQL holds this lock to the commit.
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    # Sync runs

    def start_run(self, shard: str | None) -> int:
        with _database_errors(self.url), self.engine.begin() as conn:
            row = conn.execute(
                self._insert(SyncRunRow)
                .values(
                    started_at=now(),
                    shard=shard,
                    clusters_ok=0,
                    clusters_failed=0,
                    pools_seen=0,
                    drift=0,
                    status="running",
                )
                .returning(SyncRunRow.id)
            )
            return row.scalar_one()

    def finish_run(
        self, run_id: int, *, ok: int, failed: int, pools: int, drift: int, error: str | None = None
    ) -> None:
        """Close the run: failed if a cluster failed or the run itself crashed (with `error`)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(SyncRunRow)
                .where(SyncRunRow.id == run_id)
                .values(
                    finished_at=now(),
                    clusters_ok=ok,
                    clusters_failed=failed,
                    pools_seen=pools,
                    drift=drift,
                    status="failed" if failed or error else "ok",
                    error=error,
                )
            )

    # Clusters

    def record_cluster(
        self,
        identity: ClusterIdentity,
        pools: Sequence[ObservedPool],
        drift: Sequence[DriftFinding],
        observed_at: datetime,
        *,
        allocation: Mapping[str, Allocation] | None = None,
        adopted: Collection[str] = (),
    ) -> bool:
        """Write one cluster's listing in one transaction; False if a newer listing is stored.

        `allocation`, per pool name, is what the cluster's Kubernetes API said; None where it could
        not be asked: the figures stored before are kept, marked stale. `adopted` names the pools
        an apply just adopted; a pool the catalog saw unowned and now sees owned was adopted too,
        whoever did it."""
        write = _PendingWrite(identity, pools, drift, observed_at, allocation=allocation, adopted=adopted)
        with self._queue_lock:
            self._queue.append(write)
        with self._writer:
            if not write.done.is_set():  # else a writer before this one wrote it in its batch
                self._write_queued()
        write.done.wait()  # PostgreSQL: another thread's batch may hold it, still writing
        if write.error is not None:
            raise write.error
        return write.stored

    def _write_queued(self) -> None:
        """Write every queued cluster in one transaction (one commit, one fsync, for all the
        clusters that queued meanwhile, so a sync's many listings are not written one disk flush
        at a time behind SQLite's single writer), in a few statements that each cover them all.
        Should the database refuse a listing's rows, that transaction rolls back and each
        cluster is written again in its own savepoint of the next: the refused one rolls back
        alone and its caller gets the error, as with a transaction of its own."""
        with self._queue_lock:
            batch, self._queue[:] = list(self._queue), []
        if not batch:
            return
        # By name: two processes writing the same clusters lock their rows in the same order (a
        # stable sort, so two listings of one cluster keep the order they came in).
        batch.sort(key=lambda w: w.identity.name)
        try:
            if not self._wrote_together(batch):
                self._write_one_by_one(batch)
        except BaseException as error:  # the database failed, not a listing: nothing was written
            for write in batch:
                write.error = write.error or error
            if not isinstance(error, Exception):
                raise
        finally:
            for write in batch:
                write.done.set()

    def _wrote_together(self, batch: Sequence[_PendingWrite]) -> bool:
        """Whether the batch is written, in shared statements; False, all of it rolled back,
        where a statement failed on what a listing holds."""
        if len({w.identity.name for w in batch}) < len(batch):
            return False  # one upsert may not touch a row twice; a later listing must see the earlier's
        try:
            with self.engine.connect() as conn:
                self._write_together(conn, batch, counted=True)
                conn.commit()
        except exc.OperationalError:
            raise  # the database itself (gone, locked): writing one by one would wait for it again
        except exc.SQLAlchemyError:
            return False
        return True

    def _write_one_by_one(self, batch: Sequence[_PendingWrite]) -> None:
        with self.engine.connect() as conn:
            for write in batch:
                try:
                    with conn.begin_nested():
                        self._write_together(conn, [write])
                except exc.SQLAlchemyError as error:
                    write.error = error
            conn.execute(self._sql.changed)  # last: its row lock is held only until the commit
            conn.commit()

    def _write_together(
        self, conn: Connection, batch: Sequence[_PendingWrite], counted: bool = False
    ) -> None:
        """The batch's listings, each statement once over all its clusters; `stored` says, per
        listing, whether it was written (not when a newer listing of its cluster is stored).
        `counted`: the batch is the whole transaction, and the change is counted here, in the
        same round trip as every other statement that returns no rows."""
        upserted = conn.execute(*self._sql.clusters_upsert([w.identity for w in batch]))
        stored = {row.name: (row.id, utc(row.observed_at)) for row in upserted}
        fresh = []
        for write in batch:
            cluster_id, write.previous = stored[write.identity.name]
            # Else a newer listing is stored.
            write.stored = write.previous is None or write.previous <= write.observed_at
            if write.stored:
                fresh.append((cluster_id, write))
        pools, rewritten = self._compared(conn, fresh) if fresh else ([], [])
        with _pipelined(conn):  # none of these returns rows
            if fresh:
                self._write_fresh(conn, fresh, pools, rewritten)
            if counted:
                conn.execute(self._sql.changed)  # last: its row lock is held only until the commit

    def _compared(
        self, conn: Connection, fresh: Sequence[tuple[int, _PendingWrite]]
    ) -> tuple[list[dict[str, Any]], list[tuple[int, _PendingWrite]]]:
        """The pool rows to upsert, and the clusters whose live rows they replace (a live pool
        such a cluster did not list is gone). A cluster whose live rows already hold what was
        listed, no more and no less, is left as it is: its pools are seen again by its new
        listing time alone (_pools_query), so a stable fleet's nightly sync rewrites no pool row
        for its listing."""
        held: dict[int, dict[str, tuple[Any, ...]]] = {}
        for row in conn.execute(self._sql.live_pools, {"cids": [c for c, _ in fresh]}).all():
            held.setdefault(row.cluster_id, {})[row.name] = tuple(row[1:])
        pools, rewritten = [], []
        for c, w in fresh:
            shown = [observed_json(p.state, p.capacity) for p in w.pools]
            as_held = {pool["pool"]: tuple(pool[key] for key in LISTED_KEYS) for pool in shown}
            # A name listed twice goes to the upsert, which refuses it as before.
            if w.adopted or len(as_held) != len(shown) or held.get(c, {}) != as_held:
                pools += [_pool_values(c, pool, w.observed_at, pool["pool"] in w.adopted) for pool in shown]
                if c in held:
                    rewritten.append((c, w))
        return pools, rewritten

    def _write_fresh(
        self,
        conn: Connection,
        fresh: Sequence[tuple[int, _PendingWrite]],
        pools: Sequence[dict[str, Any]],
        rewritten: Sequence[tuple[int, _PendingWrite]],
    ) -> None:
        ids, stamp = [c for c, _ in fresh], now()
        conn.execute(*self._sql.clusters_ok([(c, w.observed_at) for c, w in fresh], stamp))
        if pools:
            conn.execute(self._sql.pool_upsert, pools)
        if rewritten:
            conn.execute(
                self._sql.pools_gone,
                [{"cid": c, "listed_at": w.observed_at, "before": w.previous} for c, w in rewritten],
            )
        if unasked := [c for c, w in fresh if w.allocation is None]:
            conn.execute(self._sql.allocation_stale, {"cids": unasked})
        if allocation := [row for c, w in fresh for row in _allocation_rows(c, w)]:
            conn.execute(self._sql.allocation, allocation)
        conn.execute(self._sql.drift_clear, {"cids": ids})
        if drift := [row for c, w in fresh for row in _drift_rows(c, w)]:
            conn.execute(self._sql.drift_insert, drift)

    def record_failure(self, identity: ClusterIdentity, error: str) -> None:
        """The cluster could not be listed: keep every pool row, record the error."""
        with self.engine.begin() as conn:
            cluster_id = conn.execute(*self._sql.clusters_upsert([identity])).one().id
            conn.execute(
                update(ClusterRow)
                .where(ClusterRow.id == cluster_id)
                .values(last_sync_at=now(), status="error", last_error=error)
            )
            conn.execute(self._sql.changed)

    # Reads

    def live_pools(self, cloud: str | None = None, cluster: str | None = None) -> list[dict[str, Any]]:
        if _unstorable(cloud, cluster):
            return []
        query = _pools_query().where(PoolRow.deleted_at.is_(None))
        if cloud:
            query = query.where(ClusterRow.cloud == cloud)
        if cluster:
            query = query.where(ClusterRow.name == cluster)
        with self.reads.connect() as conn:
            return [_pool_dict(row) for row in conn.execute(query)]

    def changes(self) -> int:
        """The catalog's change counter: it grows with every write that commits a change to the
        clusters or their pools, from any process."""
        with self.reads.connect() as conn:
            return int(conn.execute(self._sql.serial).scalar_one())

    def snapshot(self) -> Snapshot:
        """The live pools, as `live_pools()`, read again only when the catalog has changed since
        the last read: one query of the change counter decides. Shared: never modify them."""
        serial = self.changes()
        with self._snapshot_lock:  # one thread reads the changed catalog; the others wait for it
            # Only forward: a thread that read the counter before another write keeps the newer one.
            if self._snapshot is None or self._snapshot.serial < serial:
                # Read after the counter: the pools are at least as new as it, so no write goes unseen.
                self._snapshot = Snapshot(serial, self.live_pools())
            return self._snapshot

    def pools_ever(self, cluster: str) -> list[dict[str, Any]]:
        """Every pool row of a cluster, deleted ones included (for audits and tests)."""
        with self.reads.connect() as conn:
            return [_pool_dict(row) for row in conn.execute(_pools_query().where(ClusterRow.name == cluster))]

    def clusters(self) -> list[dict[str, Any]]:
        with self.reads.connect() as conn:
            rows = conn.execute(select(ClusterRow).order_by(ClusterRow.name)).mappings()
            return [
                {
                    "cluster": r["name"],
                    "cloud": r["cloud"],
                    "account": r["account"],
                    "location": r["location"],
                    "in_fleet": r["in_fleet"],
                    "status": r["status"],
                    "last_error": r["last_error"],
                    "last_sync_at": _iso(r["last_sync_at"]),  # the last attempt, good or not
                    "observed_at": _iso(r["observed_at"]),  # when its stored pools were listed
                }
                for r in rows
            ]

    def drift(self, cluster: str | None = None) -> list[dict[str, Any]]:
        if _unstorable(cluster):
            return []
        query = (
            select(ClusterRow.name, DriftRow.pool, DriftRow.kind, DriftRow.fields, DriftRow.detected_at)
            .join(DriftRow, DriftRow.cluster_id == ClusterRow.id)
            .order_by(ClusterRow.name, DriftRow.pool)
        )
        if cluster:
            query = query.where(ClusterRow.name == cluster)
        with self.reads.connect() as conn:
            return [
                {
                    "cluster": r.name,
                    "pool": r.pool,
                    "kind": r.kind,
                    "fields": r.fields,
                    "detected_at": _iso(r.detected_at),
                }
                for r in conn.execute(query)
            ]

    def runs(self) -> list[dict[str, Any]]:
        with self.reads.connect() as conn:
            return [dict(r) for r in conn.execute(select(SyncRunRow).order_by(SyncRunRow.id)).mappings()]


def _dropped_in_forked_children(engine: Engine) -> None:
    """A forked child (provisioner.spread's helpers) never uses this process's database
    connections, nor closes them under it: its copy of the pool is dropped unclosed, as
    SQLAlchemy advises for os.fork."""
    engine_ref = weakref.ref(engine)

    def drop() -> None:
        copied = engine_ref()
        if copied is not None:
            copied.dispose(close=False)

    os.register_at_fork(after_in_child=drop)


@contextlib.contextmanager
def _pipelined(conn: Connection) -> Iterator[None]:
    """Through psycopg, the statements made inside are sent without waiting for each one's answer
    (its pipeline mode): they take one round trip, not one each. Only for statements whose rows
    and row counts nobody reads: they come after SQLAlchemy has looked. A statement that fails is
    raised as a SQLAlchemy error, at a later statement of the block or at its end (reason_of
    gives the failing statement's own words); the rest of the block is not run."""
    if conn.dialect.driver != "psycopg":
        yield
        return
    import psycopg

    if not psycopg.Pipeline.is_supported():  # libpq older than 14
        yield
        return
    failed: exc.DBAPIError | None = None
    try:
        with conn.connection.driver_connection.pipeline():
            try:
                yield
            except exc.DBAPIError as error:  # kept from the pipeline's end, which would log it again
                failed = error
    except psycopg.Error as error:  # the statements' end: psycopg's own error, or a later echo of `failed`
        if failed is None:
            raise exc.DBAPIError.instance(None, None, error, psycopg.Error) from error
    if failed is not None:
        raise failed


def _cluster_values(identity: ClusterIdentity) -> dict[str, Any]:
    return {**vars(identity), "status": "new"}


def _allocation_rows(cluster_id: int, write: _PendingWrite) -> list[dict[str, Any]]:
    return [
        {
            "cid": cluster_id,
            "pool": name,
            "nodes": a.nodes,
            "advertised": a.advertised,
            "allocated": a.allocated,
            "at": write.observed_at,
        }
        for name, a in (write.allocation or {}).items()
    ]


def _drift_rows(cluster_id: int, write: _PendingWrite) -> list[dict[str, Any]]:
    return [
        {
            "cluster_id": cluster_id,
            "pool": d.pool,
            "kind": d.kind,
            "fields": d.fields,
            "detected_at": write.observed_at,
        }
        for d in write.drift
    ]


def _in_batch(dialect: Any) -> Callable[[Any], Any]:
    """`column` is one of the batch's clusters (`cids`). On PostgreSQL, one array parameter: the
    statement's text is then the same for every batch, and psycopg parses a text once (an IN list
    of a hundred parameters is parsed anew, in Python, at every execution)."""
    if dialect is postgresql:
        ids = bindparam("cids", type_=postgresql.ARRAY(Integer))
        return lambda column: column == any_(ids)
    ids = bindparam("cids", expanding=True)
    return lambda column: column.in_(ids)


_IDENTITY = ("name", "cloud", "account", "location", "cluster", "in_fleet")  # a cluster's row, as listed


def _upsert_of(listed: Any) -> Any:
    """The insert of clusters `listed` as an upsert by name that returns each one's id, name
    and stored listing time. On PostgreSQL the update takes the cluster row's lock until the
    transaction ends."""
    return listed.on_conflict_do_update(
        index_elements=["name"], set_={column: listed.excluded[column] for column in _IDENTITY}
    ).returning(ClusterRow.id, ClusterRow.name, ClusterRow.observed_at)


def _from_arrays(ok: dict[str, Any]) -> tuple[Any, Any]:
    """PostgreSQL's upsert of a batch's clusters and its UPDATE marking them `ok`, each taking
    the batch as arrays, one a column. Their text is then the same for every batch: a VALUES list
    of seven parameters a cluster would be a new text for psycopg to parse, in Python, at every
    execution, and an UPDATE per cluster would be sent, and run, one by one."""
    given = (
        func.unnest(
            *(bindparam(c, type_=postgresql.ARRAY(ClusterRow.__table__.c[c].type)) for c in _IDENTITY)
        )
        .table_valued(*_IDENTITY)
        .render_derived()
    )
    upsert = _upsert_of(
        postgresql.insert(ClusterRow).from_select([*_IDENTITY, "status"], select(*given.c, literal("new")))
    )
    times = (
        func.unnest(
            bindparam("cids", type_=postgresql.ARRAY(Integer)),
            bindparam("ats", type_=postgresql.ARRAY(DateTime(timezone=True))),
        )
        .table_valued("id", "observed_at")
        .render_derived()
    )
    mark_ok = (
        update(ClusterRow).where(ClusterRow.id == times.c.id).values(observed_at=times.c.observed_at, **ok)
    )
    return upsert, mark_ok


class _Statements:
    """The writes, built once per store: building an upsert costs more CPU than running it."""

    def __init__(self, dialect: Any):
        insert = dialect.insert
        ok = {"last_sync_at": bindparam("now"), "status": "ok", "last_error": None}
        self._arrays = dialect is postgresql
        if self._arrays:
            self._clusters_upsert, self._clusters_ok = _from_arrays(ok)
        else:  # SQLite runs each row's statement in this process
            self._clusters_upsert = _upsert_of(insert(ClusterRow))
            self._clusters_ok = (
                update(ClusterRow)
                .where(ClusterRow.id == bindparam("cid"))
                .values(observed_at=bindparam("observed_at"), **ok)
            )
        # inline(): no RETURNING of the new row's key, which a one-row insert would add (and a
        # pipelined statement could not hand back in time).
        pool = insert(PoolRow).inline()
        values = [
            c.name
            for c in PoolRow.__table__.columns
            if c.name
            not in ("id", "cluster_id", "name", "first_seen", "deleted_at", "adopted_at", *ALLOCATION_COLUMNS)
        ]
        # A pool that comes back after being deleted is a new pool: it is first seen again now.
        revived = case((PoolRow.deleted_at.is_not(None), pool.excluded.first_seen), else_=PoolRow.first_seen)
        # Adopted now: by this apply (the row says so), or seen unowned before and owned now.
        adopted = case(
            (pool.excluded.adopted_at.is_not(None), pool.excluded.adopted_at),
            (PoolRow.deleted_at.is_not(None), None),
            (and_(~PoolRow.owned, pool.excluded.owned), pool.excluded.last_seen),
            else_=PoolRow.adopted_at,
        )
        self.pool_upsert = pool.on_conflict_do_update(
            index_elements=["cluster_id", "name"],
            set_={
                **{column: pool.excluded[column] for column in values},
                "first_seen": revived,
                "deleted_at": None,
                "adopted_at": adopted,
            },
        )
        in_batch = _in_batch(dialect)
        # What the batch's clusters hold now, read first: rows a listing would not change are left.
        self.live_pools = select(
            PoolRow.cluster_id, *(PoolRow.__table__.c[column] for column in _LISTED)
        ).where(in_batch(PoolRow.cluster_id), PoolRow.deleted_at.is_(None))
        # Gone: a live pool of a rewritten cluster that the upsert did not write (its last_seen is
        # older than this listing). It was last seen in the cluster's listing before this one.
        moment = DateTime(timezone=True)
        listed_at, before = bindparam("listed_at", type_=moment), bindparam("before", type_=moment)
        self.pools_gone = (
            update(PoolRow)
            .where(
                PoolRow.cluster_id == bindparam("cid"),
                PoolRow.deleted_at.is_(None),
                PoolRow.last_seen < listed_at,
            )
            .values(
                deleted_at=listed_at,
                last_seen=func.coalesce(before, PoolRow.last_seen),
            )
        )
        self.drift_clear = delete(DriftRow).where(in_batch(DriftRow.cluster_id))
        self.allocation = (
            update(PoolRow)
            .where(PoolRow.cluster_id == bindparam("cid"), PoolRow.name == bindparam("pool"))
            .values(
                k8s_nodes=bindparam("nodes"),
                slices_advertised=bindparam("advertised"),
                slices_allocated=bindparam("allocated"),
                allocation_at=bindparam("at"),
                allocation_stale=False,
            )
        )
        self.allocation_stale = (
            update(PoolRow)
            .where(
                in_batch(PoolRow.cluster_id), PoolRow.allocation_at.is_not(None), ~PoolRow.allocation_stale
            )
            .values(allocation_stale=True)
        )
        self.drift_insert = insert(DriftRow).inline()
        self.changed = update(ChangeRow).where(ChangeRow.id == 1).values(serial=ChangeRow.serial + 1)
        self.serial = select(ChangeRow.serial).where(ChangeRow.id == 1)

    def clusters_upsert(self, identities: Sequence[ClusterIdentity]) -> tuple[Any, Any]:
        """The statement, and its parameters, that insert or update the clusters and return
        each one's id, name and stored listing time (observed_at)."""
        if self._arrays:
            return self._clusters_upsert, {
                column: [getattr(i, column) for i in identities] for column in _IDENTITY
            }
        return self._clusters_upsert, [_cluster_values(i) for i in identities]

    def clusters_ok(self, listed: Sequence[tuple[int, datetime]], now: datetime) -> tuple[Any, Any]:
        """The statement, and its parameters, that store each listed cluster's (id, listing
        time) and mark it ok."""
        if self._arrays:
            return self._clusters_ok, {
                "cids": [c for c, _ in listed],
                "ats": [at for _, at in listed],
                "now": now,
            }
        return self._clusters_ok, [{"cid": c, "observed_at": at, "now": now} for c, at in listed]


# Written by the allocation statements, after the listing's upsert (which leaves them as they were).
ALLOCATION_COLUMNS = (
    "k8s_nodes",
    "slices_advertised",
    "slices_allocated",
    "allocation_at",
    "allocation_stale",
)
# Columns a listing's upsert writes by rules of their own (allocation; when a pool was adopted).
_KEPT = ("adopted_at", *ALLOCATION_COLUMNS)
# The pool table's columns for the keys of a pool's JSON (pooljson.observed_json) it names otherwise.
COLUMN_OF = {"pool": "name", "gpu": "gpu_model", "mig": "mig_profile"}
_KEY_OF = {column: key for key, column in COLUMN_OF.items()}
# The columns a listing writes, in the table's order (which `catalog ls --json` keeps).
_LISTED = tuple(
    c.name
    for c in PoolRow.__table__.columns
    if c.name not in ("id", "cluster_id", "first_seen", "last_seen", "deleted_at", *_KEPT)
)
# Their keys in a pool's JSON, in the same order.
LISTED_KEYS = tuple(_KEY_OF.get(column, column) for column in _LISTED)


def _pool_values(
    cluster_id: int, shown: Mapping[str, Any], observed_at: datetime, adopted: bool
) -> dict[str, Any]:
    """A pool's row, from its observed_json."""
    return {
        "cluster_id": cluster_id,
        **{column: shown[key] for column, key in zip(_LISTED, LISTED_KEYS, strict=True)},
        "first_seen": observed_at,
        "last_seen": observed_at,
        "deleted_at": None,
        "adopted_at": observed_at if adopted else None,
    }


def _pools_query() -> Any:
    """Pool rows with their cluster's name, cloud and status, in cluster then pool order. A live
    pool was last seen when its cluster was last listed: its row's last_seen only says when the
    row was last upserted by a listing (see Store._compared); a gone pool's says when it was last
    listed."""
    last_seen = case((PoolRow.deleted_at.is_(None), ClusterRow.observed_at), else_=PoolRow.last_seen)
    return (
        select(
            ClusterRow.name.label("cluster"),
            ClusterRow.cloud,
            ClusterRow.status.label("cluster_status"),
            *(c for c in PoolRow.__table__.columns if c.name != "last_seen"),
            last_seen.label("last_seen"),
        )
        .join(PoolRow, PoolRow.cluster_id == ClusterRow.id)
        .order_by(ClusterRow.name, PoolRow.name)
    )


def _pool_dict(row: Any) -> dict[str, Any]:
    """A pool row as `catalog ls --json` prints it: observed_json's keys, with its cluster and times."""
    pool = row._mapping
    return {
        "cluster": pool["cluster"],
        "cloud": pool["cloud"],
        **{key: pool[column] for column, key in zip(_LISTED, LISTED_KEYS, strict=True)},
        "first_seen": _iso(pool["first_seen"]),
        "last_seen": _iso(pool["last_seen"]),
        "deleted_at": _iso(pool["deleted_at"]),
        "adopted_at": _iso(pool["adopted_at"]),
        "cluster_status": pool["cluster_status"],
        "k8s_nodes": pool["k8s_nodes"],
        "slices_advertised": pool["slices_advertised"],
        "slices_allocated": pool["slices_allocated"],
        "allocation_at": _iso(pool["allocation_at"]),
        "allocation_stale": pool["allocation_stale"],
    }


def _unstorable(*names: str | None) -> bool:
    """A name no row holds on any backend: PostgreSQL refuses a NUL in text, even to compare it
    (a 503 for a filter from a URL), where SQLite just finds nothing."""
    return any(name and "\x00" in name for name in names)


def _iso(moment: datetime | None) -> str | None:
    moment = utc(moment)
    return moment.isoformat(timespec="seconds") if moment else None


def reason_of(error: BaseException) -> str:
    """The database's own words for a failed statement or connection: its first line, without
    SQLAlchemy's SQL and parameters, nor psycopg's "connection to server at ... failed:" preamble."""
    original = getattr(error, "orig", None) or error
    lines = str(original).strip().splitlines() or [type(original).__name__]
    return " ".join(_CONNECTION_PREAMBLE.sub("", lines[0]).split())


# psycopg's words before the server's own; SQLite's "NOT NULL constraint failed: t.c" is all its own.
_CONNECTION_PREAMBLE = re.compile(r"^(connection failed: )?connection to server (at|on socket) .*? failed: ")


@contextlib.contextmanager
def _url_errors(url: str) -> Iterator[None]:
    """A URL SQLAlchemy cannot use, as a CatalogError that says why."""
    try:
        yield
    except exc.NoSuchModuleError:
        kind = url.partition(":")[0].partition("+")[0]
        problem = f"no database kind {kind!r}; want e.g. {EXAMPLE_URLS}"
        raise CatalogError(url, "not a valid catalog URL", problem) from None
    except (exc.ArgumentError, ValueError):  # unparseable, or a port that is no number
        raise CatalogError(url, "not a valid catalog URL", f"want e.g. {EXAMPLE_URLS}") from None
    except ImportError as error:
        raise CatalogError(url, "no driver for this kind of database is installed", str(error)) from None


@contextlib.contextmanager
def _database_errors(url: str) -> Iterator[None]:
    """A database that cannot be reached or used, as a CatalogError that says which."""
    try:
        yield
    except exc.DBAPIError as error:
        reason = reason_of(error)
        if "database" in reason and "does not exist" in reason:
            problem = "no such database"
        elif "file is not a database" in reason:
            problem = "not a SQLite file"
        elif isinstance(error, exc.OperationalError):
            problem = "cannot connect"
        else:
            problem = "the database refused the catalog's schema"
        raise CatalogError(url, problem, reason) from None


def _make_parent(url: str, path: Path) -> None:
    """Make the SQLite file's directory, or say why it cannot be made."""
    existing = next(p for p in path.parents if p.exists())
    if not existing.is_dir():
        raise CatalogError(url, "cannot make its directory", f"{existing} is a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CatalogError(url, "cannot make its directory", f"{error.filename}: {error.strerror}") from None


def _engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1].partition("?")[0] if "///" in url else ""
        if path and path != ":memory:":
            if Path(path).is_dir():
                raise CatalogError(url, "not a SQLite file", "it is a directory")
            _make_parent(url, Path(path))
        engine = create_engine(url, connect_args={"timeout": 60})

        @event.listens_for(engine, "connect")
        def _connect(dbapi_connection: Any, _: Any) -> None:
            dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # A write takes the write lock up front: no upgrade deadlocks. A read takes none: in WAL
            # mode it reads its snapshot while one writes, and many read at once.
            reads_only = conn.get_execution_options().get(READS_ONLY, False)
            conn.exec_driver_sql("BEGIN" if reads_only else "BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=8)
