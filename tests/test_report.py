"""What commands print is read by rich as markup: values from the user or a cloud stay as they are."""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

from provisioner import report
from provisioner.actions import CREATE
from provisioner.fleet import load
from provisioner.observe import Observation
from provisioner.pools import PoolState, Scaling
from tests.conftest import EXAMPLES


def test_the_pools_table_prints_cloud_values_with_brackets_as_they_are():
    cluster = load(EXAMPLES / "fleet.yaml").clusters[0]
    pool = PoolState(
        name="x[/]y",
        instance_type="[bold]Standard_NC4as_T4_v3[/bold]",
        gpus_per_node=1,
        mig_setting=None,
        sharing=None,
        spot=False,
        disk_size_gb=None,
        scaling=Scaling.fixed(1),
        labels=(),
        taints=(),
        owned=False,
    )
    console = Console(record=True, width=200)
    console.print(report.observations_table([Observation(cluster, (pool,))]))
    text = console.export_text()
    assert "x[/]y" in text
    assert "[bold]Standard_NC4as_T4_v3[/bold]" in text


def test_a_progress_line_says_what_is_retried_and_why():
    from provisioner.errors import Throttled, Unavailable
    from provisioner.plan import Change

    console = Console(record=True, width=200)
    with report.ProgressReporter(console) as progress:
        change = Change("gcp", "mig[/]", CREATE)
        progress.change_started(change)
        progress.change_retrying(change, Unavailable("GKE API unreachable:\n ConnectionError"), 1.5)
        unavailable = progress.progress.tasks[0].description
        progress.change_retrying(change, Throttled("Quota exceeded for [reads]", retry_after=4), 4.0)
        throttled = progress.progress.tasks[0].description
    assert Text.from_markup(unavailable).plain == (
        "gcp/mig[/]: creating (retrying in 1.5 s: cloud unreachable or failing: "
        "GKE API unreachable: ConnectionError)"
    )
    assert Text.from_markup(throttled).plain == (
        "gcp/mig[/]: creating (retrying in 4.0 s: throttled: Quota exceeded for [reads])"
    )


def test_the_plan_text_shows_exactly_what_plan_json_holds():
    from provisioner.actions import DELETE, REPLACE
    from provisioner.clusters import ClusterRef, Target
    from provisioner.plan import Change, ClusterPlan, Conflict, FieldChange, Plan

    target = Target("gcp", ClusterRef("gke", "proj", "us-central1", "ml"))
    resize = FieldChange("scaling", "1-3", 2, forces_replacement=False)
    disk = FieldChange("disk_size_gb", 100, None, forces_replacement=True)
    plan = Plan(
        (
            ClusterPlan(
                target,
                (
                    Change("gcp", "a", REPLACE, (resize, disk), reason="disk_size_gb cannot change in place"),
                    Change("gcp", "b", DELETE, (FieldChange("taints", ["k=v:NoSchedule"], None),)),
                ),
                in_progress=("c",),
                conflicts=(Conflict("d", "pool d exists but was not created by provisioner"),),
            ),
            ClusterPlan(Target("aws", ClusterRef("eks", "1", "eu-west-1", "ml")), error="access denied"),
        )
    )
    assert plan.json() == {
        "changes": [
            {
                "cluster": "gcp",
                "pool": "a",
                "action": "replace",
                "fields": [
                    {"field": "scaling", "before": "1-3", "after": 2, "forces_replacement": False},
                    {"field": "disk_size_gb", "before": 100, "after": None, "forces_replacement": True},
                ],
                "reason": "disk_size_gb cannot change in place",
            },
            {
                "cluster": "gcp",
                "pool": "b",
                "action": "delete",
                "fields": [
                    {
                        "field": "taints",
                        "before": ["k=v:NoSchedule"],
                        "after": None,
                        "forces_replacement": False,
                    }
                ],
            },
        ],
        "summary": {"create": 0, "update": 0, "replace": 1, "delete": 1, "adopt": 0},
        "in_progress": ["gcp/c"],
        "errors": ["aws: access denied", "gcp: pool d exists but was not created by provisioner"],
        "kube": [],  # no device-plugin ConfigMap was compared
        "notes": [],  # no changed pool autoscales
    }
    assert plan.errors == plan.json()["errors"]
    assert report.plan_text(plan).plain == (
        "gcp (gke)\n"
        "  … c: an operation is still running; apply waits for it\n"
        "  ! pool d exists but was not created by provisioner\n"
        "  -/+ a must be replaced (disk_size_gb cannot change in place)\n"
        "      scaling: 1-3 -> 2\n"
        "      disk_size_gb: 100 -> (cloud default)  # forces replacement\n"
        "  - b will be deleted\n"
        '      taints: ["k=v:NoSchedule"]\n'
        "aws (eks)\n"
        "  could not observe: access denied\n"
        "Plan: 0 to create, 0 to update, 1 to replace, 1 to delete.\n"
        "1 cluster could not be observed, so nothing is planned for it: aws.\n"
    )


