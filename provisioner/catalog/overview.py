"""What `catalog serve` shows beside the raw rows: pool filters, free slices, stale clusters and
the capacity chart. Kept apart from the web framework so the API, the page and /metrics read the
catalog one way, and so each rule here is plain Python a test can call.

Allocation (slices in use) is not in the catalog yet: `allocated_slices` reads it from a pool row
where a later sync records it, and until then says None, which every view shows as unknown."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

# A cluster whose last good listing is older than this is stale: the nightly sync missed it at
# least once (a day, plus the CronJob's hour of deadline and a margin).
STALE_AFTER = timedelta(hours=36)


@dataclass(frozen=True)
class PoolFilter:
    """The filters of /api/pools and of the page's table; None (or an empty form field) is any."""

    cloud: str | None = None
    cluster: str | None = None
    gpu: str | None = None
    mig: str | None = None
    sharing: str | None = None
    isolation: str | None = None
    min_free_slices: int | None = None
    allocation_mode: str | None = None  # device-plugin | dra

    def matches(self, pool: dict[str, Any]) -> bool:
        gpu_filters = (self.gpu, self.mig, self.sharing, self.isolation, self.min_free_slices)
        if not pool["gpu"] and any(f is not None for f in (*gpu_filters, self.allocation_mode)):
            return False  # a pool without GPUs shares nothing: a GPU filter never lists it
        exact = {"cloud": self.cloud, "cluster": self.cluster, "sharing": self.sharing}
        exact |= {"isolation": self.isolation, "allocation_mode": self.allocation_mode}
        if any(wanted is not None and pool[key] != wanted for key, wanted in exact.items()):
            return False
        # GPU models and MIG profiles are typed by people: "a100 80gb" is "A100 80GB".
        for key, wanted in (("gpu", self.gpu), ("mig", self.mig)):
            if wanted is not None and (pool[key] or "").casefold() != wanted.casefold():
                return False
        return self.min_free_slices is None or (free_slices(pool) or 0) >= self.min_free_slices

    def query(self) -> dict[str, str]:
        """The filters that are set, as query parameters (for links and the form)."""
        return {f.name: str(v) for f in fields(self) if (v := getattr(self, f.name)) is not None}


def filter_pools(pools: Iterable[dict[str, Any]], wanted: PoolFilter) -> list[dict[str, Any]]:
    return [p for p in pools if wanted.matches(p)]


def slices_max(pool: dict[str, Any]) -> int:
    """Slices at the pool's maximum size (or its size now, if larger: an edge pool has no max)."""
    return max(pool["max_nodes"], pool["current_nodes"] or 0) * pool["slices_per_node"]


def slices_now(pool: dict[str, Any]) -> int | None:
    nodes = pool["current_nodes"]
    return None if nodes is None else nodes * pool["slices_per_node"]


def allocated_slices(pool: dict[str, Any]) -> int | None:
    """Slices pods hold now, where the catalog knows it; None (unknown) until it records it."""
    return pool.get("slices_allocated")


def free_slices(pool: dict[str, Any]) -> int | None:
    """Slices a new pod could still get, counted to the pool's maximum size (an autoscaler adds
    the nodes): the maximum less what is allocated. None for a pool that has no GPU slices."""
    if not pool["gpu"]:
        return None
    return slices_max(pool) - (allocated_slices(pool) or 0)


def is_stale(cluster: dict[str, Any], now: datetime, stale_after: timedelta = STALE_AFTER) -> bool:
    """The cluster's last sync failed, or its last good listing is older than `stale_after`."""
    if cluster["status"] != "ok" or cluster["observed_at"] is None:
        return True
    return now - datetime.fromisoformat(cluster["observed_at"]) > stale_after


@dataclass(frozen=True)
class Bar:
    """One bar of the chart: a cluster's slices of one GPU model, in one unit."""

    cloud: str
    cluster: str
    gpu: str
    unit: str  # slice | GiB
    total: int  # at maximum size
    now: int | None  # with the nodes there now; None where the cloud does not say
    allocated: int | None  # None: unknown

    @property
    def free(self) -> int:
        return self.total - (self.allocated or 0)


def capacity_bars(pools: Sequence[dict[str, Any]]) -> list[Bar]:
    """Slices by cloud, cluster and GPU model (and unit: GiB and slices do not add up)."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for pool in pools:
        if pool["gpu"]:
            groups.setdefault((pool["cloud"], pool["cluster"], pool["gpu"], pool["slice_unit"]), []).append(
                pool
            )
    bars = []
    for (cloud, cluster, gpu, unit), members in sorted(groups.items()):
        now = [slices_now(p) for p in members]
        allocated = [allocated_slices(p) for p in members]
        bars.append(
            Bar(
                cloud=cloud,
                cluster=cluster,
                gpu=gpu,
                unit=unit,
                total=sum(slices_max(p) for p in members),
                now=None if None in now else sum(n or 0 for n in now),
                allocated=None if None in allocated else sum(a or 0 for a in allocated),
            )
        )
    return bars


@dataclass(frozen=True)
class ChartRow:
    bar: Bar
    y: int
    total_width: float
    allocated_width: float  # 0 where allocation is unknown
    now_x: float | None  # where the slices there now end, if known


CHART_LABEL_WIDTH = 300
CHART_BAR_WIDTH = 380
CHART_ROW_HEIGHT = 30


def chart_rows(bars: Sequence[Bar]) -> list[ChartRow]:
    """Each bar placed in the SVG: widths scale to the largest total of the same unit."""
    largest = {unit: max((b.total for b in bars if b.unit == unit), default=0) for unit in ("slice", "GiB")}
    rows = []
    for index, bar in enumerate(bars):
        scale = CHART_BAR_WIDTH / largest[bar.unit] if largest[bar.unit] else 0.0
        rows.append(
            ChartRow(
                bar=bar,
                y=40 + index * CHART_ROW_HEIGHT,
                total_width=round(bar.total * scale, 1),
                allocated_width=round((bar.allocated or 0) * scale, 1),
                now_x=None if bar.now is None else round(CHART_LABEL_WIDTH + bar.now * scale, 1),
            )
        )
    return rows
