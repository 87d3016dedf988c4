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


def run(
    command: str, fleet: str | Path, home: Path, max_mb: str | None = None
) -> subprocess.CompletedProcess[str]:
    # No credentials and no sandbox: any attempt to reach a cloud would fail and print more.
    env = {k: v for k, v in os.environ.items() if not k.startswith(UNUSABLE_ENV_PREFIXES)}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home))
    if max_mb is not None:
        env["PROVISIONER_FLEET_MAX_MB"] = max_mb
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


def endless(megabytes: str) -> str:
    return (
        f"/dev/zero: is larger than {megabytes} MB, so it is not a fleet file; reading stops there so that "
        "an endless stream cannot exhaust memory (set PROVISIONER_FLEET_MAX_MB to read larger files)"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_an_endless_stream(command, tmp_path):
    assert_refused(run(command, "/dev/zero", tmp_path), endless("16"))


@pytest.mark.parametrize("max_mb", ["0.5", "1", "64"])
def test_an_endless_stream_stops_at_the_limit_the_user_sets(max_mb, tmp_path):
    assert_refused(run("validate", "/dev/zero", tmp_path, max_mb), endless(max_mb))


def test_a_file_past_a_limit_the_user_sets(write, tmp_path):
    fleet = (
        GKE_HEADER
        + "      - name: l4\n        instanceType: g2-standard-8\n        nodes: {min: 0, max: 2}\n"
    )
    path = write((fleet + "# " + "x" * (2000 - len(fleet)) + "\n").encode())  # 2,003 bytes
    accepted = run("validate", path, tmp_path, "0.002")  # 2,097 bytes
    assert (accepted.returncode, accepted.stdout) == (0, f"✓ {path}: 1 cluster, 1 pool\n")
    assert_refused(
        run("validate", path, tmp_path, "0.0019"),  # 1,992 bytes
        f"{path}: is larger than 0.0019 MB, so it is not a fleet file; reading stops there so that an "
        "endless stream cannot exhaust memory (set PROVISIONER_FLEET_MAX_MB to read larger files)",
    )


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("max_mb", ["abc", "0", "-3", "inf", "nan", "16MB"])
def test_a_limit_that_is_no_positive_number(command, max_mb, write, tmp_path):
    path = write(GKE_HEADER.encode())
    result = run(command, path, tmp_path, max_mb)
    assert "Traceback" not in result.stderr
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        f"error: PROVISIONER_FLEET_MAX_MB: {max_mb!r} is not a positive number (the largest fleet file to "
        "read, in MB)\n",
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
    # 1,600,000 values (100,000 a MB of the 16 MB limit): the second of nine aliases of 597,871.
    assert_refused(
        run(command, path, tmp_path),
        f"{path}:7: g[1]: aliases expand this document past 1,600,000 values (an alias bomb?); a fleet "
        "file's aliases and merge keys add far fewer (the limit grows with PROVISIONER_FLEET_MAX_MB)",
    )


def test_the_aliases_limit_follows_the_size_limit(write, tmp_path):
    path = write(ALIAS_BOMB.encode())
    # 100,000 values under a 1 MB limit: the first alias of f's 66,430-value lists passes it.
    assert_refused(
        run("validate", path, tmp_path, "1"),
        f"{path}:6: f[0]: aliases expand this document past 100,000 values (an alias bomb?); a fleet "
        "file's aliases and merge keys add far fewer (the limit grows with PROVISIONER_FLEET_MAX_MB)",
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


@pytest.mark.parametrize(
    ("zones", "field", "message"),
    [
        ("us-central1-a", "zones", "must be a valid list (got 'us-central1-a')"),
        ("[]", "zones", "must not be empty"),
        ("[1]", "zones[0]", "must be a valid string (got 1)"),
        ("['']", "zones[0]", "must have at least 1 character"),
        (
            "[us-central1-a" + ", us-central1-a" * 2000 + "]",
            "zones[1]",
            "'us-central1-a' is listed twice",
        ),
    ],
    ids=["a string", "empty", "a number", "an empty name", "thousands repeated"],
)
def test_hostile_zones(zones, field, message, write, tmp_path):
    path = write(
        (
            GKE_HEADER + f"      - name: l4\n        instanceType: g2-standard-8\n        zones: {zones}\n"
            "        nodes: {min: 0, max: 2}\n"
        ).encode()
    )
    result = run("validate", path, tmp_path)
    assert "Traceback" not in result.stderr
    assert (result.returncode, result.stdout) == (1, "")
    diagnostic = f"{path}:10: clusters[gcp-ml].pools[l4].{field}: {message}"
    assert result.stderr.splitlines() == [diagnostic, "1 error"]  # a zone repeated is said once


# Hostile manifests for `place --manifest`, run as a user runs it, against a catalog on disk.
@pytest.fixture(scope="module")
def catalog_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.placements import catalog

    return catalog(tmp_path_factory.mktemp("hostile-place")).url


def place(manifest: bytes, home: Path, catalog_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    (home / "app.yaml").write_bytes(manifest)
    env = {k: v for k, v in os.environ.items() if not k.startswith(UNUSABLE_ENV_PREFIXES)}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home), PROVISIONER_CATALOG=catalog_url)
    command = [sys.executable, "-m", "provisioner", "place", "--gpus", "1", "--manifest", "app.yaml", *args]
    return subprocess.run(
        command, capture_output=True, check=False, text=True, env=env, cwd=home, timeout=120
    )


POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
BYPASS_HINT = (
    "these reach GPUs the scheduler does not count, so it places other pods on the same GPUs; "
    "ask for GPUs only through resources.limits (place sets them), or pass --allow-device-bypass "
    "if that is what you mean"
)


def assert_bypass_refused(result: subprocess.CompletedProcess[str], *errors: str) -> None:
    assert "Traceback" not in result.stderr
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [*(f"error: {e}" for e in errors), BYPASS_HINT]


def test_a_huge_visible_devices_value_gives_a_short_error(tmp_path, catalog_url):
    value = "0," * 1_500_000
    result = place(
        f"{POD}  - name: c\n    image: i\n    env:\n    - name: NVIDIA_VISIBLE_DEVICES\n"
        f"      value: '{value}'\n".encode(),
        tmp_path,
        catalog_url,
    )
    assert_bypass_refused(
        result,
        f"app.yaml:9: Pod p: container c: env[NVIDIA_VISIBLE_DEVICES] is '{'0,' * 28}0…': "
        "the NVIDIA runtime exposes those GPUs, counted or not",
    )


def test_control_characters_and_forged_lines_stay_on_one_escaped_line(tmp_path, catalog_url):
    manifest = (
        'apiVersion: v1\nkind: Pod\nmetadata: {name: "p\\nerror: forged"}\nspec:\n  containers:\n'
        '  - name: "c\\u001b[2J"\n    image: i\n    env:\n'
        '    - {name: NVIDIA_VISIBLE_DEVICES, value: "all\\nerror: also forged"}\n'
    )
    result = place(manifest.encode(), tmp_path, catalog_url)
    assert_bypass_refused(
        result,
        "app.yaml:9: Pod 'p\\nerror: forged': container 'c\\x1b[2J': env[NVIDIA_VISIBLE_DEVICES] is "
        "'all\\nerror: also forged': the NVIDIA runtime exposes those GPUs, counted or not",
    )


def test_thousands_of_bypassing_containers_are_summed_up(tmp_path, catalog_url):
    containers = "".join(
        f"  - {{name: c{i}, image: i, securityContext: {{privileged: true}}}}\n" for i in range(3000)
    )
    result = place(f"{POD}{containers}".encode(), tmp_path, catalog_url)
    shown = [
        f"app.yaml:{6 + i}: Pod p: container c{i}: securityContext.privileged is true: "
        "a privileged container sees every GPU on the node"
        for i in range(20)
    ]
    assert_bypass_refused(result, *shown, "… and 2980 more like these")


def test_aliases_nesting_lists_of_pods_are_walked_once(tmp_path, catalog_url):
    # Nine levels of Lists of nine aliases: 9**8 pods by reference, one pod object.
    manifest = (
        "x0: &l0 {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i, "
        "env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]}]}}\n"
    )
    manifest += "".join(
        f"x{i}: &l{i} {{kind: List, items: [{', '.join([f'*l{i - 1}'] * 9)}]}}\n" for i in range(1, 9)
    )
    manifest += "apiVersion: v1\nkind: List\nitems: [*l8]\n"
    result = place(manifest.encode(), tmp_path, catalog_url)
    assert_bypass_refused(
        result,
        "app.yaml:1: Pod p: container c: env[NVIDIA_VISIBLE_DEVICES] is 'all': "
        "the NVIDIA runtime exposes those GPUs, counted or not",
    )


@pytest.mark.parametrize(
    "spec",
    [
        "  containers:\n  - {name: c, image: i, env: {NVIDIA_VISIBLE_DEVICES: all}}\n",  # env as a map
        "  containers:\n  - {name: c, image: i, env: [NVIDIA_VISIBLE_DEVICES=all, 7, null]}\n",
        "  containers:\n  - {name: c, image: i, securityContext: [privileged]}\n",
        "  containers:\n  - {name: [c], image: i}\n",
    ],
    ids=["env-map", "env-scalars", "context-list", "name-list"],
)
def test_shapes_kubernetes_refuses_are_no_traceback(spec, tmp_path, catalog_url):
    result = place(f"apiVersion: v1\nkind: Pod\nmetadata: [p]\nspec:\n{spec}".encode(), tmp_path, catalog_url)
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr  # none of them reaches a GPU: the merge goes on
    assert "nvidia.com/gpu: 1" in result.stdout


def test_allow_device_bypass_lets_a_hostile_value_through_with_a_short_warning(tmp_path, catalog_url):
    manifest = (
        f"{POD}  - name: c\n    image: i\n    env:\n    - {{name: NVIDIA_VISIBLE_DEVICES, value: all}}\n"
    )
    result = place(manifest.encode(), tmp_path, catalog_url, "--allow-device-bypass")
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == (
        "warning: app.yaml:9: Pod p: container c: env[NVIDIA_VISIBLE_DEVICES] is 'all': the NVIDIA "
        "runtime exposes those GPUs, counted or not (let through by --allow-device-bypass)"
    )
    assert "NVIDIA_VISIBLE_DEVICES" in result.stdout and "nvidia.com/gpu: 1" in result.stdout


def place_file(path: str, home: Path, catalog_url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(UNUSABLE_ENV_PREFIXES)}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home), PROVISIONER_CATALOG=catalog_url)
    command = [sys.executable, "-m", "provisioner", "place", "--gpus", "1", "--manifest", path]
    return subprocess.run(
        command, capture_output=True, check=False, text=True, env=env, cwd=home, timeout=120
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            "kind: Pod\nmetadata: {name: café}\n".encode("latin-1"),
            "app.yaml:2: is not UTF-8 text (byte 0xe9)",
        ),
        (
            b"kind: Pod\nmetadata: {name: a\0b}\n",
            "app.yaml:2: not YAML: character U+0000 is a control character",
        ),
        (
            b"kind: Pod\nmetadata: {name: a\x1bb}\n",
            "app.yaml:2: not YAML: character U+001B is a control character",
        ),
        (
            b"kind: Pod\nspec: " + b"[" * 5000 + b"]" * 5000 + b"\n",
            "app.yaml:2: nested deeper than 100 levels; is this a manifest?",
        ),
    ],
    ids=["latin1", "nul", "escape", "nesting"],
)
def test_a_manifest_that_is_no_yaml_text(data, message, tmp_path, catalog_url):
    result = place(data, tmp_path, catalog_url)
    assert "Traceback" not in result.stderr
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(f"error: {message}")
    assert len(result.stderr.splitlines()) == 1


def test_an_endless_manifest(tmp_path, catalog_url):
    result = place_file("/dev/zero", tmp_path, catalog_url)
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        "error: /dev/zero: is larger than 16 MB, so it is not a manifest; reading stops there so that an "
        "endless stream cannot exhaust memory\n",
    )
