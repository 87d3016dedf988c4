"""Alembic's entry point: the store runs migrations on its own connection (no alembic.ini)."""

from __future__ import annotations

from alembic import context

from provisioner.catalog.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
