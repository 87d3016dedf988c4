"""Tables and JSON for what commands print: one place, so --json and the table agree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from provisioner.observe import Observation
from provisioner.pools import PoolState, Scaling


def scaling_text(scaling: Scaling) -> str:
    return f"{scaling.min}-{scaling.max}" if scaling.autoscaling else str(scaling.min)


def pool_json(pool: PoolState) -> dict[str, Any]:
    return {
        "pool": pool.name,
        "instance_type": pool.instance_type,
        "gpus_per_node": pool.gpus_per_node,
        "mig_setting": pool.mig_setting,
        "sharing": {"strategy": pool.sharing.strategy, "clients_per_gpu": pool.sharing.clients_per_gpu}
        if pool.sharing
        else None,
        "spot": pool.spot,
        "disk_size_gb": pool.disk_size_gb,
        "min_nodes": pool.scaling.min,
        "max_nodes": pool.scaling.max,
        "autoscaling": pool.scaling.autoscaling,
        "labels": pool.label_map,
        "taints": [str(t) for t in pool.taints],
        "owned": pool.owned,
    }


def observations_json(observations: Sequence[Observation]) -> list[dict[str, Any]]:
    return [
        {
            "cluster": o.cluster.name,
            "cloud": o.cluster.cloud,
            "error": str(o.error) if o.error else None,
            "pools": [pool_json(p) for p in o.pools],
        }
        for o in observations
    ]


def observations_table(observations: Sequence[Observation]) -> Table:
    table = Table(title="Pools now", title_justify="left")
    for column in ("cluster", "pool", "instance type", "GPUs", "MIG", "sharing", "nodes", "spot", "owned"):
        table.add_column(column)
    for observation in observations:
        if observation.error is not None:
            table.add_row(observation.cluster.name, "[red]listing failed[/]", *[""] * 7)
        for pool in observation.pools:
            sharing = f"{pool.sharing.strategy} x{pool.sharing.clients_per_gpu}" if pool.sharing else ""
            table.add_row(
                observation.cluster.name,
                pool.name,
                pool.instance_type,
                str(pool.gpus_per_node or ""),
                pool.mig_setting or "",
                sharing,
                scaling_text(pool.scaling),
                "yes" if pool.spot else "",
                "yes" if pool.owned else "[dim]no[/]",
            )
    return table
