"""A counter of the writes that changed the catalog, so readers can keep what they read until the
next one. Not a timestamp already in the tables: concurrent writers commit in another order than
they take their clocks, so a newest-time fingerprint can miss a write; a counter updated in the
writing transaction cannot.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    changes = op.create_table(
        "changes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("serial", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(changes, [{"id": 1, "serial": 0}])


def downgrade() -> None:
    op.drop_table("changes")
