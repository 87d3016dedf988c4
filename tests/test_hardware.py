"""The hardware data agrees with docs/FACTS.md, row for row.

The test reads FACTS.md itself (no transcribed copy) and expands the shorthand its tables use
("NC24ads / NC48ads", "1g/2g/4g", "g5.xlarge..16xlarge", "-24, -48"). A cell in a shorthand the
reader does not know fails loudly, so a changed FACTS.md row is never skipped. Rows the data holds
beyond FACTS.md are listed below with their sources.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from provisioner import hardware

HW = hardware.load()

# The facts document is the project's own: docs/FACTS.md, beside the data it checks.
FACTS_PATH = Path(__file__).resolve().parents[1] / "docs" / "FACTS.md"


@functools.cache
def _facts_text() -> str:
    return FACTS_PATH.read_text(encoding="utf-8")


def _section(heading: str) -> str:
    text = _facts_text()
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"FACTS.md has no section '## {heading}'"
    return match[1]


def _table(heading: str) -> list[list[str]]:
    """The data rows of the first markdown table under `heading`, cells stripped."""
    rows = [line for line in _section(heading).splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _facts_mig() -> dict[str, str]:
    """FACTS.md "MIG profiles per GPU": GPU name -> "profile xN, ..."."""
    return {gpu: profiles for gpus, profiles in _table("MIG profiles per GPU") for gpu in gpus.split(", ")}


def _facts_not_mig() -> list[str]:
    """The GPU names in FACTS.md's "Not MIG-capable: T4, L4, ... and other ..." line."""
    match = re.search(r"^Not MIG-capable: (.+?) and other", _section("MIG profiles per GPU"), re.M)
    assert match, "FACTS.md's MIG section has no 'Not MIG-capable: ... and other' line"
    return match[1].split(", ")


def _same_gpu(data_name: str, facts_name: str) -> bool:
    """FACTS.md names some GPUs without their memory ("T4" for "T4 16GB")."""
    return data_name == facts_name or data_name.startswith(facts_name + " ")


_EC2_SIZE = re.compile(r"^(\d*)xlarge$")


def _ec2_range(text: str) -> list[str]:
    """ "g5.xlarge..16xlarge": the EC2 sizes between, each twice the last."""
    start, end = text.split("..")
    family, first = start.split(".")
    low, high = (_EC2_SIZE.match(size) for size in (first, end))
    assert low and high, f"FACTS.md: cannot read the size range {text!r}"
    sizes, n = [], int(low[1] or 1)
    while n <= int(high[1] or 1):
        sizes.append(f"{family}.{'' if n == 1 else n}xlarge")
        n *= 2
    return sizes


def _complete(part: str, previous: str | None) -> list[str]:
    """One name of an instance-type cell, completed from the name before it where abbreviated."""
    if ".." in part:
        return _ec2_range(part)
    if previous is None:
        return [part]
    if part.startswith("-"):  # "-24" after "g2-standard-32"
        return [previous.rsplit("-", 1)[0] + part]
    if previous.startswith("Standard_") and not part.startswith("Standard_"):  # "NC48ads" after an AKS name
        tail = previous.split("_")[1:]
        given = part.split("_")
        return ["_".join(["Standard", *given, *tail[len(given) :]])]
    if "." in previous and "." not in part:  # "24xlarge" after "g5.12xlarge"
        return [previous.split(".")[0] + "." + part]
    if "-" in previous and "-" not in part:  # "2g" after "a2-highgpu-1g"
        return [previous.rsplit("-", 1)[0] + "-" + part]
    return [part]


def _name_groups(cell: str) -> list[list[str]]:
    """ "A / B, C / D": the names of each " / " group, abbreviations completed."""
    groups: list[list[str]] = []
    previous = None
    for group in cell.split(" / "):
        names: list[str] = []
        for token in group.split(", "):
            for part in token.split("/"):
                completed = _complete(part, previous)
                names += completed
                previous = completed[-1]
        groups.append(names)
    return groups


_GPU_CELL = re.compile(r"^(?:(?P<counts>[\d ,/]+) x )?(?P<gpu>[^(]+?)(?: \((?P<note>[^)]*)\))?$")
_VARIANTS = re.compile(r"^(?P<base>\S+) \((?P<sizes>[\d, ]+): (?P<counts>[\d,]+)\)$")
_WILDCARD = re.compile(r"^(?P<prefix>\S+)\* with (?P<accelerator>\S+)$")


