"""The emulators are oracles independent of the tool: each keeps its own rule tables and imports
nothing of the tool outside `provisioner.sandbox`, so a wrong fact in the tool's hardware data
fails a test here (or in the driver contract) instead of passing both the compiler and the
emulator. The tables are compared with the tool's data below: a disagreement is a wrong fact on
one side, to be settled from the cloud's own reference."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from provisioner import hardware
from provisioner.sandbox.aks import models as aks
from provisioner.sandbox.eks import models as eks
from provisioner.sandbox.gke import models as gke
from provisioner.sandbox.kube import clouds as kube_clouds
from provisioner.sandbox.kube import nvml as kube_nvml
from provisioner.sandbox.kube import rules as kube_rules

SANDBOX = Path(__file__).parents[1] / "provisioner" / "sandbox"
EMULATOR_MODULES = sorted(
    p for emulator in ("aks", "gke", "eks", "ack", "kube") for p in (SANDBOX / emulator).glob("*.py")
)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(source: str) -> list[str]:
    """Every module `source` imports when it runs (imports inside functions too), leaving out
    those under `if TYPE_CHECKING:`, which only type checkers read."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from provisioner import hardware` imports provisioner.hardware
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def tool_imports(source: str) -> list[str]:
    """The imports of the tool's own modules outside the sandbox."""
    return [
        name
        for name in runtime_imports(source)
        if name.split(".")[0] == "provisioner" and not name.startswith("provisioner.sandbox.")
    ]


def test_the_import_check_sees_runtime_imports_and_skips_type_checking_ones():
    source = """
from typing import TYPE_CHECKING
from provisioner import hardware
import provisioner.fleet
from provisioner.sandbox.engine import Engine
if TYPE_CHECKING:
    from provisioner.clusters import ClusterRef
else:
    from provisioner.pools import PoolState
def later():
    from provisioner.compile import compile_file
"""
    assert tool_imports(source) == [
        "provisioner.hardware",
        "provisioner.fleet",
        "provisioner.pools.PoolState",
        "provisioner.compile.compile_file",
    ]


@pytest.mark.parametrize("module", EMULATOR_MODULES, ids=lambda p: str(p.relative_to(SANDBOX)))
def test_emulators_import_nothing_of_the_tool(module: Path):
    assert tool_imports(module.read_text(encoding="utf-8")) == []


def test_every_cloud_has_moto_s_split():
    for cloud in ("aks", "gke", "eks", "ack", "kube"):
        assert {p.name for p in (SANDBOX / cloud).glob("*.py")} >= {
            "models.py",
            "exceptions.py",
            "responses.py",
            "urls.py",
        }, cloud


# The tool's data against the emulators' own tables.

DATA = hardware.load()


@pytest.mark.parametrize("size", sorted(DATA.instance_types["aks"]))
def test_aks_knows_each_vm_size_of_the_tool_and_agrees_on_mig(size: str):
    machine = DATA.instance_types["aks"][size]
    assert aks.GPU_VM_SIZES_MIG.get(size) == machine.gpu.mig_capable


@pytest.mark.parametrize("size", sorted(DATA.instance_types["aks"]))
def test_aks_takes_the_gpu_instance_profile_the_tool_sets_for_each_mig_profile(size: str):
    cloud, gpu = DATA.clouds["aks"], DATA.instance_types["aks"][size].gpu
    settings = {cloud.mig_setting(profile) for profile in cloud.mig_profiles(gpu)}
    assert settings <= set(aks.GPU_INSTANCE_PROFILES)


@pytest.mark.parametrize("machine_type", sorted(DATA.instance_types["gke"]))
def test_gke_attaches_the_tool_s_accelerator_type_and_count_to_each_machine_type(machine_type: str):
    machine = DATA.instance_types["gke"][machine_type]
    counts = (machine.gpus,) if machine.gpus is not None else machine.gpu_choices
    assert gke.GPU_MACHINE_TYPES.get(machine_type) == (machine.accelerator, counts)


