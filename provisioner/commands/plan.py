"""`plan`, `apply` and `destroy`, and the console view through which apply shows its work."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from provisioner.commands.common import catalog_option, drivers_for, os_error, out, plural, sandbox_option
from provisioner.commands.kube import kube_access, kube_options

if TYPE_CHECKING:
    from provisioner.apply import ApplyResult
    from provisioner.catalog.sync import SyncReport
    from provisioner.plan import Plan
    from provisioner.report import ProgressReporter


@click.command()
@click.argument("fleet")
@click.option(
    "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), help="Save the plan for apply."
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option(
    "--detailed-exitcode", is_flag=True, help="Exit 0 with no changes, 2 with changes, 1 on errors."
)
@click.option("--destroy", is_flag=True, help="Plan to delete every pool provisioner owns in these clusters.")
@kube_options
@sandbox_option
@click.pass_obj
def plan(
    sandbox: Path | None,
    *,
    fleet: str,
    out_file: Path | None,
    as_json: bool,
    detailed_exitcode: bool,
    destroy: bool,
    kubeconfig: Path | None,
    no_kube: bool,
):
    """Show what apply would change: pools to create, update in place, replace or delete."""
    from provisioner import planfile, report
    from provisioner.workflow import make_plan, read_fleet

    compiled, text = read_fleet(fleet)
    kube = kube_access(sandbox, kubeconfig, no_kube)
    made = make_plan(compiled, drivers_for(sandbox), destroy=destroy, kube=kube)
    if as_json:
        click.echo(json.dumps(made.json(), indent=2))
    else:
        out.print(report.plan_text(made), end="")
    if out_file is not None and not made.errors:
        try:
            planfile.save(made, fleet, text, out_file)
        except OSError as exc:
            os_error("cannot save the plan", exc)
        if not as_json:
            saved = escape(str(out_file))
            out.print(f"Saved the plan to {saved}; `provisioner apply {saved}` carries it out.")
    for error in made.errors:
        click.echo(f"error: {error}", err=True)
    if made.errors:
        sys.exit(1)
    sys.exit(2 if detailed_exitcode and made.has_changes else 0)


def _lock_timeout_option(command):
    return click.option(
        "--lock-timeout",
        default=300.0,
        show_default=True,
        type=click.FloatRange(min=0),
        help="Seconds to wait for another apply on the same cluster to finish.",
    )(command)


def _outage_timeout_option(command):
    return click.option(
        "--outage-timeout",
        default=180.0,
        show_default=True,
        type=click.FloatRange(min=0),
        metavar="SECONDS",
        help="Give up on a cloud that stays unreachable (no answer, 5xx) this long; "
        "throttling and busy clusters are waited out longer.",
    )(command)


def _lock_url_option(command):
    return click.option(
        "--lock-url",
        metavar="URL",
        envvar="PROVISIONER_LOCK_URL",
        help="PostgreSQL whose advisory locks every machine's applies share [env PROVISIONER_LOCK_URL; "
        "default: the catalog's where it is PostgreSQL, else lock files on this machine].",
    )(command)


def _rollout_options(command):
    """How replacements drain and label changes roll out on live nodes."""
    for option in reversed(
        [
            click.option(
                "--drain-timeout",
                default=1800.0,
                show_default=True,
                type=click.FloatRange(min=0),
                metavar="SECONDS",
                help="How long a drain may wait for PodDisruptionBudgets to allow the evictions; past it "
                "the old pool is left, and apply fails naming the pods that block.",
            ),
            click.option(
                "--force-drain",
                is_flag=True,
                help="Past --drain-timeout, delete the pods that block (bypassing their budgets) and go on.",
            ),
            click.option(
                "--max-unavailable",
                default=1,
                show_default=True,
                type=click.IntRange(min=1),
                help="Nodes reconfigured at once when a MIG or device-plugin label changes on live nodes.",
            ),
        ]
    ):
        command = option(command)
    return command


@click.command()
@click.argument("target", metavar="FLEET|PLANFILE")
@click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")
@_rollout_options
@_lock_timeout_option
@_lock_url_option
@_outage_timeout_option
@catalog_option
@kube_options
@sandbox_option
@click.pass_obj
def apply(
    sandbox: Path | None,
    target: str,
    *,
    auto_approve: bool,
    lock_timeout: float,
    lock_url: str | None,
    outage_timeout: float,
    catalog_url: str | None,
    kubeconfig: Path | None,
    no_kube: bool,
    drain_timeout: float,
    force_drain: bool,
    max_unavailable: int,
) -> None:
    """Carry out a plan: the fleet's (after confirmation), or a saved one (refused if stale).

    First, in each cluster whose pools name device-plugin config keys, it server-side-applies the
    device-plugin ConfigMap `render` prints (--no-kube: you apply it yourself). A pool the cloud
    cannot change in place is replaced create-first (unless its fleet entry says replace:
    delete-first): the new pool is made beside the old, its nodes waited for, the old drained
    through the Eviction API and only then deleted."""
    from provisioner import planfile, workflow
    from provisioner.rollout import RolloutSettings

    kube = kube_access(sandbox, kubeconfig, no_kube)
    rollout = RolloutSettings(drain_timeout, force_drain, max_unavailable)
    settings = workflow.ApplySettings(
        sandbox, lock_timeout, catalog_url, outage_timeout, lock_url, kube, rollout
    )
    try:
        saved = planfile.load(Path(target))
    except (planfile.NotAPlan, OSError):
        saved = None
    except planfile.DamagedPlan as exc:
        click.echo(f"error: {exc}; make it again with `provisioner plan FLEET --out FILE`", err=True)
        sys.exit(1)
    drivers = drivers_for(sandbox)
    if saved is None:
        ok = workflow.plan_and_carry_out(
            settings, target, drivers, _ConsoleView(), destroy=False, auto_approve=auto_approve
        )
    else:
        compiled, made = workflow.replan_saved(saved, drivers, kube)
        ok = workflow.carry_out(settings, compiled, made, drivers, _ConsoleView())
    sys.exit(0 if ok else 1)


@click.command()
@click.argument("fleet")
@click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")
@_lock_timeout_option
@_lock_url_option
@_outage_timeout_option
@catalog_option
@sandbox_option
@click.pass_obj
def destroy(
    sandbox: Path | None,
    fleet: str,
    *,
    auto_approve: bool,
    lock_timeout: float,
    lock_url: str | None,
    outage_timeout: float,
    catalog_url: str | None,
) -> None:
    """Delete every pool provisioner owns in the fleet's clusters (others are never touched)."""
    from provisioner import workflow

    settings = workflow.ApplySettings(sandbox, lock_timeout, catalog_url, outage_timeout, lock_url)
    ok = workflow.plan_and_carry_out(
        settings, fleet, drivers_for(sandbox), _ConsoleView(), destroy=True, auto_approve=auto_approve
    )
    sys.exit(0 if ok else 1)