@functools.cache
def _facts_instances() -> tuple[dict[tuple[str, str], tuple], list[tuple[str, str, str, str | None]]]:
    """FACTS.md "Instance types and their GPUs", expanded: (cloud, name) -> (GPU, GPUs, accelerator,
    MIG-capable or None where FACTS says nothing); and the wildcard rows (cloud, prefix, GPU, accelerator)."""
    rows: dict[tuple[str, str], tuple] = {}
    wildcards = []
    for cloud_title, names_cell, gpu_cell in _table("Instance types and their GPUs"):
        cloud = cloud_title.lower()
        gpu_match = _GPU_CELL.match(gpu_cell)
        assert gpu_match, f"FACTS.md: cannot read the GPU cell {gpu_cell!r}"
        notes = re.split(r"[,;] ", gpu_match["note"] or "")
        accelerator = next((n for n in notes if n.startswith("nvidia-")), None)
        mig = False if "not MIG" in notes else None
        gpu = gpu_match["gpu"]
        if wildcard := _WILDCARD.match(names_cell):
            assert "count chosen by the user" in notes, f"FACTS.md: {names_cell!r} gives no count rule"
            wildcards.append((cloud, wildcard["prefix"], gpu, wildcard["accelerator"]))
            continue
        if variants := _VARIANTS.match(names_cell):  # "Standard_NC4as_T4_v3 (8, 16, 64: 1,1,4)"
            prefix, _, rest = re.match(r"^(\D*)(\d+)(.*)$", variants["base"]).groups()  # type: ignore[union-attr]
            sizes = variants["sizes"].split(", ")
            assert gpu_match["counts"] is None, f"FACTS.md: {names_cell!r} has counts in both cells"
            named = [variants["base"], *(prefix + size + rest for size in sizes)]
            counts = [1, *(int(c) for c in variants["counts"].split(","))]  # no count given: one GPU
        else:
            groups = _name_groups(names_cell)
            named = [name for group in groups for name in group]
            count_groups = [
                re.split(r"\s*[,/]\s*", g.strip()) for g in (gpu_match["counts"] or "1").split(" / ")
            ]
            if len(count_groups) == len(groups) and all(
                len(c) in (1, len(g)) for c, g in zip(count_groups, groups, strict=True)
            ):
                counts = [
                    int(c[0] if len(c) == 1 else c[i])
                    for c, g in zip(count_groups, groups, strict=True)
                    for i in range(len(g))
                ]
            elif len(count_groups) == 1 and len(count_groups[0]) == len(named):
                counts = [int(c) for c in count_groups[0]]
            else:
                raise AssertionError(f"FACTS.md: {names_cell!r} and {gpu_cell!r} do not pair up")
        for name, count in zip(named, counts, strict=True):
            rows[(cloud, name)] = (gpu, count, accelerator, mig)
    return rows, wildcards


def _in_facts_terms(instance: hardware.InstanceType | None, facts_row: tuple) -> tuple | None:
    """The data's row in FACTS.md's terms (its GPU name, and only what FACTS.md says)."""
    if instance is None:
        return None
    gpu, _, accelerator, mig = facts_row
    return (
        gpu if _same_gpu(instance.gpu.name, gpu) else instance.gpu.name,
        instance.gpus,
        instance.accelerator if accelerator is not None else None,
        instance.gpu.mig_capable if mig is not None else None,
    )


# GPUs beyond FACTS.md. RTX PRO 6000: GoogleCloudPlatform/container-engine-accelerators
# partition_gpu.go and pkg/gpu/nvidia/mig/mig.go (gpus.yaml); the rest are not in the NVIDIA MIG
# user guide's list of supported GPUs (NVIDIA L40S, A10 and L20 data sheets: no MIG).
SOURCED_MIG = {"RTX PRO 6000 96GB": "1g.24gb x4, 2g.48gb x2, 4g.96gb x1"}
SOURCED_NOT_MIG = ["L40S 48GB", "A10 24GB", "L20 48GB"]