@pytest.mark.parametrize("machine_type", sorted(DATA.instance_types["gke"]))
def test_gke_partitions_each_gpu_into_every_profile_the_tool_offers(machine_type: str):
    machine, cloud = DATA.instance_types["gke"][machine_type], DATA.clouds["gke"]
    offered = {profile.name for profile in cloud.mig_profiles(machine.gpu)}
    assert offered <= set(gke.PARTITION_SIZES.get(machine.accelerator or "", ()))


def test_eks_limits_agree_with_the_tool_s():
    limits = DATA.clouds["eks"].limits
    assert (limits.max_taints, limits.max_label_key_length, limits.max_taint_key_length) == (
        eks.MAX_TAINTS,
        eks.LENGTHS["label key"][1],
        eks.LENGTHS["taint key"][1],
    )
    assert limits.min_label_value_length == eks.LENGTHS["label value"][0]


@pytest.mark.parametrize(
    ("cloud", "pattern"),
    [("aks", aks.POOL_NAME), ("gke", gke.POOL_NAME), ("eks", eks.NODEGROUP_NAME)],
)
def test_pool_names_the_tool_accepts_the_emulator_accepts(cloud: str, pattern):
    """On names at each rule's edges: lengths, first and last characters, case, - and _."""
    names = [
        "a",
        "a1",
        "a" * 12,
        "a" * 13,
        "a" * 40,
        "a" * 41,
        "a" * 63,
        "a" * 64,
        "1a",
        "A",
        "a-b",
        "a_b",
        "a-",
    ]
    tool = DATA.clouds[cloud].pool_name_pattern
    assert [bool(tool.match(n)) for n in names] == [bool(pattern.match(n)) for n in names]


# The Kubernetes API's hardware tables against the tool's data: the GPUs each instance type carries
# decide what a node advertises, so a disagreement would make `verify` pass or fail wrongly.

KUBE_INSTANCE_TABLES = {
    "aks": kube_clouds.AKS_VM_SIZES,
    "eks": kube_clouds.EKS_INSTANCE_TYPES,
    "ack": kube_clouds.ACK_INSTANCE_TYPES,
}


@pytest.mark.parametrize("cloud", sorted(KUBE_INSTANCE_TABLES))
def test_kube_nodes_carry_the_gpus_the_tool_says_each_instance_type_has(cloud: str):
    tool = {name: (machine.gpu.key, machine.gpus) for name, machine in DATA.instance_types[cloud].items()}
    assert KUBE_INSTANCE_TABLES[cloud] == tool


def test_kube_knows_the_gpu_of_each_gke_accelerator_the_tool_uses():
    tool = {m.accelerator: m.gpu.key for m in DATA.instance_types["gke"].values()}
    assert {a: kube_clouds.GKE_ACCELERATORS[a] for a in tool} == tool


def test_kube_mig_instances_agree_with_the_tool_s_profiles():
    tool = {
        key: {name: (profile.instances, profile.gi) for name, profile in gpu.mig.items()}
        for key, gpu in DATA.gpus.items()
        if gpu.mig
    }
    assert tool == kube_rules.MIG_PROFILES


def test_kube_has_a_product_name_for_every_gpu_of_the_tool():
    assert set(kube_rules.PRODUCTS) == set(DATA.gpus)


def test_kube_has_the_nvml_view_of_every_gpu_of_the_tool_and_gfd_s_label_follows_its_name():
    """The DRA driver publishes NVML's name (spaces); GFD's gpu.product is it with hyphens."""
    assert set(kube_nvml.GPUS) == set(DATA.gpus)
    assert {k: g.name.replace(" ", "-") for k, g in kube_nvml.GPUS.items()} == kube_rules.PRODUCTS
    assert {k.replace(" ", "-") for k in kube_nvml.PCIE_NAMES.values()} == set(kube_nvml.PCIE_NAMES)
    assert set(kube_nvml.PCIE_NAMES) == set(kube_rules.PCIE_PRODUCTS.values())


def test_kube_aks_mig_profiles_name_the_gi_ids_the_tool_uses():
    assert dict(DATA.clouds["aks"].mig_values) == kube_clouds.AKS_GPU_INSTANCE_PROFILE_GI
