"""Tables for the catalog commands (their --json prints the same rows)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from provisioner.capacity import sharing_text
from provisioner.catalog.listing import DriftFinding
from provisioner.tiers import pool_capacity


def nodes_text(pool: dict[str, Any]) -> str:
    """A catalog row's nodes as the views show them: `now (min-max)`, or the bounds alone."""
    bounds = (
        str(pool["min_nodes"])
        if pool["min_nodes"] == pool["max_nodes"]
        else f"{pool['min_nodes']}-{pool['max_nodes']}"
    )
    return bounds if pool["current_nodes"] is None else f"{pool['current_nodes']} ({bounds})"


def slicing_text(pool: dict[str, Any]) -> str:
    """How a catalog row's GPUs are cut and shared, in words: its MIG profile, then its sharing."""
    parts = [pool["mig"] or "", sharing_text(pool["sharing"], pool["replicas"], pool["isolation"])]
    return " + ".join(p for p in parts if p) or "whole GPUs"


def pools_table(pools: Sequence[dict[str, Any]]) -> Table:
    """The live pools; with an `allocation mode` column (device-plugin or dra) where any of them
    is a DRA pool: a catalog of device-plugin pools alone keeps its narrower table."""
    modes = any(p.get("allocation_mode") == "dra" for p in pools)
    table = Table(title="Catalog: live pools", title_justify="left")
    for column in (
        "cluster",
        "cloud",
        "pool",
        "instance type",
        "GPU",
        "GPUs/node",
        "slicing",
        *(("allocation mode",) if modes else ()),
        "slices/node",
        "GB/slice",
        "nodes",
    ):
        table.add_column(
            column, justify="right" if column in ("GPUs/node", "slices/node", "GB/slice") else "left"
        )
    for p in pools:
        mode = (p.get("allocation_mode") or "device-plugin") if p["gpu"] else "-"
        cells = (
            p["cluster"],
            p["cloud"],
            p["pool"],
            p["instance_type"],
            p["gpu"] or "-",
            str(p["gpus_per_node"]),
            slicing_text(p) if p["gpu"] else "-",
            *((mode,) if modes else ()),
            _in_unit(p["slices_per_node"], p["slice_unit"]),
            f"{p['memory_per_slice_gb']:g}" if p["memory_per_slice_gb"] is not None else "-",
            nodes_text(p),
        )
        row = _literal(cells)
        if not p["owned"]:
            row[2].append(" (not owned)", style="dim")
        table.add_row(*row)
    return table