# Alibaba Cloud ECS "GPU-accelerated compute-optimized instance families" (GPU column, model and
# count); gn7 / ebmgn7 named A100 by ACK's MIG guide (instance_types.yaml says more).
ACK_INSTANCES = [
    *[("ack", f"ecs.gn6i-{size}", "T4 16GB", 1) for size in ("c4g1.xlarge", "c8g1.2xlarge", "c16g1.4xlarge")],
    *[("ack", f"ecs.gn6i-{size}", "T4 16GB", 1) for size in ("c24g1.6xlarge", "c40g1.10xlarge")],
    ("ack", "ecs.gn6i-c24g1.12xlarge", "T4 16GB", 2),
    ("ack", "ecs.gn6i-c24g1.24xlarge", "T4 16GB", 4),
    ("ack", "ecs.ebmgn6i.24xlarge", "T4 16GB", 4),
    *[
        ("ack", f"ecs.gn7i-{size}", "A10 24GB", 1)
        for size in ("c8g1.2xlarge", "c16g1.4xlarge", "c32g1.8xlarge", "c48g1.12xlarge", "c56g1.14xlarge")
    ],
    ("ack", "ecs.gn7i-c32g1.16xlarge", "A10 24GB", 2),
    ("ack", "ecs.gn7i-c32g1.32xlarge", "A10 24GB", 4),
    ("ack", "ecs.gn7i-2x.8xlarge", "A10 24GB", 2),
    ("ack", "ecs.gn7i-4x.8xlarge", "A10 24GB", 4),
    ("ack", "ecs.gn7i-4x.16xlarge", "A10 24GB", 4),
    ("ack", "ecs.gn7i-8x.16xlarge", "A10 24GB", 8),
    ("ack", "ecs.gn7i-8x.32xlarge", "A10 24GB", 8),
    ("ack", "ecs.ebmgn7i.32xlarge", "A10 24GB", 4),
    *[
        ("ack", f"ecs.gn7s-{size}", "A30 24GB", 1)
        for size in ("c8g1.2xlarge", "c16g1.4xlarge", "c32g1.8xlarge", "c48g1.12xlarge", "c56g1.14xlarge")
    ],
    ("ack", "ecs.gn7s-c32g1.16xlarge", "A30 24GB", 2),
    ("ack", "ecs.gn7s-c32g1.32xlarge", "A30 24GB", 4),
    ("ack", "ecs.gn8is.2xlarge", "L20 48GB", 1),
    ("ack", "ecs.gn8is.4xlarge", "L20 48GB", 1),
    ("ack", "ecs.gn8is-2x.8xlarge", "L20 48GB", 2),
    ("ack", "ecs.gn8is-4x.16xlarge", "L20 48GB", 4),
    ("ack", "ecs.gn8is-8x.32xlarge", "L20 48GB", 8),
    ("ack", "ecs.ebmgn8is.32xlarge", "L20 48GB", 8),
    ("ack", "ecs.ebmgn8ia.64xlarge", "L20 48GB", 4),
    ("ack", "ecs.gn7-c12g1.3xlarge", "A100 40GB", 1),
    ("ack", "ecs.gn7-c13g1.13xlarge", "A100 40GB", 4),
    ("ack", "ecs.gn7-c13g1.26xlarge", "A100 40GB", 8),
    ("ack", "ecs.ebmgn7.26xlarge", "A100 40GB", 8),
    ("ack", "ecs.gn6v-c8g1.2xlarge", "V100 16GB", 1),
    ("ack", "ecs.gn6v-c8g1.4xlarge", "V100 16GB", 2),
    ("ack", "ecs.gn6v-c8g1.8xlarge", "V100 16GB", 4),
    ("ack", "ecs.gn6v-c8g1.16xlarge", "V100 16GB", 8),
    ("ack", "ecs.gn6v-c10g1.20xlarge", "V100 16GB", 8),
    ("ack", "ecs.gn6e-c12g1.3xlarge", "V100 32GB", 1),
    ("ack", "ecs.gn6e-c12g1.6xlarge", "V100 32GB", 2),
    ("ack", "ecs.gn6e-c12g1.12xlarge", "V100 32GB", 4),
    ("ack", "ecs.gn6e-c12g1.24xlarge", "V100 32GB", 8),
]
# Beyond FACTS.md, from the primary sources instance_types.yaml names: AWS "Specifications for
# Amazon EC2 accelerated computing instances" (Accelerators column); GoogleCloudPlatform/
# cluster-toolkit pkg/config/hardware.go (rtx-6000-N, h100-mega-80gb-8).
SOURCED_INSTANCES = [
    ("eks", "p5.4xlarge", "H100 80GB", 1),
    ("eks", "p6-b200.48xlarge", "B200", 8),
    *[
        ("eks", f"g4dn.{size}", "T4 16GB", 1)
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
    ],
    ("eks", "g4dn.12xlarge", "T4 16GB", 4),
    ("eks", "g4dn.metal", "T4 16GB", 8),
    *[
        ("eks", f"g6.{size}", "L4 24GB", 1)
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
    ],
    ("eks", "g6.12xlarge", "L4 24GB", 4),
    ("eks", "g6.24xlarge", "L4 24GB", 4),
    ("eks", "g6.48xlarge", "L4 24GB", 8),
    *[
        ("eks", f"g6e.{size}", "L40S 48GB", 1)
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
    ],
    ("eks", "g6e.12xlarge", "L40S 48GB", 4),
    ("eks", "g6e.24xlarge", "L40S 48GB", 4),
    ("eks", "g6e.48xlarge", "L40S 48GB", 8),
    ("gke", "a3-megagpu-8g", "H100 80GB", 8),
    ("gke", "g4-standard-48", "RTX PRO 6000 96GB", 1),
    ("gke", "g4-standard-96", "RTX PRO 6000 96GB", 2),
    ("gke", "g4-standard-192", "RTX PRO 6000 96GB", 4),
    ("gke", "g4-standard-384", "RTX PRO 6000 96GB", 8),
    *ACK_INSTANCES,
]

