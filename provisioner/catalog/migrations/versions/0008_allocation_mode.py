"""Pools keep how their GPUs reach pods: through the device plugin's extended resources, or through
Dynamic Resource Allocation (`gpu.allocation: dra`), where pods claim a DeviceClass's devices.

Rows written before were all device-plugin pools (the tool compiled no other): they get that,
and the next sync of their cluster writes what it reads back.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pools") as table:
        table.add_column(
            sa.Column("allocation_mode", sa.String(16), nullable=False, server_default="device-plugin")
        )


def downgrade() -> None:
    with op.batch_alter_table("pools") as table:
        table.drop_column("allocation_mode")
