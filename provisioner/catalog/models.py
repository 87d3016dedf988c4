"""The catalog's tables (SQLAlchemy 2). Changing them means a new Alembic revision in migrations/."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        list[Any]: JSON,
        datetime: DateTime(timezone=True),
    }


class ClusterRow(Base):
    __tablename__ = "clusters"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(
        String(200), unique=True
    )  # the fleet's name, or cloud/account/... if discovered
    cloud: Mapped[str] = mapped_column(String(16))
    account: Mapped[str] = mapped_column(String(200))  # subscription, project or AWS account
    location: Mapped[str] = mapped_column(String(200))  # resource group, GKE location or AWS region
    cluster: Mapped[str] = mapped_column(String(200))  # the cloud's own cluster name
    in_fleet: Mapped[bool] = mapped_column(default=True)  # False: found by sync --discover
    observed_at: Mapped[datetime | None]  # when the pools below were listed
    last_sync_at: Mapped[datetime | None]
    status: Mapped[str] = mapped_column(String(16), default="new")  # ok | error | new
    last_error: Mapped[str | None] = mapped_column(Text)


class PoolRow(Base):
    __tablename__ = "pools"
    __table_args__ = (UniqueConstraint("cluster_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    instance_type: Mapped[str] = mapped_column(String(100))
    gpu_model: Mapped[str | None] = mapped_column(String(100))
    gpus_per_node: Mapped[int] = mapped_column(Integer)
    mig_profile: Mapped[str | None] = mapped_column(String(32))
    sharing: Mapped[str] = mapped_column(String(16))
    replicas: Mapped[int | None]
    slices_per_node: Mapped[int] = mapped_column(Integer)
    memory_per_slice_gb: Mapped[float | None] = mapped_column(Float)
    isolation: Mapped[str] = mapped_column(
        String(16), server_default="hardware"
    )  # none|memory|compute|hardware
    slice_unit: Mapped[str] = mapped_column(
        String(8), server_default="slice"
    )  # slice, or GiB (memory sharing)
    # How the pool's GPUs reach pods: device-plugin (extended resources) or dra (ResourceClaims
    # naming a DeviceClass); not "allocation", which is the slices pods hold (allocation_at...).
    allocation_mode: Mapped[str] = mapped_column(String(16), server_default="device-plugin")
    cloud_id: Mapped[str | None] = mapped_column(String(100))  # the cloud's own pool ID (ACK np...)
    min_nodes: Mapped[int]
    max_nodes: Mapped[int]
    current_nodes: Mapped[int | None]
    spot: Mapped[bool]
    labels: Mapped[dict[str, Any]]
    taints: Mapped[list[Any]]
    owned: Mapped[bool]
    # What the tool tells the pool's cluster autoscaler of a node it has not started (pooljson
    # template_json), and whether it can start the first one for the pool's slices; NULL in rows
    # written before the catalog kept them (migration 0007), until their next sync.
    autoscaler_hints: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    grows_from_zero: Mapped[bool | None]
    first_seen: Mapped[datetime]
    # A gone pool's last listing; a live pool's row holds when a listing last upserted it, and reads
    # take its cluster's observed_at (Store._compared: a listing that changes nothing writes no row).
    last_seen: Mapped[datetime]
    deleted_at: Mapped[datetime | None] = mapped_column(index=True)  # None: live
    # What Kubernetes says of the pool (sync reads it where the cluster's API answers): nodes seen,
    # slices (in slice_unit) advertised and allocated to pods; stale: the API did not answer since.
    k8s_nodes: Mapped[int | None]
    slices_advertised: Mapped[int | None]
    slices_allocated: Mapped[int | None]
    allocation_at: Mapped[datetime | None]
    allocation_stale: Mapped[bool] = mapped_column(server_default=false())
    # When provisioner took over the pool it did not create (the adopt action); None: it never did.
    adopted_at: Mapped[datetime | None]


class SyncRunRow(Base):
    __tablename__ = "sync_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    shard: Mapped[str | None] = mapped_column(String(16))
    clusters_ok: Mapped[int] = mapped_column(default=0)
    clusters_failed: Mapped[int] = mapped_column(default=0)
    pools_seen: Mapped[int] = mapped_column(default=0)
    drift: Mapped[int] = mapped_column(default=0)
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | ok | failed
    error: Mapped[str | None] = mapped_column(Text)  # why a run that crashed failed


class DriftRow(Base):
    """A fleet cluster's pool that differs from the fleet: the latest sync's findings."""

    __tablename__ = "drift"

    id: Mapped[int] = mapped_column(primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"), index=True)
    pool: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))  # missing | extra | changed | conflict | unowned
    fields: Mapped[list[Any]]  # [{field, fleet, cloud}] for changed, [{message}] for a conflict
    detected_at: Mapped[datetime]


class ChangeRow(Base):
    """One row: how many write transactions have changed the clusters or their pools. Each write
    adds one before it commits, so a reader that keeps the live pools between requests
    (Store.snapshot) knows with one cheap query whether it may still use them."""

    __tablename__ = "changes"

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[int] = mapped_column(BigInteger)
