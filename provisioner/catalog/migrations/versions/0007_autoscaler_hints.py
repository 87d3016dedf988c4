"""Pools keep what their cluster autoscaler is told of a node it has not started (the hints the
tool writes as the cloud's tags), and whether it can start the pool's first node for its slices.

Rows written before hold neither (NULL): the next sync of their cluster fills them; until then
`place` does not count on such a pool growing from zero nodes.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pools") as table:
        table.add_column(sa.Column("autoscaler_hints", sa.JSON))
        table.add_column(sa.Column("grows_from_zero", sa.Boolean))


def downgrade() -> None:
    with op.batch_alter_table("pools") as table:
        table.drop_column("grows_from_zero")
        table.drop_column("autoscaler_hints")
