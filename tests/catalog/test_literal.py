"""Values from the catalog or a cloud are printed as they are: never read as rich markup (a `[/]`
stopped `catalog ls` with a MarkupError; `[bold]x` printed as a bold x) or emoji codes, never
dropped. The catalog's rows are written straight into the database, as another writer of it
would; the clouds' pools are made through their SDKs against the sandbox."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import text

from provisioner.catalog.store import Store
from provisioner.cli import main
from provisioner.compile import compile_file, desired_state
from provisioner.drivers.registry import connect
from provisioner.sandbox.server import SandboxSettings
from tests.worlds import World

WHEN = datetime(2026, 12, 1, 2, tzinfo=UTC)


def _insert_odd_rows(url: str) -> None:
    store = Store(url)
    store.migrate()
    pool = {
        "gpus_per_node": 1,
        "sharing": "exclusive",
        "replicas": None,
        "slices_per_node": 7,
        "memory_per_slice_gb": 10.0,
        "isolation": "hardware",
        "slice_unit": "slice",
        "min_nodes": 0,
        "max_nodes": 3,
        "current_nodes": 1,
        "spot": False,
        "labels": json.dumps({"team": "[/]"}),
        "taints": json.dumps([]),
        "first_seen": WHEN,
        "last_seen": WHEN,
        "allocation_stale": False,
    }
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO clusters (id, name, cloud, account, location, cluster, in_fleet, observed_at,"
                " last_sync_at, status) VALUES (1, '[b]c', 'aks', 'sub', 'rg', 'aks-1', true, :at, :at, 'ok')"
            ),
            {"at": WHEN},
        )
        columns = ["cluster_id", "name", "instance_type", "gpu_model", "mig_profile", "owned", *pool]
        insert = text(
            f"INSERT INTO pools ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"
        )
        conn.execute(
            insert,
            [
                {"cluster_id": 1, "name": "[red]p", "instance_type": "[/]", "gpu_model": "[bold]x"}
                | {"mig_profile": ":smile:", "owned": False, **pool},
                {"cluster_id": 1, "name": "q\\", "instance_type": "[i]t", "gpu_model": "A100 80GB"}
                | {"mig_profile": "1g.10gb", "owned": True, **pool},
            ],
        )
        fields = json.dumps([{"field": "labels", "fleet": {}, "cloud": {"team": "[/]"}}])
        conn.execute(
            text(
                "INSERT INTO drift (cluster_id, pool, kind, fields, detected_at)"
                " VALUES (1, '[red]p', 'changed', :fields, :at)"
            ),
            {"fields": fields, "at": WHEN},
        )


def _run(url: str, *args: str):
    result = CliRunner().invoke(
        main, list(args), env={"PROVISIONER_CATALOG": url, "PROVISIONER_SANDBOX": ""}, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def test_catalog_values_that_read_as_markup_are_printed_as_they_are(catalog_url: str):
    _insert_odd_rows(catalog_url)
    listed = _run(catalog_url, "catalog", "ls")
    for value in ("[b]c", "[red]p (not owned)", "[/]", "[bold]x", ":smile:", "[i]t", "q\\ "):
        assert value in listed, value
    inspected = _run(catalog_url, "catalog", "inspect")
    for value in ("[b]c", "[red]p", "[bold]x", ":smile:", "q\\ "):
        assert value in inspected, value
    drift = _run(catalog_url, "catalog", "drift")
    assert drift == '[b]c/[red]p: changed (labels: fleet {}, cloud {"team": "[/]"})\n'
    placed = _run(catalog_url, "place", "--mig", "1g.10gb")
    assert "Placed on cluster [b]c (aks), pool q\\." in placed


def test_cloud_values_that_read_as_markup_or_run_long_reach_every_output_whole(
    tmp_path: Path, catalog_url: str
):
    """An EKS pool whose instance type is `[/]\\` and labels read as markup, and GKE and AKS pools
    whose label (value, and key) runs to 100,000 characters, which no cloud allows but their
    emulators keep: `pools`, `plan`, `sync` and the catalog show them as the clouds hold them."""
    world = World(tmp_path, SandboxSettings(), catalog=catalog_url)
    try:
        compiled = compile_file(world.fleet)
        long_value, long_key = "v" * 100_000, "k" * 100_000
        made = {
            ("aws", "eks"): {"instance_type": "[/]\\", "labels": (("odd", "[bold]x"), ("emoji", ":smile:"))},
            ("gcp", "gke"): {"labels": (("long", long_value),)},
            ("azure", "aks"): {"labels": ((long_key, "v"),)},
        }
        for (name, cloud), fields in made.items():
            cluster = compiled.cluster(name)
            state = dataclasses.replace(desired_state(cluster.pools[1]), name="oddity", **fields)
            connect(cloud, world.sandbox.directory).create_pool(cluster.target.ref, state)
        pools = world.run("pools", str(world.fleet))
        assert pools.exit_code == 0, pools.output
        assert "│ aws     │ oddity       │ [/]\\ " in pools.stdout  # the backslash once
        plan = world.run("plan", str(world.fleet))
        assert plan.exit_code == 0, plan.output
        assert "instance_type: [/]\\\n" in plan.stdout
        assert 'labels: {"emoji": ":smile:", "odd": "[bold]x"' in plan.stdout
        synced = world.run("sync", str(world.fleet))
        assert synced.exit_code == 0, synced.output
        assert "│ [/]\\ " in world.run("catalog", "ls").stdout
        rows = {(r["cluster"], r["pool"]): r for r in json.loads(world.run("catalog", "ls", "--json").stdout)}
        assert rows["aws", "oddity"]["instance_type"] == "[/]\\"
        assert rows["aws", "oddity"]["labels"] == {"odd": "[bold]x", "emoji": ":smile:"}
        assert rows["gcp", "oddity"]["labels"]["long"] == long_value
        assert rows["azure", "oddity"]["labels"][long_key] == "v"
        served = Store(catalog_url).snapshot().derived(list)  # what catalog serve answers from
        labels = {k: v for r in served if r["pool"] == "oddity" for k, v in r["labels"].items()}
        assert labels.items() >= {"long": long_value, long_key: "v"}.items()
    finally:
        world.sandbox.stop()