def _progress_run(console, heartbeat: float, wait_for_heartbeat: bool) -> None:
    """One change through a reporter: started, retried, (a heartbeat seen,) finished."""
    import time

    from provisioner.apply import Outcome
    from provisioner.errors import Throttled
    from provisioner.plan import Change

    change = Change("gcp", "mig[/]", CREATE)
    with report.ProgressReporter(console, heartbeat=heartbeat) as progress:
        progress.change_started(change)
        progress.change_retrying(change, Throttled("Quota exceeded for [reads]", retry_after=4), 4.0)
        deadline = time.monotonic() + 30
        while wait_for_heartbeat and "still running" not in console.file.getvalue():
            assert time.monotonic() < deadline, "no heartbeat line while the change ran"
            time.sleep(0.01)
        progress.change_finished(Outcome("gcp", "mig[/]", CREATE, True))


def test_where_nothing_is_redrawn_each_step_is_a_line_and_a_heartbeat_names_what_runs():
    import io

    console = Console(file=io.StringIO(), width=200)  # a pipe or a file: not a terminal
    _progress_run(console, heartbeat=0.01, wait_for_heartbeat=True)
    lines = console.file.getvalue().splitlines()
    assert lines[:2] == [
        "gcp/mig[/]: creating…",
        "gcp/mig[/]: creating (retrying in 4.0 s: throttled: Quota exceeded for [reads])",
    ]
    heartbeats = lines[2:-1]
    assert heartbeats  # waited for
    # nothing else between, and no table at the end
    assert all(re.fullmatch(r"still running \(\d+s\): gcp/mig\[/\] create", line) for line in heartbeats)
    assert re.fullmatch(r"✓ gcp/mig\[/\]: created \(\d+s\)", lines[-1])


def test_on_a_terminal_progress_is_redrawn_and_no_log_line_is_added():
    import io

    console = Console(file=io.StringIO(), width=200, force_terminal=True)
    _progress_run(console, heartbeat=0.01, wait_for_heartbeat=False)
    shown = Text.from_ansi(console.file.getvalue()).plain
    assert "gcp/mig[/]: created" in shown  # rich's own live display, as before
    assert "creating…" not in shown
    assert "still running" not in shown
    assert not re.search(r"\(\d+s\)", shown)


def test_the_heartbeat_interval_comes_from_the_environment(monkeypatch):
    import pytest

    from provisioner.errors import InvalidOption

    monkeypatch.delenv(report.HEARTBEAT_ENV, raising=False)
    assert report.heartbeat_seconds() == 60.0
    monkeypatch.setenv(report.HEARTBEAT_ENV, "2.5")
    assert report.heartbeat_seconds() == 2.5
    for bad in ("abc", "0", "-1", "inf", "nan"):
        monkeypatch.setenv(report.HEARTBEAT_ENV, bad)
        with pytest.raises(InvalidOption) as refused:
            report.heartbeat_seconds()
        assert refused.value.report() == [
            f"error: PROVISIONER_PROGRESS_INTERVAL: {bad!r} is not a positive number of seconds"
        ]


def test_durations_are_written_as_terraform_logs_them():
    assert [report.duration(s) for s in (0, 45.9, 60, 125, 3725)] == ["0s", "45s", "1m0s", "2m5s", "1h2m5s"]