# GKE accelerator type names beyond FACTS.md's table.
SOURCED_GKE_ACCELERATORS = {
    "a3-megagpu-8g": "nvidia-h100-mega-80gb",  # cluster-toolkit pkg/config/machine_mappings.json
    "g4-standard-48": "nvidia-rtx-pro-6000",  # cluster-toolkit pkg/config/machine_mappings.json
}


def _gpu_named(name: str) -> hardware.Gpu:
    return next(g for g in HW.gpus.values() if g.name == name)


def test_mig_profiles_match_facts():
    listed = {
        gpu: ", ".join(f"{p.name} x{p.instances}" for p in _gpu_named(gpu).mig.values())
        for gpu in _facts_mig()
    }
    assert listed == _facts_mig()


def test_mig_profiles_beyond_facts():
    listed = {
        gpu: ", ".join(f"{p.name} x{p.instances}" for p in _gpu_named(gpu).mig.values())
        for gpu in SOURCED_MIG
    }
    assert listed == SOURCED_MIG


def test_not_mig_capable_as_facts_says():
    named = [
        (g.name, g.mig_capable)
        for g in HW.gpus.values()
        if any(_same_gpu(g.name, f) for f in _facts_not_mig())
    ]
    assert {f for f in _facts_not_mig() if any(_same_gpu(n, f) for n, _ in named)} == set(_facts_not_mig())
    assert [capable for _, capable in named] == [False] * len(named)


@pytest.mark.parametrize("gpu", SOURCED_NOT_MIG)
def test_not_mig_capable_beyond_facts(gpu):
    assert _gpu_named(gpu).mig_capable is False


def test_instance_types_match_facts():
    rows, _ = _facts_instances()
    data = {key: _in_facts_terms(HW.instance_type(*key), row) for key, row in rows.items()}
    assert data == rows


def test_wildcard_rows_of_facts_match_every_type_they_cover():
    """ "n1-standard-* with nvidia-tesla-t4": T4, a count the user chooses, that accelerator."""
    _, wildcards = _facts_instances()
    assert wildcards, "FACTS.md's instance table has no 'n1-standard-* with ...' row any more"
    for cloud, prefix, gpu, accelerator in wildcards:
        covered = [t for name, t in HW.instance_types[cloud].items() if name.startswith(prefix)]
        assert covered, f"no {cloud} instance type starts with {prefix}"
        for instance in covered:
            assert (_same_gpu(instance.gpu.name, gpu), instance.gpus, instance.accelerator) == (
                True,
                None,
                accelerator,
            ), instance.name


@pytest.mark.parametrize(("cloud", "name", "gpu", "count"), SOURCED_INSTANCES)
def test_instance_types_beyond_facts(cloud, name, gpu, count):
    instance = HW.instance_type(cloud, name)
    assert instance is not None, f"{name} missing from {cloud}"
    assert (instance.gpu.name, instance.gpus) == (gpu, count)


def test_gke_n1_takes_a_chosen_number_of_t4s():
    instance = HW.instance_type("gke", "n1-standard-8")
    assert (instance.gpu.name, instance.gpus, instance.gpu_choices) == ("T4 16GB", None, (1, 2, 4))


@pytest.mark.parametrize(("name", "accelerator"), SOURCED_GKE_ACCELERATORS.items())
def test_gke_accelerator_names_beyond_facts(name, accelerator):
    assert HW.instance_type("gke", name).accelerator == accelerator


