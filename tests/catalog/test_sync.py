"""sync and the catalog, through the CLI and the real SDKs against the sandbox, on both databases."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.catalog.store import Store
from provisioner.catalog.sync import discover, in_shard, sync
from provisioner.compile import compile_file, desired_state
from provisioner.drivers.registry import connect
from provisioner.observe import Drivers
from provisioner.retry import RetryPolicy
from provisioner.sandbox.server import SandboxSettings
from tests.worlds import World

FAST = RetryPolicy(attempts=2, base=0.01)


@pytest.fixture
def world(tmp_path: Path, catalog_url: str) -> Iterator[World]:
    made = World(tmp_path, SandboxSettings(), catalog=catalog_url)
    assert made.run("apply", str(made.fleet), "--auto-approve").exit_code == 0
    yield made
    made.sandbox.stop()


def listed(world: World, *args: str) -> list[dict]:
    result = world.run("catalog", "ls", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_sync_fills_the_catalog_with_each_pools_slices(world: World):
    result = world.run("sync", str(world.fleet))
    assert result.exit_code == 0, result.output
    assert "Synced 3 clusters (12 pools)" in result.stdout

    compiled = compile_file(world.fleet)
    expected = {
        (c.name, p.pool.name): (
            p.setup.gpu.name,
            p.setup.slices_per_node,
            p.setup.memory_per_slice_gb,
        )
        for c in compiled.clusters
        for p in c.pools
    }
    rows = listed(world)
    owned = {
        (r["cluster"], r["pool"]): (r["gpu"], r["slices_per_node"], r["memory_per_slice_gb"])
        for r in rows
        if r["owned"]
    }
    assert owned == expected
    # e.g. an A100 80GB cut into 1g.10gb: 7 slices of 10 GB; a T4 time-sliced 4 ways: 4 of 4 GB
    assert owned[("azure", "mig")] == ("A100 80GB", 7, 10.0)
    assert owned[("azure", "shared")] == ("T4 16GB", 4, 4.0)
    assert owned[("aws", "mig")] == ("A100 40GB", 56, 5.0)
    systems = [r for r in rows if not r["owned"]]
    assert {(r["cluster"], r["pool"], r["gpu"]) for r in systems} == {
        ("azure", "system", None),
        ("gcp", "default-pool", None),
        ("aws", "system", None),
    }
    for field in (
        "cluster",
        "cloud",
        "pool",
        "instance_type",
        "gpu",
        "gpus_per_node",
        "mig",
        "sharing",
        "replicas",
        "slices_per_node",
        "min_nodes",
        "max_nodes",
    ):
        assert all(field in r for r in rows)
    assert [r["pool"] for r in listed(world, "--cloud", "gke")] == ["default-pool", "mig", "shared", "spare"]
    assert {r["cluster"] for r in listed(world, "--cluster", "aws")} == {"aws"}

    inspect = json.loads(world.run("catalog", "inspect", "--json").stdout)
    mig = next(r for r in inspect if (r["cluster"], r["pool"]) == ("azure", "mig"))
    assert (mig["slices_max"], mig["gpus_max"]) == (21, 3)  # 3 nodes x 7 slices


def test_an_unreachable_cloud_loses_no_rows_and_fails_loudly(world: World, catalog_url: str):
    assert world.run("sync", str(world.fleet)).exit_code == 0
    before = [r for r in listed(world) if r["cluster"] == "gcp"]
    world.sandbox.servers["gke"].stop()  # GKE stops answering: connections are refused

    store = Store(catalog_url)
    report = sync(compile_file(world.fleet).clusters, Drivers(world.sandbox.directory), store, policy=FAST)
    assert sorted(report.written) == ["aws", "azure"]
    assert list(report.failed) == ["gcp"] and "unreachable" in report.failed["gcp"]
    after = [r for r in listed(world) if r["cluster"] == "gcp"]
    assert [(r["pool"], r["deleted_at"]) for r in after] == [(r["pool"], None) for r in before]
    gcp = next(c for c in store.clusters() if c["cluster"] == "gcp")
    assert gcp["status"] == "error" and "unreachable" in gcp["last_error"]
    assert store.runs()[-1]["status"] == "failed"


def test_a_pool_deleted_out_of_band_leaves_the_live_listing(world: World, catalog_url: str):
    assert world.run("sync", str(world.fleet)).exit_code == 0
    aws = compile_file(world.fleet).cluster("aws").target.ref
    connect("eks", world.sandbox.directory).delete_pool(aws, "spare")
    result = world.run("sync", str(world.fleet))
    assert result.exit_code == 0
    assert "aws/spare: missing" in result.stdout  # drift, printed
    assert "spare" not in [r["pool"] for r in listed(world, "--cluster", "aws")]
    kept = {r["pool"]: r for r in Store(catalog_url).pools_ever("aws")}
    assert kept["spare"]["deleted_at"] is not None  # kept, with when


def test_drift_is_recorded_and_printed(world: World):
    compiled = compile_file(world.fleet)
    gcp = compiled.cluster("gcp")
    driver = connect("gke", world.sandbox.directory)
    mig = desired_state(gcp.pools[0])
    driver.update_pool(gcp.target.ref, dataclasses.replace(mig, labels=(("edited", "by-hand"),)))
    extra = dataclasses.replace(desired_state(gcp.pools[2]), name="handmade")
    driver.create_pool(gcp.target.ref, extra)
    driver.delete_pool(gcp.target.ref, "shared")

    result = world.run("sync", str(world.fleet))
    assert result.exit_code == 0
    lines = world.run("catalog", "drift", "--cluster", "gcp").stdout.splitlines()
    assert lines == [
        "gcp/handmade: extra",
        'gcp/mig: changed (labels: fleet {"provisioner.io/pool": "mig"}, cloud {"edited": "by-hand"})',
        "gcp/shared: missing",
    ]
    for line in lines:
        assert f"drift {line}" in result.stdout
    world.run("apply", str(world.fleet), "--auto-approve")
    world.run("sync", str(world.fleet))
    assert json.loads(world.run("catalog", "drift", "--json").stdout) == []


def test_two_syncs_at_once_never_corrupt_the_catalog(world: World, catalog_url: str):
    compiled = compile_file(world.fleet).clusters
    Store(catalog_url).migrate()
    runs_before = len(Store(catalog_url).runs())  # the fixture's apply recorded its clusters
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(4):
                sync(compiled, Drivers(world.sandbox.directory), Store(catalog_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    store = Store(catalog_url)
    rows = store.live_pools()
    assert len(rows) == 12 and len({(r["cluster"], r["pool"]) for r in rows}) == 12
    runs = store.runs()
    assert len(runs) == runs_before + 12 and all(r["status"] == "ok" for r in runs)


def test_apply_records_the_pools_it_changed(world: World):
    world.edit(
        lambda pools: {
            c: re.sub(r"nodes: \{count: [13]\}", "nodes: {min: 1, max: 6}", t) for c, t in pools.items()
        }
    )
    result = world.run("apply", str(world.fleet), "--auto-approve")
    assert "Catalog: recorded 3 changed clusters." in result.stdout
    spare = [r for r in listed(world) if r["pool"] == "spare"]
    assert {(r["min_nodes"], r["max_nodes"]) for r in spare} == {(1, 6)}


def test_discover_catalogs_the_gpu_pools_of_clusters_the_fleet_does_not_name(world: World, catalog_url: str):
    from provisioner.sandbox.gke.models import Accelerator, NodePool

    gcp = compile_file(world.fleet).cluster("gcp").target.ref
    backend = world.sandbox.emulators["gke"].backend(gcp.account, "europe-west1")  # type: ignore[attr-defined]
    backend.add_cluster("shadow-it")
    backend.seed_system_pool("shadow-it")
    backend.create_pool(
        "shadow-it",
        NodePool("l4s", "g2-standard-24", node_count=1, accelerators=(Accelerator("nvidia-l4", 2),)),
    )

    result = world.run("sync", str(world.fleet), "--discover")
    assert result.exit_code == 0, result.output
    assert "found by --discover" in result.stdout
    name = f"gke/{gcp.account}/europe-west1/shadow-it"
    rows = listed(world, "--cluster", name)
    assert [(r["pool"], r["gpu"], r["gpus_per_node"], r["slices_per_node"]) for r in rows] == [
        ("l4s", "L4 24GB", 2, 2)
    ]
    found, errors = discover(compile_file(world.fleet).clusters, Drivers(world.sandbox.directory))
    # moto keeps EKS clusters for the whole test process, so other tests' clusters may show up too
    assert errors == {} and name in [c.name for c in found]
    assert not {c.name for c in found} & {"azure", "gcp", "aws"}  # the fleet's own are never "found"


def test_sync_of_one_shard_writes_only_its_clusters(world: World, catalog_url: str):
    compiled = compile_file(world.fleet).clusters
    mine = {c.name for c in in_shard(compiled, [], (1, 3))[0]}
    assert len(mine) == 1  # three clusters, three quota scopes: one each
    result = world.run("sync", str(world.fleet), "--shard", "1/3", "--json")
    assert result.exit_code == 0
    assert set(json.loads(result.stdout)["written"]) == mine
    assert Store(catalog_url).runs()[-1]["shard"] == "1/3"
    refused = world.run("sync", str(world.fleet), "--shard", "3/3")
    assert refused.exit_code == 2  # a usage error
    assert "Invalid value for --shard: '3/3': want i/n with 0 <= i < n, e.g. 0/4" in refused.output


GKE_DEFAULT_POOL_IN_FLEET = "      - {name: default-pool, instanceType: g2-standard-8, nodes: {count: 1}}\n"
CONFLICT = (
    "pool default-pool exists but was not created by provisioner; it is left alone "
    "(rename the pool in the fleet, remove the existing one yourself, or mark the fleet entry "
    "adopt: true to bring it under management; `provisioner import` writes that entry)"
)


def test_a_fleet_pool_an_unowned_pool_holds_is_conflict_drift_and_the_run_closes(
    world: World, catalog_url: str
):
    world.edit(lambda pools: {**pools, "gke": pools["gke"] + GKE_DEFAULT_POOL_IN_FLEET})
    result = world.run("sync", str(world.fleet))
    assert result.exit_code == 1
    assert f"drift gcp/default-pool: conflict ({CONFLICT})" in result.stdout
    assert result.stderr == f"error: gcp: {CONFLICT}\n"
    drift = json.loads(world.run("catalog", "drift", "--json", "--cluster", "gcp").stdout)
    assert [(d["pool"], d["kind"], d["fields"]) for d in drift] == [
        ("default-pool", "conflict", [{"message": CONFLICT}])
    ]
    run = Store(catalog_url).runs()[-1]
    assert (run["status"], run["clusters_ok"], run["clusters_failed"], run["drift"], run["error"]) == (
        "ok",
        3,
        0,
        1,
        None,
    )
    assert run["finished_at"] is not None


def test_a_sync_that_crashes_still_closes_its_run_as_failed(world: World, catalog_url: str):
    store = Store(catalog_url)

    class Unlistable(Drivers):  # a cloud whose driver cannot even be made: a crash, not a cluster error
        def __call__(self, cloud: str):
            raise RuntimeError(f"no driver for {cloud}")

    with pytest.raises(RuntimeError):
        sync(compile_file(world.fleet).clusters, Unlistable(world.sandbox.directory), store)
    run = store.runs()[-1]
    assert (run["status"], run["error"]) == ("failed", "RuntimeError: no driver for aks")
    assert run["finished_at"] is not None


def _refuse_pool_rows_of(catalog_url: str, cluster: str) -> None:
    """A database trigger that refuses every pool row of one cluster: its write fails for real."""
    from sqlalchemy import text

    store = Store(catalog_url)
    theirs = f"NEW.cluster_id = (SELECT id FROM clusters WHERE name = '{cluster}')"
    with store.engine.begin() as conn:
        if store.engine.dialect.name == "sqlite":
            for event in ("INSERT", "UPDATE"):
                conn.execute(
                    text(
                        f"CREATE TRIGGER refuse_{event.lower()} BEFORE {event} ON pools WHEN {theirs} "
                        "BEGIN SELECT RAISE(ABORT, 'pool rows of this cluster are refused'); END"
                    )
                )
        else:
            conn.execute(
                text(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    f"IF {theirs} THEN RAISE EXCEPTION 'pool rows of this cluster are refused'; END IF; "
                    "RETURN NEW; END $$"
                )
            )
            conn.execute(
                text(
                    "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON pools "
                    "FOR EACH ROW EXECUTE FUNCTION refuse()"
                )
            )


def test_a_cluster_that_fails_to_write_is_recorded_failed_and_the_others_are_written(
    world: World, catalog_url: str
):
    def gcp_rows() -> dict[str, dict]:  # the pool rows as stored (their cluster's status aside)
        return {r["pool"]: {**r, "cluster_status": None} for r in listed(world) if r["cluster"] == "gcp"}

    before = gcp_rows()
    _refuse_pool_rows_of(catalog_url, "gcp")
    result = world.run("sync", str(world.fleet))
    assert result.exit_code == 1
    assert "Synced 2 clusters (8 pools)" in result.stdout
    reason = "cannot write to the catalog: pool rows of this cluster are refused"
    assert result.stderr == (
        f"error: gcp: {reason} (its catalog rows are kept as they were)\nsync failed for: gcp\n"
    )
    store = Store(catalog_url)
    gcp = next(c for c in store.clusters() if c["cluster"] == "gcp")
    assert (gcp["status"], gcp["last_error"]) == ("error", reason)
    assert gcp_rows() == before and len(before) == 4
    run = store.runs()[-1]
    assert (run["status"], run["clusters_ok"], run["clusters_failed"], run["error"]) == ("failed", 2, 1, None)
    assert run["finished_at"] is not None


@pytest.mark.parametrize("catalog_url", ["postgresql"], indirect=True)
def test_sync_never_prints_a_password_from_the_query_string(world: World, catalog_url: str):
    database = catalog_url.rsplit("/", 1)[1]
    url = f"postgresql+psycopg:///{database}?host=127.0.0.1&port=5432&user=postgres&password=hunter2"
    result = world.run("sync", str(world.fleet), "--catalog", url)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        f"Synced 3 clusters (12 pools) into postgresql+psycopg:///{database}"
        "?host=127.0.0.1&port=5432&user=postgres&password=***"
    )
    assert "hunter2" not in result.output


def test_apply_with_a_catalog_it_cannot_open_changes_no_cloud(tmp_path: Path):
    world = World(tmp_path, SandboxSettings())
    try:
        closed = "postgresql+psycopg://postgres:hunter2@127.0.0.1:1/catalog"
        result = world.run("apply", str(world.fleet), "--auto-approve", "--catalog", closed)
        assert result.exit_code == 1
        assert result.stderr == (
            "error: catalog postgresql+psycopg://postgres:***@127.0.0.1:1/catalog: "
            "cannot connect (Connection refused)\n"
        )
        assert world.plan_json()["summary"]["create"] == 9  # nothing was made
    finally:
        world.sandbox.stop()
