"""The live pools a long-running reader keeps between requests (Store.snapshot), on SQLite and
PostgreSQL: kept while the catalog is unchanged, replaced by any write from any Store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from provisioner.capacity import capacity
from provisioner.catalog.store import ClusterIdentity, ObservedPool, Store
from provisioner.compile import compile_file, desired_state
from tests.placements import FLEET

AT = datetime.now(UTC)


def _store(url: str) -> Store:
    store = Store(url)
    store.migrate()
    return store


def _listing(tmp_path: Path) -> dict[str, tuple[str, list[Any]]]:
    """Every cluster of the placement tests' fleet: its cloud and its pools' states."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    return {c.name: (c.cloud.key, [desired_state(p) for p in c.pools]) for c in compile_file(fleet).clusters}


def _record(store: Store, name: str, cloud: str, states: list[Any], at: datetime = AT) -> None:
    pools = [ObservedPool(s, capacity(cloud, s)) for s in states]
    store.record_cluster(ClusterIdentity(name, cloud, "account", "location", name), pools, [], at)


def test_the_snapshot_is_kept_until_any_store_writes(catalog_url: str, tmp_path: Path):
    reader, writer = _store(catalog_url), Store(catalog_url)  # two stores: two processes' worth
    listing = _listing(tmp_path)
    cloud, states = listing["aws"]
    _record(writer, "aws", cloud, states)
    first = reader.snapshot()
    assert reader.snapshot() is first  # nothing written: the same pools, not read again
    assert list(first.pools) == reader.live_pools()

    _record(writer, "aws", cloud, states[:-1], AT + timedelta(minutes=1))  # a10g-x4 is gone
    second = reader.snapshot()
    assert second is not first and second.serial > first.serial
    assert list(second.pools) == reader.live_pools()
    assert "a10g-x4" not in [p["pool"] for p in second.pools]

    writer.record_failure(ClusterIdentity("aws", cloud, "account", "location", "aws"), "timed out")
    third = reader.snapshot()
    assert third is not second
    assert {p["cluster_status"] for p in third.pools} == {"error"}

    writer.finish_run(writer.start_run(None), ok=1, failed=0, pools=0, drift=0)  # no pool changed
    assert reader.snapshot() is third


def test_a_view_of_a_snapshot_is_built_once(catalog_url: str, tmp_path: Path):
    store = _store(catalog_url)
    cloud, states = _listing(tmp_path)["gcp"]
    _record(store, "gcp", cloud, states)
    built: list[int] = []

    def count(pools: Any) -> int:
        built.append(len(pools))
        return len(pools)

    assert store.snapshot().derived(count) == store.snapshot().derived(count) == len(states)
    assert built == [len(states)]
    _record(store, "gcp", cloud, states[:1], AT + timedelta(minutes=1))
    assert store.snapshot().derived(count) == 1
    assert built == [len(states), 1]