def test_every_gke_type_names_its_accelerator_and_no_other_cloud_does():
    for cloud, types in HW.instance_types.items():
        for instance in types.values():
            assert (instance.accelerator is not None) == (cloud == "gke"), instance.name


def test_aks_gpu_instance_profiles_are_the_gi_ids_agentbaker_partitions_into():
    aks = HW.clouds["aks"]
    assert dict(aks.mig_values) == {"MIG1g": 19, "MIG2g": 14, "MIG3g": 9, "MIG4g": 5, "MIG7g": 0}
    a100_80 = _gpu_named("A100 80GB")
    settings = {p.name: aks.mig_setting(p) for p in aks.mig_profiles(a100_80)}
    assert settings == {
        "1g.10gb": "MIG1g",
        "2g.20gb": "MIG2g",
        "3g.40gb": "MIG3g",
        "4g.40gb": "MIG4g",
        "7g.80gb": "MIG7g",
    }
    h200 = _gpu_named("H200 141GB")
    assert next(p.name for p in aks.mig_profiles(h200)) == "1g.18gb"  # FACTS: MIG1g is 1g.18gb on H200


def test_profile_names_parse_into_memory():
    assert _gpu_named("H200 141GB").mig["3g.71gb"].memory_gb == 71


def test_every_instance_type_is_in_facts_or_listed_here_with_its_source():
    """A row added to instance_types.yaml that FACTS.md lacks, without a sourced row here, fails."""
    rows, wildcards = _facts_instances()
    listed = set(rows) | {(cloud, name) for cloud, name, _, _ in SOURCED_INSTANCES}
    data = {(cloud, name) for cloud, types in HW.instance_types.items() for name in types}
    in_wildcard = {
        (cloud, name)
        for cloud, name in data
        if any(cloud == c and name.startswith(p) for c, p, *_ in wildcards)
    }
    assert data - in_wildcard == listed


def test_every_gpu_is_in_facts_or_listed_here_with_its_source():
    names = {gpu.name for gpu in HW.gpus.values()}
    in_facts = set(_facts_mig()) | {g for g in names for p in _facts_not_mig() if _same_gpu(g, p)}
    assert names - in_facts == set(SOURCED_MIG) | set(SOURCED_NOT_MIG)


def test_gke_rtx_pro_6000_partitions_as_gke_names_them():
    gke = HW.clouds["gke"]
    profiles = [(p.name, p.instances) for p in gke.mig_profiles(_gpu_named("RTX PRO 6000 96GB"))]
    assert profiles == [("1g.24gb", 4), ("2g.48gb", 2), ("4g.96gb", 1)]


def test_gke_partition_sizes_are_those_its_partitioner_and_device_plugin_both_know():
    """container-engine-accelerators: partition_gpu.go knows GI 15 only on H100, H200 and B200;
    pkg/gpu/nvidia/mig/mig.go knows no 4g.20gb or 4g.40gb (its device plugin fails on them)."""
    gke = HW.clouds["gke"]
    offered = {
        gpu: [p.name for p in gke.mig_profiles(_gpu_named(gpu))]
        for gpu in ("A100 40GB", "A100 80GB", "H100 80GB", "H200 141GB", "B200")
    }
    assert offered == {
        "A100 40GB": ["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"],
        "A100 80GB": ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"],
        "H100 80GB": ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb"],
        "H200 141GB": ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
        "B200": ["1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
    }


def _facts_dra() -> dict[str, list[str]]:
    """FACTS.md "What a DRA pool gets, per cloud": cloud title -> its cells."""
    section = _section("Dynamic Resource Allocation (DRA)")
    start = section.index("### What a DRA pool gets, per cloud")
    rows = [line for line in section[start:].splitlines() if line.startswith("|")][2:]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    return {row[0]: row[1:] for row in cells}


@pytest.mark.parametrize("cloud", sorted(HW.clouds))
def test_each_clouds_dra_rules_are_the_facts(cloud):
    profile = HW.clouds[cloud]
    labels, root, mig, minimum, _ = _facts_dra()[profile.title]
    rules = profile.dra
    assert rules is not None
    for key, value in rules.device_plugin_off.items():
        assert f"`{key}={value}`" in labels
    assert root == f"`{rules.driver_root}`"
    assert rules.mig == (not mig.startswith("none"))
    assert minimum == ".".join(map(str, HW.dra_driver.min_kubernetes))
    assert ("INSTALLATION_DISABLED" in labels) == (rules.cloud_installs_driver is False)
