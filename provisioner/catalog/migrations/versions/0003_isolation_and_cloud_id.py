"""Pools say what a slice isolates and in what unit they count (GiB where a scheduler shares GPU
memory, ACK cGPU), and keep the cloud's own pool ID (pods select an ACK pool by it).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pools") as table:
        # Rows written before: MIG or whole GPUs unless shared, and the sharing modes then known
        # count slices; `sync` rewrites every live pool's isolation on its next run.
        table.add_column(sa.Column("isolation", sa.String(16), nullable=False, server_default="hardware"))
        table.add_column(sa.Column("slice_unit", sa.String(8), nullable=False, server_default="slice"))
        table.add_column(sa.Column("cloud_id", sa.String(100)))
    op.execute("UPDATE pools SET isolation = 'none' WHERE sharing = 'time-slicing'")
    op.execute("UPDATE pools SET isolation = 'compute' WHERE sharing = 'mps'")


def downgrade() -> None:
    with op.batch_alter_table("pools") as table:
        table.drop_column("cloud_id")
        table.drop_column("slice_unit")
        table.drop_column("isolation")
