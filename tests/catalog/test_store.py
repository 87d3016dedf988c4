"""The schema and the store's rules, on both databases; capacity read back; the CronJob."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import kubernetes_validate
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from ruamel.yaml import YAML

from provisioner.capacity import capacity
from provisioner.catalog.models import Base
from provisioner.catalog.store import ClusterIdentity, ObservedPool, Store
from provisioner.render import render_cronjob
from provisioner.sharing import compile_file, desired_state
from tests.conftest import EXAMPLES

IDENTITY = ClusterIdentity("gcp-ml", "gke", "my-project", "us-central1", "ml-gke")


def observed(fleet: str = "fleet.yaml", cluster: str = "gcp-ml") -> list[ObservedPool]:
    compiled = compile_file(EXAMPLES / fleet).cluster(cluster)
    return [
        ObservedPool(desired_state(p), capacity(compiled.cloud.key, desired_state(p))) for p in compiled.pools
    ]


def test_the_migrations_build_exactly_the_models_and_run_twice(catalog_url: str):
    store = Store(catalog_url)
    store.migrate()
    store.migrate()  # a no-op at head
    with store.engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert differences == []


def test_an_older_listing_never_overwrites_a_newer_one(catalog_url: str):
    store = Store(catalog_url)
    store.migrate()
    now = datetime.now(UTC)
    assert store.record_cluster(IDENTITY, observed(), [], now)
    assert not store.record_cluster(IDENTITY, observed()[:1], [], now - timedelta(minutes=5))
    assert [p["pool"] for p in store.live_pools()] == ["a100-mig", "l4-timeshare"]


def test_a_pool_that_comes_back_is_first_seen_again(catalog_url: str):
    store = Store(catalog_url)
    store.migrate()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    pools = observed()
    store.record_cluster(IDENTITY, pools, [], start)
    store.record_cluster(IDENTITY, pools[1:], [], start + timedelta(days=1))
    store.record_cluster(IDENTITY, pools, [], start + timedelta(days=2))
    back = {p["pool"]: p for p in store.live_pools()}
    assert back["a100-mig"]["first_seen"] == "2026-11-03T00:00:00+00:00"
    assert back["l4-timeshare"]["first_seen"] == "2026-11-01T00:00:00+00:00"
    assert back["a100-mig"]["deleted_at"] is None


@pytest.mark.parametrize(
    "fleet", ["fleet.yaml", "mig.yaml", "time-slicing.yaml", "mps.yaml", "exclusive.yaml"]
)
def test_capacity_read_back_from_the_cloud_equals_what_the_compiler_planned(fleet: str):
    for cluster in compile_file(EXAMPLES / fleet).clusters:
        for pool in cluster.pools:
            read = capacity(cluster.cloud.key, desired_state(pool))
            setup = pool.setup
            assert (read.gpu_model, read.mig_profile, read.sharing, read.replicas) == (
                setup.gpu.name,
                setup.mig.name if setup.mig else None,
                setup.sharing,
                setup.replicas,
            ), (cluster.name, pool.pool.name)
            assert (read.slices_per_node, read.memory_per_slice_gb) == (
                setup.slices_per_node,
                setup.memory_per_slice_gb,
            )


@pytest.mark.parametrize("shards", [1, 4])
def test_the_cronjob_validates_against_the_kubernetes_schema(shards: int):
    text = render_cronjob(schedule="0 2 * * *", image="registry.example/provisioner:1.0", shards=shards)
    document = YAML(typ="safe").load(text)
    kubernetes_validate.validate(document, "1.31", strict=True)
    spec = document["spec"]
    job = spec["jobTemplate"]["spec"]
    assert spec["concurrencyPolicy"] == "Forbid" and job["backoffLimit"] == 2
    container = job["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["env"] == [
        {
            "name": "PROVISIONER_CATALOG",
            "valueFrom": {"secretKeyRef": {"name": "provisioner-catalog", "key": "url"}},
        }
    ]
    if shards > 1:
        assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 4, 4)
        assert container["args"][-2:] == ["--shard", "$(JOB_COMPLETION_INDEX)/4"]
    else:
        assert "completionMode" not in job
