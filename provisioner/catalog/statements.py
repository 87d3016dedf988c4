"""The catalog's SQL, built once per dialect: the statements a batch of listings is written with
(PostgreSQL's take the batch as arrays, so psycopg parses each text once), the query pools are
read with, and the rows each takes or gives. What to write, and when, is the store's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Integer, and_, any_, bindparam, case, delete, func, literal, select, update
from sqlalchemy.dialects import postgresql

from provisioner.catalog.listing import Allocation, ClusterIdentity, DriftFinding
from provisioner.catalog.models import ChangeRow, ClusterRow, DriftRow, PoolRow

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

_IDENTITY = ("name", "cloud", "account", "location", "cluster", "in_fleet")  # a cluster's row, as listed


class Statements:
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


def _in_batch(dialect: Any) -> Callable[[Any], Any]:
    """`column` is one of the batch's clusters (`cids`). On PostgreSQL, one array parameter: the
    statement's text is then the same for every batch, and psycopg parses a text once (an IN list
    of a hundred parameters is parsed anew, in Python, at every execution)."""
    if dialect is postgresql:
        ids = bindparam("cids", type_=postgresql.ARRAY(Integer))
        return lambda column: column == any_(ids)
    ids = bindparam("cids", expanding=True)
    return lambda column: column.in_(ids)


def _cluster_values(identity: ClusterIdentity) -> dict[str, Any]:
    return {**vars(identity), "status": "new"}


def allocation_rows(
    cluster_id: int, allocation: Mapping[str, Allocation] | None, at: datetime
) -> list[dict[str, Any]]:
    """The allocation statement's rows: one per pool the cluster's Kubernetes API told of."""
    return [
        {
            "cid": cluster_id,
            "pool": name,
            "nodes": a.nodes,
            "advertised": a.advertised,
            "allocated": a.allocated,
            "at": at,
        }
        for name, a in (allocation or {}).items()
    ]


def drift_rows(cluster_id: int, drift: Sequence[DriftFinding], at: datetime) -> list[dict[str, Any]]:
    """The drift_insert statement's rows: the cluster's findings, detected when it was listed."""
    return [
        {
            "cluster_id": cluster_id,
            "pool": d.pool,
            "kind": d.kind,
            "fields": d.fields,
            "detected_at": at,
        }
        for d in drift
    ]


def pool_values(
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


def pools_query() -> Any:
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


def pool_dict(row: Any) -> dict[str, Any]:
    """A pool row as `catalog ls --json` prints it: observed_json's keys, with its cluster and times."""
    pool = row._mapping
    return {
        "cluster": pool["cluster"],
        "cloud": pool["cloud"],
        **{key: pool[column] for column, key in zip(_LISTED, LISTED_KEYS, strict=True)},
        "first_seen": iso(pool["first_seen"]),
        "last_seen": iso(pool["last_seen"]),
        "deleted_at": iso(pool["deleted_at"]),
        "adopted_at": iso(pool["adopted_at"]),
        "cluster_status": pool["cluster_status"],
        "k8s_nodes": pool["k8s_nodes"],
        "slices_advertised": pool["slices_advertised"],
        "slices_allocated": pool["slices_allocated"],
        "allocation_at": iso(pool["allocation_at"]),
        "allocation_stale": pool["allocation_stale"],
    }


def utc(moment: datetime | None) -> datetime | None:
    """SQLite hands datetimes back without their zone; every time stored is UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def iso(moment: datetime | None) -> str | None:
    """A stored time as the catalog prints it: UTC, to the second."""
    moment = utc(moment)
    return moment.isoformat(timespec="seconds") if moment else None
