"""What a pool offers (capacity.py): read back from the pool as the cloud holds it, it equals what
the compiler planned; and sharing is spelled one way wherever it is printed."""

from __future__ import annotations

import pytest
from rich.console import Console

from provisioner.capacity import Capacity, capacity, sharing_text
from provisioner.catalog.views import pools_table
from provisioner.compile import compile_file, desired_state
from provisioner.plan import value_json
from provisioner.pools import NativeSharing, PoolState, Scaling
from tests.conftest import EXAMPLES


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


def test_a_pool_on_an_instance_type_the_data_does_not_know_offers_no_slices():
    state = PoolState(
        name="cpu",
        instance_type="Standard_D8s_v5",
        gpus_per_node=0,
        mig_setting=None,
        sharing=None,
        spot=False,
        disk_size_gb=None,
        scaling=Scaling.fixed(3),
        labels=(),
        taints=(),
    )
    assert capacity("aks", state) == Capacity(None, 0, None, "exclusive", None, 0, None)


def test_sharing_is_spelled_one_way_in_tables_and_plans():
    assert sharing_text("time-slicing", 4) == "time-slicing x4"
    assert sharing_text("exclusive", None) == ""
    assert sharing_text("memory", None, "compute") == "memory (isolating compute)"
    # plan shows the cloud's own field in the cloud's own words, spelled the same way
    assert value_json("sharing", NativeSharing("TIME_SHARING", 3)) == "TIME_SHARING x3"


def _catalog_row(
    pool: str,
    mig: str | None,
    sharing: str,
    replicas: int | None,
    *,
    isolation: str = "hardware",
    unit: str = "slice",
) -> dict[str, object]:
    return {
        "cluster": "aws",
        "cloud": "eks",
        "pool": pool,
        "owned": True,
        "instance_type": "p4d.24xlarge",
        "gpu": "A100 40GB",
        "gpus_per_node": 8,
        "mig": mig,
        "sharing": sharing,
        "replicas": replicas,
        "slices_per_node": 8,
        "memory_per_slice_gb": 40.0,
        "isolation": isolation,
        "slice_unit": unit,
        "min_nodes": 1,
        "max_nodes": 1,
        "current_nodes": None,
    }


def test_the_catalog_table_joins_mig_and_sharing_or_says_whole_gpus():
    rows = [
        _catalog_row("both", "1g.5gb", "time-slicing", 3),
        _catalog_row("shared", None, "mps", 4),
        _catalog_row("mig", "1g.5gb", "exclusive", None),
        _catalog_row("whole", None, "exclusive", None),
        _catalog_row("cgpu", None, "memory", None, isolation="memory", unit="GiB"),
    ]
    console = Console(record=True, width=200)
    console.print(pools_table(rows))
    slicing = {
        cells[2]: cells[6]
        for line in console.export_text().splitlines()
        if len(cells := [c.strip() for c in line.strip("│┃ ").split("│")]) == 10
    }
    assert {name: slicing[name] for name in ("both", "shared", "mig", "whole", "cgpu")} == {
        "both": "1g.5gb + time-slicing x3",
        "shared": "mps x4",
        "mig": "1g.5gb",
        "whole": "whole GPUs",
        "cgpu": "memory (isolating memory)",
    }
