"""The catalog as Prometheus metrics, read from the store at each scrape (a custom collector on its
own registry: no process-global state, and the numbers are never older than the catalog).

Per GPU pool (labels cluster, cloud, pool, gpu, mig, sharing, isolation, and unit: `slice`, or
`GiB` where a scheduler shares GPU memory, since the two do not add up): GPUs and slices now and
at maximum size, slices allocated where known. Per cluster (cluster, cloud): the last good
listing's time, the last attempt's time, and whether that attempt failed. A value the catalog
does not know (nodes now, allocation) has no sample rather than a made-up one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from provisioner.catalog.overview import allocated_slices, slices_max, slices_now
from provisioner.catalog.store import Store

POOL_LABELS = ("cluster", "cloud", "pool", "gpu", "mig", "sharing", "isolation", "unit")
CLUSTER_LABELS = ("cluster", "cloud")


def _pool_labels(pool: dict[str, Any]) -> list[str]:
    return [
        pool["cluster"],
        pool["cloud"],
        pool["pool"],
        pool["gpu"],
        pool["mig"] or "",
        pool["sharing"],
        pool["isolation"],
        pool["slice_unit"],
    ]


def _seconds(moment: str | None) -> float | None:
    return None if moment is None else datetime.fromisoformat(moment).timestamp()


class CatalogCollector(Collector):
    def __init__(self, store: Store):
        self.store = store

    def collect(self) -> Iterator[Metric]:
        pools = [p for p in self.store.live_pools() if p["gpu"]]
        families = {
            "gpus": (
                "GPUs in the pool now (nodes now x GPUs per node)",
                lambda p: _times(p, "gpus_per_node"),
            ),
            "gpus_max": (
                "GPUs in the pool at its maximum size",
                lambda p: max(p["max_nodes"], p["current_nodes"] or 0) * p["gpus_per_node"],
            ),
            "slices": ("GPU slices in the pool now, in `unit`", slices_now),
            "slices_max": ("GPU slices in the pool at its maximum size, in `unit`", slices_max),
            "slices_allocated": ("GPU slices pods hold now, in `unit`, where known", allocated_slices),
        }
        for name, (documentation, value_of) in families.items():
            family = GaugeMetricFamily(f"provisioner_pool_{name}", documentation, labels=POOL_LABELS)
            for pool in pools:
                value = value_of(pool)
                if value is not None:
                    family.add_metric(_pool_labels(pool), value)
            yield family
        clusters = self.store.clusters()
        per_cluster = {
            "last_success_timestamp_seconds": (
                "When the cluster's stored pools were listed (its last good sync)",
                lambda c: _seconds(c["observed_at"]),
            ),
            "last_sync_timestamp_seconds": (
                "When sync last tried the cluster, good or not",
                lambda c: _seconds(c["last_sync_at"]),
            ),
            "sync_error": (
                "1 if the cluster's last sync failed (its pools are as the last good one found them)",
                lambda c: 1.0 if c["status"] == "error" else 0.0,
            ),
        }
        for name, (documentation, value_of) in per_cluster.items():
            family = GaugeMetricFamily(f"provisioner_cluster_{name}", documentation, labels=CLUSTER_LABELS)
            for cluster in clusters:
                value = value_of(cluster)
                if value is not None:
                    family.add_metric([cluster["cluster"], cluster["cloud"]], value)
            yield family


def _times(pool: dict[str, Any], per_node: str) -> int | None:
    return None if pool["current_nodes"] is None else pool["current_nodes"] * pool[per_node]


def registry_for(store: Store) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CatalogCollector(store))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus' text format (version 0.0.4)."""
    return generate_latest(registry)
