"""The catalog's first tables: clusters, pools, sync runs, drift.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("cloud", sa.String(16), nullable=False),
        sa.Column("account", sa.String(200), nullable=False),
        sa.Column("location", sa.String(200), nullable=False),
        sa.Column("cluster", sa.String(200), nullable=False),
        sa.Column("in_fleet", sa.Boolean, nullable=False),
        sa.Column("observed_at", WHEN),
        sa.Column("last_sync_at", WHEN),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("last_error", sa.Text),
    )
    op.create_table(
        "pools",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("cluster_id", sa.Integer, sa.ForeignKey("clusters.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("instance_type", sa.String(100), nullable=False),
        sa.Column("gpu_model", sa.String(100)),
        sa.Column("gpus_per_node", sa.Integer, nullable=False),
        sa.Column("mig_profile", sa.String(32)),
        sa.Column("sharing", sa.String(16), nullable=False),
        sa.Column("replicas", sa.Integer),
        sa.Column("slices_per_node", sa.Integer, nullable=False),
        sa.Column("memory_per_slice_gb", sa.Float),
        sa.Column("min_nodes", sa.Integer, nullable=False),
        sa.Column("max_nodes", sa.Integer, nullable=False),
        sa.Column("current_nodes", sa.Integer),
        sa.Column("spot", sa.Boolean, nullable=False),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("taints", sa.JSON, nullable=False),
        sa.Column("owned", sa.Boolean, nullable=False),
        sa.Column("first_seen", WHEN, nullable=False),
        sa.Column("last_seen", WHEN, nullable=False),
        sa.Column("deleted_at", WHEN),
        sa.UniqueConstraint("cluster_id", "name"),
    )
    op.create_index("ix_pools_cluster_id", "pools", ["cluster_id"])
    op.create_index("ix_pools_deleted_at", "pools", ["deleted_at"])
    op.create_table(
        "sync_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("started_at", WHEN, nullable=False),
        sa.Column("finished_at", WHEN),
        sa.Column("shard", sa.String(16)),
        sa.Column("clusters_ok", sa.Integer, nullable=False),
        sa.Column("clusters_failed", sa.Integer, nullable=False),
        sa.Column("pools_seen", sa.Integer, nullable=False),
        sa.Column("drift", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
    )
    op.create_table(
        "drift",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("cluster_id", sa.Integer, sa.ForeignKey("clusters.id", ondelete="CASCADE"), nullable=False),
        sa.Column("pool", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("fields", sa.JSON, nullable=False),
        sa.Column("detected_at", WHEN, nullable=False),
    )
    op.create_index("ix_drift_cluster_id", "drift", ["cluster_id"])


def downgrade() -> None:
    op.drop_table("drift")
    op.drop_table("sync_runs")
    op.drop_table("pools")
    op.drop_table("clusters")
