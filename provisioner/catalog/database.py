"""The catalog's database, whichever holds it: the URL it is opened from, its engine (SQLite set
to one writer at a time, PostgreSQL pooled), its migrations, psycopg's pipeline, and its failures
as CatalogErrors naming the URL (redacted) and what failed. Nothing here knows the catalog's rows."""

from __future__ import annotations

import contextlib
import os
import re
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, exc, text

from provisioner.catalog.url import CatalogError

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


def open_engine(url: str) -> Engine:
    """The URL's engine, dropped unclosed in forked children; a URL it cannot be made from is a
    CatalogError that says why."""
    with _url_errors(url):
        engine = _engine(url)
        _dropped_in_forked_children(engine)
    return engine


def migrate_schema(engine: Engine, url: str) -> None:
    """Bring the schema to the newest Alembic revision (a no-op when it is there)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with database_errors(url), engine.begin() as connection:
        # One migrator at a time; the others wait, then find the schema at head. SQLite's
        # BEGIN IMMEDIATE already serialises them; PostgreSQL holds this lock to the commit.
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


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
def database_errors(url: str) -> Iterator[None]:
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
def pipelined(conn: Connection) -> Iterator[None]:
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
