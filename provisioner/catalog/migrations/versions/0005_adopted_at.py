"""Pools say when provisioner adopted them (took over a pool it did not create).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pools") as table:
        # Rows written before: no pool was adopted then (the action did not exist).
        table.add_column(sa.Column("adopted_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("pools") as table:
        table.drop_column("adopted_at")