def capacity_rows(pools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GPU pool: GPUs and slices now (where the cloud reports the node count) and at max size;
    slices free now by the last sync's allocation, and those growing can still add (tiers.py; None:
    unknown).

    Slices count in the pool's unit: slices, or GiB where a scheduler shares GPU memory (as
    `kubectl inspect cgpu` totals it). A pool whose nodes join it themselves (an edge pool) has no
    maximum of its own: what it has now is its size."""
    rows = []
    for p in pools:
        if not p["gpu"]:
            continue
        now = p["current_nodes"]
        largest = max(p["max_nodes"], now or 0)
        gib = p["slice_unit"] == "GiB"
        rows.append(
            {
                "cluster": p["cluster"],
                "pool": p["pool"],
                "gpu": p["gpu"],
                "slice": "GiB"
                if gib
                else f"{p['mig'] or 'GPU'}" + (f" / {p['replicas']}" if p["replicas"] else ""),
                "slice_unit": p["slice_unit"],
                "isolation": p["isolation"],
                "memory_per_slice_gb": p["memory_per_slice_gb"],
                "slices_per_node": p["slices_per_node"],
                "gpus_now": None if now is None else now * p["gpus_per_node"],
                "slices_now": None if now is None else now * p["slices_per_node"],
                "gpus_max": largest * p["gpus_per_node"],
                "slices_max": largest * p["slices_per_node"],
                # What Kubernetes said at the last sync that could ask it (None: never asked).
                "slices_advertised": p["slices_advertised"],
                "slices_allocated": p["slices_allocated"],
                "allocation_stale": p["allocation_stale"],
                **pool_capacity(p),
            }
        )
    return rows


def _slices_total(rows: Sequence[dict[str, Any]]) -> str:
    """Slices now / at max size, summed per unit: GiB and slices do not add up."""
    parts = []
    for unit in ("slice", "GiB"):
        mine = [r for r in rows if r["slice_unit"] == unit]
        if mine:
            now, most = sum(r["slices_now"] or 0 for r in mine), sum(r["slices_max"] for r in mine)
            parts.append(f"{now} / {most}" + (" GiB" if unit == "GiB" else ""))
    return "; ".join(parts) or "0 / 0"


def _in_use(row: dict[str, Any]) -> str:
    """Slices pods hold of those the nodes advertise, as the last sync saw them in Kubernetes."""
    if row["slices_advertised"] is None:
        return "?"
    stale = " (stale)" if row["allocation_stale"] else ""
    return f"{row['slices_allocated']} / {row['slices_advertised']}{stale}"


def _in_unit(slices: int, unit: str) -> str:
    return f"{slices} GiB" if unit == "GiB" else str(slices)


def capacity_table(rows: Sequence[dict[str, Any]]) -> Table:
    table = Table(title="Catalog: GPU capacity (now / at max nodes)", title_justify="left", show_footer=True)
    totals = {key: sum(r[key] or 0 for r in rows) for key in ("gpus_now", "gpus_max")}
    columns = [
        ("cluster", "total", "left"),
        ("pool", "", "left"),
        ("GPU", "", "left"),
        ("slice", "", "left"),
        ("GB/slice", "", "right"),
        ("slices/node", "", "right"),
        ("GPUs", f"{totals['gpus_now']} / {totals['gpus_max']}", "right"),
        ("slices", _slices_total(rows), "right"),
        ("free", "", "right"),
        ("can grow", "", "right"),
        ("in use", "", "right"),  # last: what Kubernetes said, beside how current it is
    ]
    for header, footer, justify in columns:
        table.add_column(header, footer=footer, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        cells = (
            r["cluster"],
            r["pool"],
            r["gpu"],
            r["slice"],
            f"{r['memory_per_slice_gb']:g}",
            _in_unit(r["slices_per_node"], r["slice_unit"]),
            f"{_maybe(r['gpus_now'])} / {r['gpus_max']}",
            f"{_maybe(r['slices_now'])} / {r['slices_max']}" + (" GiB" if r["slice_unit"] == "GiB" else ""),
            _maybe(r["slices_free"]),
            _growth(r),
            _in_use(r),
        )
        table.add_row(*_literal(cells))
    return table


def _literal(cells: Sequence[str]) -> list[Text]:
    """Table cells as they read: every value here comes from the catalog, which clouds and other
    writers fill, and a rich table reads a string cell as markup ("[/]" would stop the command)
    and emoji codes. Text, not rich.markup.escape: that doubles a trailing backslash."""
    return [Text(cell) for cell in cells]


def _growth(row: dict[str, Any]) -> str:
    """Slices growing can still add, and the nodes it would take."""
    if row["slices_growable"] is None:
        return "?"
    if not row["slices_growable"]:
        return "0"
    return f"{_in_unit(row['slices_growable'], row['slice_unit'])} (+{row['nodes_left']} nodes)"


def _maybe(value: int | None) -> str:
    return "?" if value is None else str(value)


def _field_text(found: dict[str, Any]) -> str:
    if "field" not in found:
        return found["message"]  # a conflict
    return f"{found['field']}: fleet {_value(found['fleet'])}, cloud {_value(found['cloud'])}"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def drift_lines(drift: Sequence[dict[str, Any]] | dict[str, list[DriftFinding]]) -> list[str]:
    """One line per drifted pool: `cluster/pool: kind (field: fleet X, cloud Y; ...)`."""
    rows = (
        [
            {"cluster": c, "pool": d.pool, "kind": d.kind, "fields": d.fields}
            for c, ds in drift.items()
            for d in ds
        ]
        if isinstance(drift, dict)
        else drift
    )
    lines = []
    for row in rows:
        details = "; ".join(_field_text(f) for f in row["fields"])
        lines.append(f"{row['cluster']}/{row['pool']}: {row['kind']}" + (f" ({details})" if details else ""))
    return lines
