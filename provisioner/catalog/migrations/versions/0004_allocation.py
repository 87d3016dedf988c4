"""Pools learn what Kubernetes says of them: nodes seen, slices advertised and allocated, when,
and whether those figures are stale (the cluster's API could not be reached at the last sync).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pools") as table:
        table.add_column(sa.Column("k8s_nodes", sa.Integer))
        table.add_column(sa.Column("slices_advertised", sa.Integer))
        table.add_column(sa.Column("slices_allocated", sa.Integer))
        table.add_column(sa.Column("allocation_at", sa.DateTime(timezone=True)))
        table.add_column(sa.Column("allocation_stale", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("pools") as table:
        for column in (
            "allocation_stale",
            "allocation_at",
            "slices_allocated",
            "slices_advertised",
            "k8s_nodes",
        ):
            table.drop_column(column)
