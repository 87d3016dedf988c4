"""Every catalog test runs on SQLite and on the PostgreSQL at 127.0.0.1:5432 (user postgres)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/"


@contextlib.contextmanager
def fresh_catalog(kind: str, directory: Path) -> Iterator[str]:
    """The URL of an empty catalog: a SQLite file in `directory`, or a new PostgreSQL database."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'catalog.db'}"
        return
    import psycopg

    database = f"provisioner_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    try:
        yield POSTGRES + database
    finally:
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_catalog(request.param, tmp_path) as url:
        yield url
