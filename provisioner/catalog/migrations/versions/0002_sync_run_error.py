"""A sync run that crashed keeps its error, so a failed run says why.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sync_runs") as table:
        table.add_column(sa.Column("error", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("sync_runs") as table:
        table.drop_column("error")