class _ConsoleView:
    """workflow.ApplyView on the terminal: the plan and progress on stdout, errors on stderr."""

    def __init__(self) -> None:
        from provisioner.report import heartbeat_seconds

        self.heartbeat = heartbeat_seconds()  # a bad value is said before anything is planned

    def waiting(self, running: list[str]) -> None:
        names = escape(", ".join(running))
        out.print(f"[dim]waiting for operations still running: {names}[/]", highlight=False)

    def show_plan(self, plan: Plan) -> None:
        from provisioner import report

        out.print(report.plan_text(plan), end="")

    def show_errors(self, errors: list[str]) -> None:
        for error in errors:
            click.echo(f"error: {error}", err=True)

    def approve(self, destroy: bool) -> bool:
        verb = "destroy these pools" if destroy else "apply these changes"
        answer = click.prompt(
            f"Do you want to {verb}? Only 'yes' will be accepted", default="", show_default=False
        )
        if answer != "yes":
            click.echo("Cancelled: nothing was changed.", err=True)
        return answer == "yes"

    def progress(self) -> ProgressReporter:
        from provisioner.report import ProgressReporter

        return ProgressReporter(out, self.heartbeat)

    def applied(self, result: ApplyResult) -> None:
        from provisioner import report

        out.print(report.apply_summary(result), end="")

    def recorded(self, report: SyncReport) -> None:
        out.print(f"Catalog: recorded {plural(len(report.written), 'changed cluster')}.")
        for name, error in report.failed.items():
            click.echo(
                f"error: catalog: {name} not recorded: {error}; `provisioner sync` records it", err=True
            )
