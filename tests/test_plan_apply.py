"""plan, apply and destroy end to end: the CLI, the real SDKs, the emulators."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result

from provisioner.cli import main
from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from provisioner.pools import Scaling
from provisioner.sandbox.server import SandboxSettings
from tests.worlds import World, fleet_text


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path, SandboxSettings(op_seconds=0.05))
    yield made
    made.sandbox.stop()


def test_apply_converges_and_each_kind_of_change_plans_its_action(world: World):
    first = world.run("plan", str(world.fleet), "--detailed-exitcode")
    assert first.exit_code == 2
    assert "Plan: 9 to create, 0 to update, 0 to replace, 0 to delete." in first.stdout
    assert "system" not in first.stdout and "default-pool" not in first.stdout  # never the unowned pools

    applied = world.run("apply", str(world.fleet), "--auto-approve")
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines()[-1] == "Apply complete: 9 created, 0 updated, 0 replaced, 0 deleted."
    assert world.run("plan", str(world.fleet), "--detailed-exitcode").exit_code == 0

    def changed(pools: dict[str, str]) -> dict[str, str]:
        return {
            cloud: text.replace("nodes: {min: 0, max: 3}", "nodes: {min: 1, max: 5}")  # mig: bounds
            .replace("1g.10gb", "2g.20gb")  # AKS mig profile
            .replace("mig: 1g.5gb", "mig: 2g.10gb")  # GKE and EKS mig profile
            .replace(text.splitlines()[-1], "")  # spare: removed from the fleet
            for cloud, text in pools.items()
        }

    world.edit(changed)
    plan = world.plan_json()
    actions = {(c["cluster"], c["pool"]): c["action"] for c in plan["changes"]}
    assert actions == {
        ("azure", "mig"): "replace",  # gpuInstanceProfile is fixed at creation
        ("gcp", "mig"): "replace",  # so is gpu_partition_size
        ("aws", "mig"): "update",  # on EKS MIG is the mig.config label, which changes in place
        ("azure", "spare"): "delete",
        ("gcp", "spare"): "delete",
        ("aws", "spare"): "delete",
    }
    replace = next(c for c in plan["changes"] if (c["cluster"], c["action"]) == ("gcp", "replace"))
    forcing = {f["field"]: f for f in replace["fields"]}
    assert forcing["mig_setting"] == {
        "field": "mig_setting",
        "before": "1g.5gb",
        "after": "2g.10gb",
        "forces_replacement": True,
    }
    assert forcing["scaling"]["forces_replacement"] is False
    assert plan["summary"] == {"create": 0, "update": 1, "replace": 2, "delete": 3, "adopt": 0}

    text = world.run("plan", str(world.fleet)).stdout
    assert "mig must be replaced (mig_setting cannot change in place)" in text
    assert "mig_setting: 1g.5gb -> 2g.10gb  # forces replacement" in text

    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    assert world.run("plan", str(world.fleet), "--detailed-exitcode").exit_code == 0


def test_a_bounds_change_is_an_update_in_place(world: World):
    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    world.edit(
        lambda pools: {
            c: t.replace("nodes: {min: 0, max: 2}", "nodes: {min: 1, max: 4}") for c, t in pools.items()
        }
    )
    plan = world.plan_json()
    assert {(c["cluster"], c["pool"], c["action"]) for c in plan["changes"]} == {
        ("azure", "shared", "update"),
        ("gcp", "shared", "update"),
        ("aws", "shared", "update"),
    }
    assert plan["changes"][0]["fields"] == [
        {"field": "scaling", "before": "0-2", "after": "1-4", "forces_replacement": False}
    ]


def test_a_saved_plan_is_refused_when_its_cluster_changed_since(world: World, tmp_path: Path):
    saved = tmp_path / "fleet.plan"
    assert world.run("plan", str(world.fleet), "--out", str(saved)).exit_code == 0
    document = saved.read_text()
    assert "token" not in document.lower() and "secret" not in document.lower()

    compiled = compile_file(world.fleet)
    gcp = compiled.cluster("gcp")
    driver = connect("gke", world.sandbox.directory)
    from provisioner.compile import desired_state

    driver.create_pool(gcp.target.ref, desired_state(gcp.pools[2]))  # someone else creates "spare"

    refused = world.run("apply", str(saved))
    assert refused.exit_code == 1
    assert refused.stderr == (
        "error: the saved plan is stale: gcp changed since it was made; "
        "run plan again and apply the new plan\n"
    )
    names = {p.name for p in driver.list_pools(gcp.target.ref)}
    assert names == {"default-pool", "spare"}  # nothing of the stale plan was carried out

    fresh = tmp_path / "fresh.plan"
    assert world.run("plan", str(world.fleet), "--out", str(fresh)).exit_code == 0
    assert world.run("apply", str(fresh)).exit_code == 0
    assert world.run("plan", str(world.fleet), "--detailed-exitcode").exit_code == 0


def test_apply_asks_first_and_a_no_changes_nothing(world: World):
    declined = world.run("apply", str(world.fleet), input="no\n")
    assert declined.exit_code == 1
    assert "Cancelled: nothing was changed." in declined.output
    assert world.run("plan", str(world.fleet), "--detailed-exitcode").exit_code == 2


def test_destroy_removes_only_the_pools_it_owns(world: World):
    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    destroyed = world.run("destroy", str(world.fleet), "--auto-approve")
    assert destroyed.exit_code == 0, destroyed.output
    assert destroyed.stdout.splitlines()[-1] == "Apply complete: 0 created, 0 updated, 0 replaced, 9 deleted."
    listing = json.loads(world.run("pools", str(world.fleet), "--json").stdout)
    assert {c["cluster"]: [p["pool"] for p in c["pools"]] for c in listing} == {
        "azure": ["system"],
        "gcp": ["default-pool"],
        "aws": ["system"],
    }


def test_a_pool_named_in_the_fleet_but_not_owned_is_a_conflict_never_touched(tmp_path: Path):
    world = World(tmp_path, SandboxSettings())
    try:
        world.edit(
            lambda pools: {
                **pools,
                "gke": pools["gke"]
                + "      - {name: default-pool, instanceType: g2-standard-8, nodes: {count: 1}}\n",
            }
        )
        result = world.run("plan", str(world.fleet), "--detailed-exitcode")
        assert result.exit_code == 1
        assert "pool default-pool exists but was not created by provisioner" in result.output
        assert "default-pool will be" not in result.output
    finally:
        world.sandbox.stop()


def test_apply_converges_through_throttling_and_outages(tmp_path: Path):
    world = World(tmp_path, SandboxSettings(fault_rate=0.3, seed=11))
    try:
        applied = world.run("apply", str(world.fleet), "--auto-approve")
        assert applied.exit_code == 0, applied.output
        again = world.run("plan", str(world.fleet), "--detailed-exitcode")
        assert again.exit_code == 0, again.output
    finally:
        world.sandbox.stop()


def test_scaling_a_fixed_pool_to_autoscaling_and_back(world: World):
    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    world.edit(
        lambda pools: {
            c: re.sub(r"nodes: \{count: [13]\}", "nodes: {min: 1, max: 3}", t) for c, t in pools.items()
        }
    )
    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    compiled = compile_file(world.fleet)
    for cluster in compiled.clusters:
        spare = {
            p.name: p
            for p in connect(cluster.target.cloud, world.sandbox.directory).list_pools(cluster.target.ref)
        }["spare"]
        assert spare.scaling == Scaling(1, 3, autoscaling=True)


def test_a_killed_apply_is_finished_by_the_next_one_without_repeating_its_operation(tmp_path: Path):
    """kill -9 mid-apply, in real processes: the rerun waits for the operation left running."""
    import signal
    import subprocess
    import sys
    import time

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text(uuid.uuid4().hex[:8]), encoding="utf-8")
    directory = tmp_path / "sandbox"
    provisioner = [sys.executable, "-m", "provisioner"]
    env = {**os.environ, "PROVISIONER_SANDBOX": str(directory)}
    server = subprocess.Popen(
        [
            *provisioner,
            "sandbox",
            "serve",
            "--dir",
            str(directory),
            "--seed",
            str(fleet),
            "--op-seconds",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (directory / "endpoints.json").exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        gcp = compile_file(fleet).cluster("gcp").target.ref
        driver = connect("gke", directory)
        first = subprocess.Popen(
            [*provisioner, "apply", str(fleet), "--auto-approve"], env=env, stdout=subprocess.DEVNULL
        )
        while not any(p.status == "changing" for p in driver.list_pools(gcp)):
            assert time.monotonic() < deadline, "apply never started an operation"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait()
        clusters = [c.target.ref for c in compile_file(fleet).clusters]
        left = sum(p.owned for c in clusters for p in connect(c.cloud, directory).list_pools(c))

        second = subprocess.run(
            [*provisioner, "apply", str(fleet), "--auto-approve"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert second.returncode == 0, second.stdout + second.stderr
        # What the killed run started is waited for, never created a second time.
        assert f"Apply complete: {9 - left} created" in second.stdout
        again = subprocess.run(
            [*provisioner, "plan", str(fleet), "--detailed-exitcode"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert again.returncode == 0, again.stdout
        assert sorted(p.name for p in driver.list_pools(gcp)) == ["default-pool", "mig", "shared", "spare"]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)


def test_two_applies_on_one_cluster_never_interleave(world: World):
    from provisioner.locks import FileLocks

    gcp = compile_file(world.fleet).cluster("gcp").target.ref
    with FileLocks(world.sandbox.directory / "locks").hold(gcp.key, 0, "another apply"):
        blocked = world.run("apply", str(world.fleet), "--auto-approve", "--lock-timeout", "0.3")
    assert blocked.exit_code == 1
    assert f"cluster gcp is locked by pid {os.getpid()}" in blocked.output
    locked = (
        rf"cluster gcp is locked by pid {os.getpid()} on \S+ \(user \S+, since \S+\); gave up after 0\.3 s"
    )
    summary = blocked.stdout.splitlines()[-5:]
    assert (
        summary[0] == "Apply incomplete: 6 created, 0 updated, 0 replaced, 0 deleted; 3 not done:"
    )  # the others went ahead
    for line, pool in zip(summary[1:4], ("mig", "shared", "spare"), strict=True):
        assert re.fullmatch(rf"  gcp/{pool} \(create\): {locked}", line), line
    assert summary[4] == "Run apply again to finish: it picks up where this one stopped."
    finished = world.run("apply", str(world.fleet), "--auto-approve")
    assert finished.stdout.splitlines()[-1] == "Apply complete: 3 created, 0 updated, 0 replaced, 0 deleted."


def test_plan_names_the_clusters_it_could_not_observe_and_claims_no_match_for_them(world: World):
    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    world.fleet.write_text(
        world.fleet.read_text().replace(f"cluster: gke-{world.suffix}", "cluster: gke-gone"), encoding="utf-8"
    )
    result = world.run("plan", str(world.fleet))
    assert result.exit_code == 1
    assert "match" not in result.output
    assert "No changes in the 2 clusters observed.\n" in result.stdout
    assert "1 cluster could not be observed, so nothing is planned for it: gcp.\n" in result.stdout


def test_plan_with_no_cluster_observed_says_so_and_nothing_else(world: World):
    only_missing = world.fleet.read_text().split("  - name: aws")[0].replace(world.suffix, "gone")
    world.fleet.write_text(only_missing, encoding="utf-8")
    result = world.run("plan", str(world.fleet))
    assert result.exit_code == 1
    assert "No changes" not in result.output and "match" not in result.output
    assert result.stdout.endswith(
        "2 clusters could not be observed, so nothing is planned for them: azure, gcp.\n"
    )


def run_without_env(world: World, *args: str) -> Result:
    """The CLI with no PROVISIONER_SANDBOX: only the command line says where the sandbox is."""
    env = {"PROVISIONER_SANDBOX": None, "PROVISIONER_LOCK_DIR": None, "PROVISIONER_CATALOG": None}
    return world.runner.invoke(main, list(args), env=env, catch_exceptions=False)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("pools", "{fleet}"), "default-pool"),
        (("plan", "{fleet}"), "Plan: 9 to create, 0 to update, 0 to replace, 0 to delete.\n"),
        (
            ("apply", "{fleet}", "--auto-approve"),
            "Apply complete: 9 created, 0 updated, 0 replaced, 0 deleted.\n",
        ),
        (("destroy", "{fleet}", "--auto-approve"), "No changes. The clusters match the fleet."),
        (("sync", "{fleet}"), "Synced 3 clusters (3 pools) into sqlite:///{sandbox}/catalog.db"),
        (("catalog", "ls", "--json"), '"pool": "mig"'),
        (("catalog", "inspect", "--json"), '"pool": "mig"'),
        (("catalog", "drift", "--json"), '"pool": "spare"'),
    ],
)
def test_sandbox_is_accepted_after_the_command_name(world: World, args: tuple[str, ...], expected: str):
    if args[0] == "catalog":  # the sandbox's catalog (DIR/catalog.db) holds what this sync wrote
        if args[1] != "drift":
            assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
        assert world.run("sync", str(world.fleet)).exit_code == 0
    command = [a.format(fleet=world.fleet) for a in args]
    expected = expected.format(sandbox=world.sandbox.directory)
    result = run_without_env(world, *command, "--sandbox", str(world.sandbox.directory))
    assert result.exit_code == 0, result.output
    assert expected in result.stdout


def test_the_sandbox_after_the_command_wins_over_the_one_before_it_and_the_environment(world: World):
    here = str(world.sandbox.directory)
    nowhere = str(world.sandbox.directory.parent / "no-sandbox-here")
    after = run_without_env(world, "--sandbox", nowhere, "plan", str(world.fleet), "--sandbox", here)
    assert after.exit_code == 0, after.output
    assert "Plan: 9 to create, 0 to update, 0 to replace, 0 to delete." in after.stdout.splitlines()
    from_env = world.runner.invoke(
        main, ["plan", str(world.fleet), "--sandbox", here], env={"PROVISIONER_SANDBOX": nowhere}
    )
    assert from_env.exit_code == 0, from_env.output
    before_only = run_without_env(world, "--sandbox", nowhere, "plan", str(world.fleet))
    assert before_only.exit_code == 1
    assert f"no sandbox at {nowhere}" in before_only.output


def _dropped(document: dict, *path: str) -> dict:
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return document


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda d: _dropped(d, "fleet", "text"), "damaged saved plan: fleet.text is missing"),
        (lambda d: _dropped(d, "changes"), "damaged saved plan: changes is missing"),
        (lambda d: d | {"fleet": "fleet.yaml"}, "damaged saved plan: fleet must be an object"),
        (
            lambda d: d | {"fleet": {"path": "f.yaml", "text": 7}},
            "damaged saved plan: fleet.text must be a string",
        ),
        (
            lambda d: d | {"clusters": ["gcp"]},
            "damaged saved plan: clusters must be an object of cluster name to fingerprint",
        ),
        (lambda d: d | {"changes": {"gcp": []}}, "damaged saved plan: changes must be a list"),
        (lambda d: d | {"changes": ["create"]}, "damaged saved plan: changes[0] must be an object"),
        (lambda d: d | {"destroy": "no"}, "damaged saved plan: destroy must be true or false"),
        (
            lambda d: d | {"format": "provisioner-plan/9"},
            "saved plan format 'provisioner-plan/9' is not 'provisioner-plan/1'",
        ),
    ],
)
def test_a_hand_edited_saved_plan_is_refused_as_damaged_naming_the_field(
    world: World, tmp_path: Path, damage, problem: str
):
    saved = tmp_path / "plan.json"
    assert world.run("plan", str(world.fleet), "--out", str(saved)).exit_code == 0
    saved.write_text(json.dumps(damage(json.loads(saved.read_text()))), encoding="utf-8")
    refused = world.run("apply", str(saved), "--auto-approve")
    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"error: {saved}: {problem}")
    assert world.run("plan", str(world.fleet), "--detailed-exitcode").exit_code == 2  # nothing applied


@pytest.mark.parametrize(
    "damage",
    [lambda raw: raw[: len(raw) // 2], lambda raw: raw[:200] + b"\xff\xfe\x00\x01" + raw[200:]],
    ids=["truncated", "binary"],
)
def test_a_damaged_saved_plan_file_is_refused_not_read_as_a_fleet(world: World, tmp_path: Path, damage):
    saved = tmp_path / "plan.json"
    assert world.run("plan", str(world.fleet), "--out", str(saved)).exit_code == 0
    saved.write_bytes(damage(saved.read_bytes()))
    refused = world.run("apply", str(saved), "--auto-approve")
    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"error: {saved}: damaged saved plan: not valid UTF-8 JSON")


def test_a_plan_saved_from_a_pipe_keeps_the_fleet_and_applies(world: World, tmp_path: Path):
    read_end, write_end = os.pipe()
    os.write(write_end, world.fleet.read_bytes())  # a fleet fits the pipe's buffer
    os.close(write_end)
    saved = tmp_path / "piped.plan"
    try:
        planned = world.run("plan", f"/dev/fd/{read_end}", "--out", str(saved))
    finally:
        os.close(read_end)
    assert planned.exit_code == 0, planned.output
    assert json.loads(saved.read_text())["fleet"]["text"] == world.fleet.read_text()
    applied = world.run("apply", str(saved))
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines()[-1] == "Apply complete: 9 created, 0 updated, 0 replaced, 0 deleted."


def test_a_plan_that_cannot_be_saved_is_an_error_naming_the_path(world: World, tmp_path: Path):
    out = tmp_path / "no-such-dir" / "fleet.plan"
    result = world.run("plan", str(world.fleet), "--out", str(out))
    assert result.exit_code == 1
    assert result.stderr == f"error: cannot save the plan: {out}: No such file or directory\n"


def test_a_lock_directory_that_cannot_be_made_fails_the_apply_naming_it(world: World, tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    env = {
        "PROVISIONER_SANDBOX": str(world.sandbox.directory),
        "PROVISIONER_LOCK_DIR": str(blocker / "locks"),
    }
    result = world.runner.invoke(main, ["apply", str(world.fleet), "--auto-approve"], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 1
    assert f"azure/mig (create): cannot lock cluster azure: {blocker}/locks: Not a directory" in result.stdout
    assert "Apply incomplete: 0 created" in result.stdout


def test_an_apply_whose_cloud_goes_away_gives_up_after_the_outage_window(tmp_path: Path):
    """The emulators stop mid-apply, in real processes: apply ends with its summary and the reason,
    after the outage window (2 s here), not the half-hour operation timeout."""
    import signal
    import subprocess
    import sys
    import time

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text(uuid.uuid4().hex[:8]), encoding="utf-8")
    directory = tmp_path / "sandbox"
    provisioner = [sys.executable, "-m", "provisioner"]
    server = subprocess.Popen(
        [
            *provisioner,
            "sandbox",
            "serve",
            "--dir",
            str(directory),
            "--seed",
            str(fleet),
            "--op-seconds",
            "30",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    apply = None
    try:
        deadline = time.monotonic() + 30
        while not (directory / "endpoints.json").exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        gcp = compile_file(fleet).cluster("gcp").target.ref
        driver = connect("gke", directory)
        env = {**os.environ, "PROVISIONER_SANDBOX": str(directory)}
        apply = subprocess.Popen(
            [*provisioner, "apply", str(fleet), "--auto-approve", "--outage-timeout", "2"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while not any(p.status == "changing" for p in driver.list_pools(gcp)):
            assert time.monotonic() < deadline, "apply never started an operation"
            time.sleep(0.05)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        stdout, stderr = apply.communicate(timeout=300)  # the failure signal: it never ends
    finally:
        for process in (apply, server):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert apply.returncode == 1, stdout + stderr
    assert "Traceback" not in stderr, stderr
    summary = stdout[stdout.index("Apply incomplete: 0 created") :]
    assert "9 not done:" in summary
    assert "gcp/mig (create): creating node pool mig: gave up: unreachable for " in summary
    assert "past the outage window of 2 s (apply --outage-timeout): GKE API unreachable" in summary
    assert "gcp/shared (create): not attempted: gcp is unreachable" in summary
    assert summary.endswith("Run apply again to finish: it picks up where this one stopped.\n")


def test_an_aks_spot_pool_converges_in_one_apply(world: World):
    """AKS adds its Spot label and taint to the pool: plan must not want them removed ever after."""
    world.edit(lambda pools: {**pools, "aks": pools["aks"].replace("max: 3}}", "max: 3}, spot: true}", 1)})
    assert "spot: true" in world.fleet.read_text()
    applied = world.run("apply", str(world.fleet), "--auto-approve")
    assert applied.exit_code == 0, applied.output
    after = world.run("plan", str(world.fleet), "--detailed-exitcode")
    assert after.exit_code == 0, after.output
    assert "No changes. The clusters match the fleet." in after.stdout
