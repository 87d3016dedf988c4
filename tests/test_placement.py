"""The placement API over a real catalog (the Store on SQLite, and PostgreSQL once): every cloud and
mode, the choice rule's order, what the catalog's state adds, and requests that are not ones."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from provisioner.capacity import capacity
from provisioner.catalog.listing import ClusterIdentity, ObservedPool
from provisioner.catalog.store import Store
from provisioner.compile import compile_file, desired_state
from provisioner.errors import BadRequest, NoPlacement
from provisioner.placement import Request, place
from provisioner.request import parse_size
from tests.placements import ACK_POOL_IDS, FLEET, catalog, fill

GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return catalog(tmp_path_factory.mktemp("placement"))


def test_the_api_imports_no_cloud_sdk_and_no_database_layer():
    code = (
        "import sys, provisioner.placement, provisioner.podspec; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'boto3', 'botocore', 'google', 'azure', 'alibabacloud_cs20151215', 'sqlalchemy', 'kubernetes'}))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


EVERY_CLOUD_AND_MODE = {
    "aks MIG (a spot pool with the user's taint)": (
        Request(mig="1g.10gb", cluster="azure"),
        {
            "cluster": "azure",
            "cloud": "aks",
            "pool": "a100mig7",
            "isolation": "hardware",
            "slice": {"memory_gb": 10.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "nodeSelector": {"provisioner.io/pool": "a100mig7"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
                GPU_TAINT,
                {
                    "key": "kubernetes.azure.com/scalesetpriority",
                    "operator": "Equal",
                    "value": "spot",
                    "effect": "NoSchedule",
                },
            ],
        },
    ),
    "aks MIG + time-slicing, allowed by isolation none": (
        Request(mig="1g.10gb", isolation="none", cluster="azure"),
        {
            "cluster": "azure",
            "cloud": "aks",
            "pool": "a100migts",
            "isolation": "none",
            "slice": {"memory_gb": 5.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu.shared": 1}},
            "nodeSelector": {"provisioner.io/pool": "a100migts"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "aks time-slicing": (
        Request(gpu_memory="4GB", cluster="azure"),
        {
            "cluster": "azure",
            "cloud": "aks",
            "pool": "t4ts",
            "isolation": "none",
            "slice": {"memory_gb": 4.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu.shared": 1}},
            "nodeSelector": {"provisioner.io/pool": "t4ts"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "aks MPS": (
        Request(gpu_memory="4GB", isolation="compute", cluster="azure"),
        {
            "cluster": "azure",
            "cloud": "aks",
            "pool": "t4mps",
            "isolation": "compute",
            "slice": {"memory_gb": 4.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu.shared": 1}},
            "nodeSelector": {"provisioner.io/pool": "t4mps"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "aks whole GPUs": (
        Request(gpus=2, cluster="azure"),
        {
            "cluster": "azure",
            "cloud": "aks",
            "pool": "a100x2",
            "isolation": "hardware",
            "slice": {"memory_gb": 80.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu": 2}},
            "nodeSelector": {"provisioner.io/pool": "a100x2"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "gke MIG": (
        Request(mig="1g.5gb", cloud="gke"),
        {
            "cluster": "gcp",
            "cloud": "gke",
            "pool": "a100-mig",
            "isolation": "hardware",
            "slice": {"memory_gb": 5.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "nodeSelector": {
                "provisioner.io/pool": "a100-mig",
                "cloud.google.com/gke-gpu-partition-size": "1g.5gb",
            },
            "tolerations": [GPU_TAINT],
        },
    ),
    "gke time-sharing": (
        Request(gpu_memory="6GB", cloud="gke"),
        {
            "cluster": "gcp",
            "cloud": "gke",
            "pool": "l4-ts",
            "isolation": "none",
            "slice": {"memory_gb": 6.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "nodeSelector": {
                "provisioner.io/pool": "l4-ts",
                "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing",
                "cloud.google.com/gke-max-shared-clients-per-gpu": "4",
            },
            "tolerations": [GPU_TAINT],
        },
    ),
    "gke MPS": (
        Request(gpu_memory="6GB", isolation="compute", cloud="gke"),
        {
            "cluster": "gcp",
            "cloud": "gke",
            "pool": "l4-mps",
            "isolation": "compute",
            "slice": {"memory_gb": 6.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "nodeSelector": {
                "provisioner.io/pool": "l4-mps",
                "cloud.google.com/gke-gpu-sharing-strategy": "mps",
                "cloud.google.com/gke-max-shared-clients-per-gpu": "4",
            },
            "tolerations": [GPU_TAINT],
            "hostIPC": True,
        },
    ),
    "gke MIG + MPS": (
        Request(mig="2g.10gb", isolation="compute", cloud="gke"),
        {
            "cluster": "gcp",
            "cloud": "gke",
            "pool": "a100-mig-mps",
            "isolation": "compute",
            "slice": {"memory_gb": 5.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "nodeSelector": {
                "provisioner.io/pool": "a100-mig-mps",
                "cloud.google.com/gke-gpu-partition-size": "2g.10gb",
                "cloud.google.com/gke-gpu-sharing-strategy": "mps",
                "cloud.google.com/gke-max-shared-clients-per-gpu": "2",
            },
            "tolerations": [GPU_TAINT],
            "hostIPC": True,
        },
    ),
    "eks MIG": (
        Request(mig="1g.5gb", cloud="eks"),
        {
            "cluster": "aws",
            "cloud": "eks",
            "pool": "p4d-mig",
            "isolation": "hardware",
            "slice": {"memory_gb": 5.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "nodeSelector": {"provisioner.io/pool": "p4d-mig"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "eks time-slicing": (
        Request(gpu_memory="3GB", cloud="eks"),
        {
            "cluster": "aws",
            "cloud": "eks",
            "pool": "ts-a",
            "isolation": "none",
            "slice": {"memory_gb": 3.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu.shared": 1}},
            "nodeSelector": {"provisioner.io/pool": "ts-a"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "eks whole GPUs": (
        Request(gpus=4),
        {
            "cluster": "aws",
            "cloud": "eks",
            "pool": "a10g-x4",
            "isolation": "hardware",
            "slice": {"memory_gb": 24.0, "unit": "slice"},
            "resources": {"limits": {"nvidia.com/gpu": 4}},
            "nodeSelector": {"provisioner.io/pool": "a10g-x4"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "ack memory sharing, memory isolated (cgpu)": (
        Request(gpu_memory="3GiB", isolation="memory", cloud="ack"),
        {
            "cluster": "ali",
            "cloud": "ack",
            "pool": "a10-cgpu",
            "isolation": "memory",
            "slice": {"memory_gb": 3.22, "unit": "GiB"},
            "resources": {"limits": {"aliyun.com/gpu-mem": 3}},
            "nodeSelector": {"provisioner.io/pool": "a10-cgpu"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "ack memory sharing, compute isolated (core_mem)": (
        Request(gpu_memory="5GB", isolation="compute", cloud="ack"),
        {
            "cluster": "ali",
            "cloud": "ack",
            "pool": "a10-coremem",
            "isolation": "compute",
            "slice": {"memory_gb": 5.37, "unit": "GiB"},
            # 5 GB is 4.66 GiB: 5 whole GiB, and the same share of the GPU's compute (5/22 -> 23%)
            "resources": {"limits": {"aliyun.com/gpu-mem": 5, "aliyun.com/gpu-core.percentage": 23}},
            "nodeSelector": {"provisioner.io/pool": "a10-coremem"},
            "tolerations": [GPU_TAINT],
        },
    ),
    "ack edge pool sharing (the TrueFoundry 4000MB)": (
        Request(gpu_memory="4000MB", cloud="ack"),
        {
            "cluster": "ali",
            "cloud": "ack",
            "pool": "edge-t4",
            "isolation": "none",
            "slice": {"memory_gb": 4.29, "unit": "GiB"},
            "resources": {"limits": {"aliyun.com/gpu-mem": 4}},
            "nodeSelector": {"provisioner.io/pool": "edge-t4"},
            "tolerations": [GPU_TAINT],
        },
    ),
}


@pytest.mark.parametrize(("request_", "expected"), EVERY_CLOUD_AND_MODE.values(), ids=EVERY_CLOUD_AND_MODE)
def test_every_cloud_and_mode_gets_the_pod_spec_its_pool_needs(
    store: Store, request_: Request, expected: dict[str, Any]
):
    shown = place(store, request_).json()
    # Every key the contract had, as it was; "capacity" is the tier's (tests below).
    assert {k: v for k, v in shown.items() if k != "capacity"} == expected
    assert shown["capacity"]["tier"] == "unknown"  # the catalog holds no allocation


def test_the_rows_catalog_ls_prints_place_like_the_store(store: Store):
    rows = store.live_pools()
    assert place(rows, Request(mig="1g.5gb", cloud="gke")) == place(store, Request(mig="1g.5gb", cloud="gke"))


# The choice rule, each step against the next.


def test_the_smallest_slice_that_fits_wins(store: Store):
    chosen = place(store, Request(gpu_memory="4GB", cloud="aks"))
    # t4ts (4.0 GB) over a100migts (5.0), a100mig7 (10.0) and a100x2 (80.0)
    assert (chosen.pool, chosen.slice_memory_gb, chosen.others) == ("t4ts", 4.0, 4)


def test_less_memory_beats_weaker_isolation(store: Store):
    # gcp: a100-mig 5.0 GB hardware, a100-mig-mps 5.0 GB compute, l4-ts 6.0 GB none
    chosen = place(store, Request(gpu_memory="5GB", cloud="gke"))
    assert (chosen.pool, chosen.isolation) == ("a100-mig-mps", "compute")


@pytest.mark.parametrize(
    ("isolation", "pool"),
    [(None, "t4ts"), ("none", "t4ts"), ("memory", "t4mps"), ("compute", "t4mps"), ("hardware", "a100mig7")],
)
def test_among_equal_slices_the_weakest_isolation_that_meets_the_minimum_wins(
    store: Store, isolation: str | None, pool: str
):
    assert place(store, Request(gpu_memory="4GB", isolation=isolation, cloud="aks")).pool == pool


def test_then_more_capacity_at_maximum_size_then_names(store: Store):
    chosen = place(store, Request(gpu_memory="3GB", cloud="eks"))
    # ts-0-small comes first by name but holds 16 pods at its maximum; ts-a and ts-b hold 48 each.
    assert (chosen.pool, chosen.capacity_at_max, chosen.others) == ("ts-a", 48, 4)
    assert place(store, Request(gpu_memory="3GB", cloud="eks", pool="ts-0-small")).capacity_at_max == 16


def test_a_mig_request_wants_a_mig_instance_s_isolation_unless_lowered(store: Store):
    assert place(store, Request(mig="1g.10gb")).pool == "a100mig7"
    assert place(store, Request(mig="1g.10gb", isolation="none")).pool == "a100migts"


def test_narrowing_by_gpu_model(store: Store):
    assert place(store, Request(gpu_memory="3GB", gpu="L4")).pool == "l4-ts"
    assert place(store, Request(gpu_memory="3GB", gpu="A100-80GB")).pool == "a100migts"


def test_a_memory_request_never_spans_gpus_on_a_memory_scheduler(store: Store):
    with pytest.raises(NoPlacement) as caught:
        place(store, Request(gpu_memory="23GiB", cloud="ack"))
    assert str(caught.value) == "no live pool in --cloud ack offers 23GiB of GPU memory"
    assert caught.value.closest == [
        "ali/a10-cgpu (ack): A10 24GB memory by the GiB (22 GiB per GPU, isolation memory); "
        "23 GiB is more than the 22 GiB of one GPU",
        "ali/a10-coremem (ack): A10 24GB memory by the GiB (22 GiB per GPU, isolation compute); "
        "23 GiB is more than the 22 GiB of one GPU",
        "ali/edge-t4 (ack): T4 16GB memory by the GiB (15 GiB per GPU, isolation none); "
        "23 GiB is more than the 15 GiB of one GPU",
    ]


def test_nothing_fits_names_the_closest_pools_and_what_they_offer(store: Store):
    with pytest.raises(NoPlacement) as caught:
        place(store, Request(gpu_memory="90GB"))
    assert str(caught.value) == "no live pool offers 90GB of GPU memory"
    assert caught.value.closest[0] == (
        "azure/a100x2 (aks): whole A100 80GB GPUs (80.0 GB each, 2 per node); "
        "its slices have less than 90.0 GB"
    )
    assert len(caught.value.closest) == 3


def test_a_mig_profile_no_pool_offers(store: Store):
    with pytest.raises(NoPlacement) as caught:
        place(store, Request(mig="3g.40gb"))
    assert str(caught.value) == "no live pool offers a 3g.40gb MIG slice with isolation hardware or stronger"
    assert caught.value.closest[0].startswith("azure/a100mig7 (aks): 1g.10gb MIG slices of A100 80GB")


def test_narrowing_to_nothing_says_so(store: Store):
    with pytest.raises(NoPlacement, match="no live GPU pool in the catalog is in --cluster nowhere"):
        place(store, Request(gpus=1, cluster="nowhere"))


def test_an_empty_catalog(tmp_path: Path):
    empty = Store(f"sqlite:///{tmp_path / 'empty.db'}")
    empty.migrate()
    with pytest.raises(NoPlacement, match=r"the catalog holds no live GPU pools; `provisioner sync FLEET`"):
        place(empty, Request(gpus=1))


# What the catalog's state adds.


def test_a_cluster_whose_last_sync_failed_is_still_placed_with_a_warning(tmp_path: Path):
    store = catalog(tmp_path)
    store.record_failure(ClusterIdentity("gcp", "gke", "account", "location", "gcp"), "timed out")
    chosen = place(store, Request(mig="1g.5gb", cloud="gke"))
    assert chosen.pool == "a100-mig"
    assert len(chosen.warnings) == 1
    assert chosen.warnings[0].startswith("the last sync of cluster gcp failed; this pool is as it was at ")


def test_a_cluster_not_synced_for_days_is_placed_with_a_warning(tmp_path: Path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    store = Store(f"sqlite:///{tmp_path / 'old.db'}")
    fill(store, fleet, observed_at=datetime.now(UTC) - timedelta(days=5, hours=1))
    chosen = place(store, Request(mig="1g.5gb", cloud="gke"))
    assert len(chosen.warnings) == 1
    assert chosen.warnings[0].startswith("cluster gcp was last synced 5 days ago (")
    assert not place(catalog(tmp_path / "fresh"), Request(mig="1g.5gb", cloud="gke")).warnings


def test_deleted_pools_are_never_chosen(tmp_path: Path):
    store = catalog(tmp_path)
    assert place(store, Request(gpus=2)).pool == "a10g-x4"  # 24 GB GPUs before 80 GB ones
    aws = compile_file(tmp_path / "fleet.yaml").cluster("aws")
    states = [desired_state(p) for p in aws.pools]
    kept = [ObservedPool(s, capacity("eks", s)) for s in states if s.name != "a10g-x4"]
    identity = ClusterIdentity("aws", "eks", "account", "location", "aws")
    store.record_cluster(identity, kept, [], datetime.now(UTC))  # a listing without a10g-x4
    assert [p["deleted_at"] is not None for p in store.pools_ever("aws") if p["pool"] == "a10g-x4"] == [True]
    assert place(store, Request(gpus=2)).pool == "a100x2"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    import psycopg

    database = f"provisioner_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{database}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def test_the_same_choices_on_postgresql(tmp_path: Path, postgres_url: str, store: Store):
    on_postgres = catalog(tmp_path, postgres_url)
    for request_, expected in EVERY_CLOUD_AND_MODE.values():
        shown = place(on_postgres, request_).json()
        assert {k: v for k, v in shown.items() if k != "capacity"} == expected


# Requests that are not ones.


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"mig": "1g.7gb"},
            "mig: '1g.7gb' is not a MIG profile of any GPU the tool knows; profiles: 1g.5gb, ",
        ),
        (
            {"mig": "small"},
            "mig: 'small' is not a MIG profile of any GPU the tool knows (a MIG profile reads like",
        ),
        (
            {"mig": "1g.5gb", "gpu": "A100-80GB"},
            "mig: '1g.5gb' is not a MIG profile of the A100 80GB; "
            "profiles: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb",
        ),
        ({"mig": "1g.5gb", "gpu": "T4"}, "mig: '1g.5gb' is not a MIG profile of the T4 16GB; profiles: none"),
        ({"gpu_memory": "4"}, "gpu_memory: '4' has no unit; say which, e.g. 4GB, 4000MB or 4GiB"),
        ({"gpu_memory": "0GB"}, "gpu_memory: '0GB': a size must be more than zero"),
        ({"gpu_memory": "-2GiB"}, "gpu_memory: '-2GiB': a size must be more than zero"),
        ({"gpu_memory": "4 parsecs"}, "gpu_memory: '4 parsecs': unknown unit 'parsecs'; want B, KB"),
        ({"gpu_memory": "four"}, "gpu_memory: 'four' is not a size; want a number and a unit"),
        (
            {"mig": "1g.5gb", "gpu_memory": "4GB"},
            "ask for exactly one of --mig PROFILE, --gpu-memory SIZE and --gpus N "
            "(got --mig and --gpu-memory)",
        ),
        ({}, "ask for exactly one of --mig PROFILE, --gpu-memory SIZE and --gpus N (got none)"),
        ({"gpus": 0}, "gpus: 0 GPUs; ask for at least 1"),
        ({"gpus": -1}, "gpus: -1 GPUs; ask for at least 1"),
        (
            {"gpus": 1, "isolation": "total"},
            "isolation: 'total' is not a level; want one of none, memory, compute",
        ),
        ({"gpus": 1, "cloud": "oci"}, "cloud: 'oci' is not a cloud; want one of aks, gke, eks, ack"),
        ({"gpus": 1, "gpu": "Z80"}, "gpu: 'Z80' is not a GPU model; known: "),
    ],
)
def test_bad_requests_say_what_is_wrong(kwargs: dict[str, Any], message: str):
    with pytest.raises(BadRequest) as caught:
        Request(**kwargs)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4GB", 4 * 10**9),
        ("4000MB", 4 * 10**9),
        ("4GiB", 4 * 2**30),
        ("4Gi", 4 * 2**30),
        ("1.5 GiB", 3 * 2**29),
        ("4gb", 4 * 10**9),
        ("512MiB", 2**29),
    ],
)
def test_sizes(text: str, size: int):
    assert parse_size(text) == size


def test_every_cloud_says_how_pods_land_on_its_pools():
    from provisioner import hardware

    clouds = hardware.load().clouds
    labels = {
        key: cloud.pool_label.key for key, cloud in clouds.items() if cloud.placement and cloud.pool_label
    }
    assert labels == {  # how verify and inspect find a pool's nodes that lack provisioner.io/pool
        "aks": "kubernetes.azure.com/agentpool",
        "gke": "cloud.google.com/gke-nodepool",
        "eks": "eks.amazonaws.com/nodegroup",
        "ack": "alibabacloud.com/nodepool-id",
    }


@pytest.mark.parametrize("cloud", ["aks", "gke", "eks", "ack"])
def test_the_pod_selects_the_fleet_pool_on_every_cloud(store: Store, cloud: str):
    from provisioner import hardware

    chosen = place(store, Request(gpu_memory="1GiB", cloud=cloud))
    # The fleet pool's name, which every generation of it carries: never the cloud's pool label,
    # which names one cloud pool (on ACK its ID), so a pod evicted by a replacement lands again.
    assert next(iter(chosen.node_selector.items())) == ("provisioner.io/pool", chosen.pool)
    assert hardware.load().clouds[cloud].pool_label.key not in chosen.node_selector
    assert not set(chosen.node_selector.values()) & set(ACK_POOL_IDS.values())


def test_an_ack_pool_is_placeable_without_its_pool_id(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path / 'catalog.db'}")
    store.migrate()
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    cluster = compile_file(fleet).cluster("ali")
    assert cluster is not None
    pools = [ObservedPool(desired_state(p), capacity("ack", desired_state(p))) for p in cluster.pools]
    store.record_cluster(ClusterIdentity("ali", "ack", "a", "l", "ali"), pools, [], datetime.now(UTC))
    chosen = place(store, Request(gpu_memory="1GiB", pool="a10-cgpu"))
    assert chosen.node_selector == {"provisioner.io/pool": "a10-cgpu"}  # no "sync again" for its ID
