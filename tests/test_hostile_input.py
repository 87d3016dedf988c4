"""Hostile fleet files, run as a user runs them: `python -m provisioner validate|render|plan FILE`.

Each must end with exit status 1 and the diagnostic naming the file (and line and field where
there is one), never a traceback. `plan` on a file that fails validation stops before any cloud:
it runs here with no sandbox and no credentials, and prints nothing but the diagnostics.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GKE_HEADER, ROOT

COMMANDS = ("validate", "render", "plan")
UNUSABLE_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "CLOUDSDK_", "PROVISIONER_")


def run(command: str, fleet: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    # No credentials and no sandbox: any attempt to reach a cloud would fail and print more.
    env = {k: v for k, v in os.environ.items() if not k.startswith(UNUSABLE_ENV_PREFIXES)}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "provisioner", command, str(fleet)],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        cwd=home,
        timeout=120,
    )


def assert_refused(result: subprocess.CompletedProcess[str], diagnostic: str) -> None:
    assert "Traceback" not in result.stderr
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"{diagnostic}\n1 error\n")


@pytest.fixture
def write(tmp_path: Path):
    def write_bytes(data: bytes) -> Path:
        path = tmp_path / "fleet.yaml"
        path.write_bytes(data)
        return path

    return write_bytes


@pytest.mark.parametrize("command", COMMANDS)
def test_latin1_text(command, write, tmp_path):
    path = write("clusters:\n  - name: café\n".encode("latin-1"))
    assert_refused(run(command, path, tmp_path), f"{path}:2: is not UTF-8 text (byte 0xe9); save it as UTF-8")


@pytest.mark.parametrize("command", COMMANDS)
def test_binary(command, write, tmp_path):
    path = write(bytes(range(256)))
    assert_refused(run(command, path, tmp_path), f"{path}:2: is not UTF-8 text (byte 0x80); save it as UTF-8")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("character", "shown"), [("\0", "U+0000"), ("\x1b", "U+001B")])
def test_control_characters(command, character, shown, write, tmp_path):
    path = write(f"clusters:\n  - name: a{character}b\n".encode())
    assert_refused(
        run(command, path, tmp_path),
        f"{path}:2: invalid YAML: character {shown} is a control character, which YAML does not allow "
        "(is this a text file?)",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_nesting_thousands_of_levels_deep(command, write, tmp_path):
    path = write(("clusters: " + "[" * 5000 + "]" * 5000 + "\n").encode())
    assert_refused(
        run(command, path, tmp_path), f"{path}:1: nested deeper than 64 levels; a fleet file needs about 8"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_an_integer_of_thousands_of_digits(command, write, tmp_path):
    path = write((GKE_HEADER + "      - name: l4\n        nodes: {count: " + "9" * 5000 + "}\n").encode())
    assert_refused(
        run(command, path, tmp_path),
        f"{path}:9: clusters[gcp-ml].pools[l4].nodes.count: a number of 5000 digits; "
        "numbers here have at most 4300",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_an_endless_stream(command, tmp_path):
    assert_refused(
        run(command, "/dev/zero", tmp_path),
        "/dev/zero: is larger than 4 MB, so it is not a fleet file; reading stops there so that an endless "
        "stream cannot exhaust memory",
    )


# "Billion laughs": nine levels of nine aliases, 9**9 strings from under 500 bytes.
ALIAS_BOMB = (
    "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"{level}: &{level} [{', '.join([f'*{previous}'] * 9)}]\n"
        for previous, level in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "clusters: *i\n"
)


@pytest.mark.parametrize("command", COMMANDS)
def test_an_alias_bomb(command, write, tmp_path):
    assert len(ALIAS_BOMB) < 500
    path = write(ALIAS_BOMB.encode())
    assert_refused(
        run(command, path, tmp_path),
        f"{path}:6: f[0]: aliases expand this document past 100000 values (an alias bomb?); a fleet file's "
        "aliases and merge keys add far fewer",
    )


def test_merge_keys_still_work(write, tmp_path):
    path = write(
        (
            GKE_HEADER
            + "      - &l4\n        name: l4\n        instanceType: g2-standard-8\n"
            + "        nodes: {count: 1}\n"
            + "      - <<: *l4\n        name: l4b\n        nodes: {count: 2}\n"
        ).encode()
    )
    result = run("validate", path, tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"✓ {path}: 1 cluster, 2 pools\n", "")


@pytest.mark.parametrize(
    ("cloud_fields", "line", "message"),
    [
        (
            "cloud: aks\n    subscription: 00000000-0000-0000-0000-000000000000\n    resourceGroup: ml\n"
            "    cluster: ml/aks\n",
            6,
            "'ml/aks' is not an AKS cluster name (1-63 letters, digits, - and _, starting and ending with a "
            "letter or digit)",
        ),
        (
            "cloud: gke\n    project: my-project\n    location: us-central1\n    cluster: ml/gke\n",
            6,
            "'ml/gke' is not a GKE cluster name (1-40 lowercase letters, digits and hyphens, starting with a "
            "letter, not ending with a hyphen)",
        ),
        (
            "cloud: eks\n    region: us-east-1\n    cluster: ml/eks\n"
            "    nodeRole: arn:aws:iam::123456789012:role/r\n    subnets: [subnet-0abc1234]\n",
            5,
            "'ml/eks' is not an EKS cluster name (1-100 letters, digits, - and _, starting with a letter or "
            "digit)",
        ),
    ],
    ids=["aks", "gke", "eks"],
)
def test_a_cluster_name_that_cannot_sit_in_the_resource_path(cloud_fields, line, message, write, tmp_path):
    path = write(f"clusters:\n  - name: ml\n    {cloud_fields}".encode())
    assert_refused(run("plan", path, tmp_path), f"{path}:{line}: clusters[ml].cluster: {message}")


def test_a_huge_value_gives_a_short_error(write, tmp_path):
    huge = "x" * 3_000_000
    path = write(
        (
            GKE_HEADER
            + f"      - name: l4\n        instanceType: g2-standard-8\n        nodes: {{count: 1}}\n"
            f"        labels: {{team: {huge}}}\n"
        ).encode()
    )
    assert_refused(
        run("validate", path, tmp_path),
        f"{path}:11: clusters[gcp-ml].pools[l4].labels.team: '{'x' * 98}… is not a Kubernetes label value "
        "(at most 63 letters, digits, -, _ or .)",
    )
