"""The command line as a user runs it: a real process, its output and its exit status."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
from conftest import EXAMPLES, ROOT
from ruamel.yaml import YAML

from provisioner.drivers.registry import SDK_MODULE_PREFIXES


def run(*args: str, cwd=ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "provisioner", *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_validate_ok():
    result = run("validate", "examples/fleet.yaml", "examples/mig.yaml")
    assert result.returncode == 0, result.stderr
    assert "examples/fleet.yaml: 4 clusters, 8 pools" in result.stdout
    assert "examples/mig.yaml: 3 clusters, 3 pools" in result.stdout


def test_validate_lists_every_error_and_exits_1(pool_file):
    path = pool_file(
        "aks",
        """\
        - name: Bad
          instanceType: Standard_NC24ads_A100_v4
          gpu: {mig: 1g.5gb}
          nodes: {min: 1, max: 2}
        """,
    )
    result = run("validate", str(path), "examples/fleet.yaml")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines == [
        f"{path}:8: clusters[azure-ml].pools[Bad].name: 'Bad' is not a valid AKS pool name: "
        "lowercase letters and digits, starting with a letter, 1-12 characters",
        f"{path}:10: clusters[azure-ml].pools[Bad].gpu.mig: 1g.5gb is not a MIG profile of the "
        "A100 80GB on AKS; it offers 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb",
        "2 errors",
    ]
    assert result.stdout == "✓ examples/fleet.yaml: 4 clusters, 8 pools\n"  # the valid file is still reported


def test_validate_json(pool_file):
    path = pool_file("gke", "- {name: l4, instanceType: g2-standard-8, nodes: {count: 0}, spot: 1}\n")
    result = run("validate", "--json", str(path))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["valid"] == []
    assert report["errors"] == [
        {
            "file": str(path),
            "line": 8,
            "path": "clusters[gcp-ml].pools[l4].spot",
            "message": "must be a valid boolean (got 1)",
        }
    ]


def test_validate_missing_file_is_an_error_not_a_traceback(tmp_path):
    result = run("validate", str(tmp_path / "missing.yaml"))
    assert result.returncode == 1
    assert result.stderr.startswith(f"{tmp_path / 'missing.yaml'}: cannot read: No such file")
    assert "Traceback" not in result.stderr


def test_render_prints_one_stream():
    result = run("render", "examples/fleet.yaml")
    assert result.returncode == 0, result.stderr
    documents = [d for d in YAML(typ="safe").load_all(result.stdout) if d]
    kinds = [d.get("kind", "helm values") for d in documents]
    assert kinds == ["ConfigMap", "helm values", "ConfigMap", "helm values"]
    assert "# Cluster gcp-ml: GKE partitions and shares GPUs itself" in result.stdout


def test_render_one_cluster_to_files(tmp_path):
    result = run("render", "examples/fleet.yaml", "--cluster", "aws-ml", "--out-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.yaml"))
    assert written == ["aws-ml/device-plugin-config.yaml", "aws-ml/gpu-operator-values.yaml"]


def test_render_unknown_cluster():
    result = run("render", "examples/fleet.yaml", "--cluster", "nope")
    assert result.returncode == 1
    known = "azure-ml, gcp-ml, aws-ml, ali-ml"
    assert f"no cluster 'nope' in examples/fleet.yaml; clusters: {known}" in result.stderr


def test_render_refuses_an_invalid_fleet(pool_file):
    path = pool_file("eks", "- {name: g5, instanceType: g5.xlarge, nodes: {count: 1}, gpu: {mig: 1g.5gb}}\n")
    result = run("render", str(path))
    assert result.returncode == 1
    assert result.stderr == (
        f"{path}:9: clusters[aws-ml].pools[g5].gpu.mig: the A10G 24GB of g5.xlarge does not support MIG; "
        "remove gpu.mig or choose an instance type with A100, A30, H100, H200 or B200 GPUs\n1 error\n"
    )
    assert result.stdout == ""  # nothing half-rendered


def test_schema_accepts_the_examples_and_rejects_unknown_keys():
    result = run("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    validator = jsonschema.Draft202012Validator(schema)
    for example in sorted(EXAMPLES.glob("*.yaml")):
        validator.validate(YAML(typ="safe").load(example.read_text()))
    bad = YAML(typ="safe").load((EXAMPLES / "fleet.yaml").read_text())
    bad["clusters"][0]["pools"][0]["instancetype"] = "x"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("validate", "examples/fleet.yaml"),
        ("render", "examples/fleet.yaml"),
        ("verify", "--help"),
        ("inspect", "--help"),
    ],
)
def test_no_cloud_sdk_is_imported(args):
    probe = (
        "import atexit, sys\n"
        "def report():\n"
        f"    loaded = sorted(m for m in sys.modules if m.startswith({SDK_MODULE_PREFIXES!r}))\n"
        "    sys.stderr.write('SDKS=' + ','.join(loaded) + '\\n')\n"
        "atexit.register(report)\n"
        f"sys.argv = ['provisioner', *{list(args)!r}]\n"
        "from provisioner.cli import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "SDKS=\n" in result.stderr


def test_a_path_with_brackets_is_printed_as_it_is(tmp_path):
    fleet = tmp_path / "fleet[prod].yaml"
    fleet.write_text((EXAMPLES / "fleet.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    result = run("validate", str(fleet))
    assert result.returncode == 0, result.stderr
    assert f"✓ {fleet}: 4 clusters, 8 pools" in result.stdout


def test_a_path_holding_a_closing_tag_neither_crashes_nor_is_eaten(tmp_path):
    out_dir = tmp_path / "x[/]y"  # the directories "x[" and "]y"
    result = run("render", "examples/fleet.yaml", "--cluster", "aws-ml", "--out-dir", str(out_dir))
    assert result.returncode == 0, result.stderr
    assert f"wrote {out_dir}/aws-ml/device-plugin-config.yaml\n" in result.stdout


def test_render_out_dir_that_cannot_be_made_is_an_error_naming_it(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    result = run("render", "examples/fleet.yaml", "--out-dir", str(blocker / "out"))
    assert result.returncode == 1
    made = blocker / "out" / "azure-ml"
    assert result.stderr == f"error: cannot write the rendered files: {made}: Not a directory\n"
