"""Reads and writes the catalog. Each cluster's listing is written whole or not at all (listings
that queue meanwhile share a transaction; should one fail, each is written again in a savepoint
of its own); concurrent writers never corrupt it: SQLite serialises them (BEGIN IMMEDIATE),
PostgreSQL locks the cluster's row (the upsert), and a listing older than the one already stored
is not written over it. A catalog that cannot be opened is a CatalogError naming the URL
(redacted) and what failed (database.py); the SQL it runs is statements.py's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, exc, select, update
from sqlalchemy.dialects import postgresql, sqlite

from provisioner.catalog.database import READS_ONLY, database_errors, migrate_schema, open_engine, pipelined
from provisioner.catalog.listing import Allocation, ClusterIdentity, DriftFinding, ObservedPool
from provisioner.catalog.models import ClusterRow, DriftRow, PoolRow, SyncRunRow
from provisioner.catalog.statements import (
    LISTED_KEYS,
    Statements,
    allocation_rows,
    drift_rows,
    iso,
    pool_dict,
    pool_values,
    pools_query,
    utc,
)
from provisioner.pooljson import observed_json


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
        self.engine = open_engine(url)
        # Reads go through this: on SQLite they take no write lock, so they never wait for one another.
        self.reads = self.engine.execution_options(**{READS_ONLY: True})
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        self._insert = dialect.insert
        self._sql = Statements(dialect)
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
        migrate_schema(self.engine, self.url)

    # Sync runs

    def start_run(self, shard: str | None) -> int:
        with database_errors(self.url), self.engine.begin() as conn:
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
        with pipelined(conn):  # none of these returns rows
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
        listing time alone (statements.pools_query), so a stable fleet's nightly sync rewrites no
        pool row for its listing."""
        held: dict[int, dict[str, tuple[Any, ...]]] = {}
        for row in conn.execute(self._sql.live_pools, {"cids": [c for c, _ in fresh]}).all():
            held.setdefault(row.cluster_id, {})[row.name] = tuple(row[1:])
        pools, rewritten = [], []
        for c, w in fresh:
            shown = [observed_json(p.state, p.capacity, w.identity.cloud) for p in w.pools]
            as_held = {pool["pool"]: tuple(pool[key] for key in LISTED_KEYS) for pool in shown}
            # A name listed twice goes to the upsert, which refuses it as before.
            if w.adopted or len(as_held) != len(shown) or held.get(c, {}) != as_held:
                pools += [pool_values(c, pool, w.observed_at, pool["pool"] in w.adopted) for pool in shown]
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
        if allocation := [row for c, w in fresh for row in allocation_rows(c, w.allocation, w.observed_at)]:
            conn.execute(self._sql.allocation, allocation)
        conn.execute(self._sql.drift_clear, {"cids": ids})
        if drift := [row for c, w in fresh for row in drift_rows(c, w.drift, w.observed_at)]:
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
        query = pools_query().where(PoolRow.deleted_at.is_(None))
        if cloud:
            query = query.where(ClusterRow.cloud == cloud)
        if cluster:
            query = query.where(ClusterRow.name == cluster)
        with self.reads.connect() as conn:
            return [pool_dict(row) for row in conn.execute(query)]

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
            return [pool_dict(row) for row in conn.execute(pools_query().where(ClusterRow.name == cluster))]

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
                    "last_sync_at": iso(r["last_sync_at"]),  # the last attempt, good or not
                    "observed_at": iso(r["observed_at"]),  # when its stored pools were listed
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
                    "detected_at": iso(r.detected_at),
                }
                for r in conn.execute(query)
            ]

    def runs(self) -> list[dict[str, Any]]:
        with self.reads.connect() as conn:
            return [dict(r) for r in conn.execute(select(SyncRunRow).order_by(SyncRunRow.id)).mappings()]


def _unstorable(*names: str | None) -> bool:
    """A name no row holds on any backend: PostgreSQL refuses a NUL in text, even to compare it
    (a 503 for a filter from a URL), where SQLite just finds nothing."""
    return any(name and "\x00" in name for name in names)
