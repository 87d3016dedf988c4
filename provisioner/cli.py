"""The command line: parse arguments, call the library, print. Nothing else lives here."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from provisioner import __version__
from provisioner.source import Diagnostic, FleetError

if TYPE_CHECKING:
    from provisioner.observe import Drivers
    from provisioner.plan import Plan

# Diagnostics go through click, not rich: rich would read "[azure-ml]" in a path as markup.
# Piped output gets room for whole instance-type names rather than a terminal's default 80 columns.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 132)


class _Group(click.Group):
    """Turns FleetError into its listed diagnostics and exit status 1, never a traceback."""

    def invoke(self, ctx: click.Context):
        from provisioner.drivers import DriverError  # no SDK behind this import

        try:
            return super().invoke(ctx)
        except FleetError as exc:
            _print_diagnostics(exc.diagnostics)
            ctx.exit(1)
        except DriverError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _print_diagnostics(diagnostics: list[Diagnostic]) -> None:
    for diagnostic in diagnostics:
        click.echo(str(diagnostic), err=True)
    click.echo(_count(len(diagnostics), "error"), err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="provisioner")
@click.option(
    "--sandbox",
    metavar="DIR",
    envvar="PROVISIONER_SANDBOX",
    type=click.Path(file_okay=False, path_type=Path),
    help="Talk to the emulators `sandbox serve --dir DIR` runs, not the clouds [env PROVISIONER_SANDBOX].",
)
@click.pass_context
def main(ctx: click.Context, sandbox: Path | None) -> None:
    """Fractional-GPU node pools on AKS, GKE and EKS from one fleet file."""
    ctx.obj = sandbox


@main.command()
@click.argument("fleets", nargs=-1, required=True, metavar="FLEET...")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def validate(fleets: tuple[str, ...], as_json: bool) -> None:
    """Check fleet files against the cloud and GPU rules; list every error."""
    from provisioner.sharing import compile_file

    results, problems = [], []
    for path in fleets:
        try:
            compiled = compile_file(path)
        except FleetError as exc:
            problems += exc.diagnostics
            continue
        pools = sum(len(c.pools) for c in compiled.clusters)
        results.append({"file": path, "clusters": len(compiled.clusters), "pools": pools})
    if as_json:
        errors = [vars(d) for d in problems]
        click.echo(json.dumps({"valid": results, "errors": errors}, indent=2))
        sys.exit(1 if problems else 0)
    for result in results:
        counts = f"{_count(result['clusters'], 'cluster')}, {_count(result['pools'], 'pool')}"
        out.print(f"[green]✓[/] {result['file']}: {counts}")
    if problems:
        raise FleetError(problems)


@main.command()
@click.argument("fleet")
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write DIR/<cluster>/<file>.yaml instead of printing one stream.",
)
def render(fleet: str, cluster_name: str | None, out_dir: Path | None) -> None:
    """Print the Kubernetes YAML each cluster needs: device-plugin ConfigMap, GPU Operator values."""
    from provisioner import render as rendering
    from provisioner.sharing import compile_file

    compiled = compile_file(fleet)
    if cluster_name is not None and compiled.cluster(cluster_name) is None:
        names = ", ".join(c.cluster.name for c in compiled.clusters)
        raise click.ClickException(f"no cluster {cluster_name!r} in {fleet}; clusters: {names}")
    rendered = rendering.render_fleet(compiled, cluster_name)
    if out_dir is None:
        click.echo(rendering.as_stream(rendered), nl=False)
        return
    for cluster in rendered:
        for filename, text in cluster.files.items():
            target = out_dir / cluster.name / filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            out.print(f"wrote {target}")
        if not cluster.files:
            out.print(f"{cluster.name}: {cluster.note}")


@main.command()
def schema() -> None:
    """Print the fleet file's JSON Schema (for editors)."""
    from provisioner.fleet import Fleet

    document = Fleet.model_json_schema(by_alias=True)
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "provisioner fleet file"
    click.echo(json.dumps(document, indent=2))


@main.command()
@click.argument("fleet")
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--json", "as_json", is_flag=True, help="Print the pools as JSON.")
@click.pass_obj
def pools(sandbox: Path | None, fleet: str, cluster_name: str | None, as_json: bool) -> None:
    """List every pool the fleet's clusters hold now, the ones provisioner does not own included."""
    from provisioner import report
    from provisioner.fleet import load
    from provisioner.observe import Drivers, observe

    clusters = [c for c in load(fleet).clusters if cluster_name in (None, c.name)]
    observations = observe(clusters, Drivers(sandbox))
    if as_json:
        click.echo(json.dumps(report.observations_json(observations), indent=2))
    else:
        out.print(report.observations_table(observations))
    failed = [o.cluster.name for o in observations if not o.ok]
    for observation in observations:
        if observation.error is not None:
            click.echo(f"error: {observation.cluster.name}: {observation.error}", err=True)
    if failed:
        sys.exit(1)


@main.group()
def sandbox() -> None:
    """Local emulators of the AKS, GKE and EKS APIs."""


@sandbox.command()
@click.option(
    "--dir",
    "directory",
    default=".sandbox",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write endpoints.json.",
)
@click.option(
    "--seed", "seed_fleet", metavar="FLEET", help="Create the fleet's clusters, each with a system pool."
)
@click.option("--latency-ms", default=0.0, type=click.FloatRange(min=0), help="Added to every request.")
@click.option(
    "--op-seconds", default=0.0, type=click.FloatRange(min=0), help="How long each pool operation takes."
)
@click.option(
    "--fault-rate", default=0.0, type=click.FloatRange(0, 1), help="Share of requests answered 429 or 503."
)
def serve(
    directory: Path, seed_fleet: str | None, latency_ms: float, op_seconds: float, fault_rate: float
) -> None:
    """Run the emulators on 127.0.0.1 until stopped (Ctrl-C or SIGTERM)."""
    import signal
    import threading

    from provisioner.fleet import load
    from provisioner.sandbox.server import Sandbox, SandboxSettings

    fleet = load(seed_fleet) if seed_fleet else None
    settings = SandboxSettings(latency_ms=latency_ms, op_seconds=op_seconds, fault_rate=fault_rate)
    running = Sandbox(directory, settings).start(fleet.clusters if fleet else ())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    for cloud, url in running.endpoints.items():
        out.print(f"{cloud}: {url}")
    seeded = f", {_count(len(fleet.clusters), 'cluster')} seeded" if fleet else ""
    out.print(f"wrote {directory / 'endpoints.json'}{seeded}; Ctrl-C to stop")
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
        out.print("sandbox stopped")


@functools.cache  # one set of drivers (and SDK clients) per run, shared by plan and apply
def _drivers(sandbox: Path | None) -> Drivers:
    from provisioner.observe import Drivers

    return Drivers(sandbox)


@main.command()
@click.argument("fleet")
@click.option(
    "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), help="Save the plan for apply."
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option(
    "--detailed-exitcode", is_flag=True, help="Exit 0 with no changes, 2 with changes, 1 on errors."
)
@click.option("--destroy", is_flag=True, help="Plan to delete every pool provisioner owns in these clusters.")
@click.pass_obj
def plan(
    sandbox: Path | None,
    *,
    fleet: str,
    out_file: Path | None,
    as_json: bool,
    detailed_exitcode: bool,
    destroy: bool,
):
    """Show what apply would change: pools to create, update in place, replace or delete."""
    from provisioner import planfile, report
    from provisioner.workflow import make_plan, read_fleet

    compiled, text = read_fleet(fleet)
    made = make_plan(compiled, _drivers(sandbox), destroy=destroy)
    if as_json:
        click.echo(json.dumps(made.json(), indent=2))
    else:
        out.print(report.plan_text(made), end="")
    if out_file is not None and not made.errors:
        planfile.save(made, fleet, text, out_file)
        if not as_json:
            out.print(f"Saved the plan to {out_file}; `provisioner apply {out_file}` carries it out.")
    for error in made.errors:
        click.echo(f"error: {error}", err=True)
    if made.errors:
        sys.exit(1)
    sys.exit(2 if detailed_exitcode and made.changes else 0)


def _lock_timeout_option(command):
    return click.option(
        "--lock-timeout",
        default=300.0,
        show_default=True,
        type=click.FloatRange(min=0),
        help="Seconds to wait for another apply on the same cluster to finish.",
    )(command)


@main.command()
@click.argument("target", metavar="FLEET|PLANFILE")
@click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")
@_lock_timeout_option
@click.pass_obj
def apply(sandbox: Path | None, target: str, auto_approve: bool, lock_timeout: float) -> None:
    """Carry out a plan: the fleet's (after confirmation), or a saved one (refused if stale)."""
    from provisioner import planfile

    try:
        saved = planfile.load(Path(target))
    except (planfile.NotAPlan, OSError):
        saved = None
    if saved is not None:
        from provisioner.workflow import replan_saved

        _carry_out(sandbox, replan_saved(saved, _drivers(sandbox)), lock_timeout)
    else:
        _plan_and_carry_out(
            sandbox, target, destroy=False, auto_approve=auto_approve, lock_timeout=lock_timeout
        )


@main.command()
@click.argument("fleet")
@click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")
@_lock_timeout_option
@click.pass_obj
def destroy(sandbox: Path | None, fleet: str, auto_approve: bool, lock_timeout: float) -> None:
    """Delete every pool provisioner owns in the fleet's clusters (others are never touched)."""
    _plan_and_carry_out(sandbox, fleet, destroy=True, auto_approve=auto_approve, lock_timeout=lock_timeout)


def _plan_and_carry_out(
    sandbox: Path | None, fleet: str, destroy: bool, auto_approve: bool, lock_timeout: float
):
    from provisioner import report
    from provisioner.workflow import make_plan, read_fleet

    compiled, _ = read_fleet(fleet)

    def waiting(running: list[str]) -> None:
        out.print(f"[dim]waiting for operations still running: {', '.join(running)}[/]", highlight=False)

    made = make_plan(compiled, _drivers(sandbox), destroy=destroy, settle=True, on_wait=waiting)
    out.print(report.plan_text(made), end="")
    for error in made.errors:
        click.echo(f"error: {error}", err=True)
    if not made.changes:
        sys.exit(1 if made.errors else 0)
    if not auto_approve:
        verb = "destroy these pools" if destroy else "apply these changes"
        answer = click.prompt(
            f"Do you want to {verb}? Only 'yes' will be accepted", default="", show_default=False
        )
        if answer != "yes":
            click.echo("Cancelled: nothing was changed.", err=True)
            sys.exit(1)
    _carry_out(sandbox, made, lock_timeout)
    if made.errors:
        sys.exit(1)


def _carry_out(sandbox: Path | None, made: Plan, lock_timeout: float) -> None:
    from provisioner import report
    from provisioner.apply import Applier
    from provisioner.locks import FileLocks, default_directory

    if not made.changes:
        out.print(report.plan_text(made), end="")
        return
    with report.ProgressReporter(out) as reporter:
        applier = Applier(
            _drivers(sandbox), FileLocks(default_directory(sandbox)), lock_timeout, reporter=reporter
        )
        result = applier.run(made)
    out.print(report.apply_summary(result), end="")
    if not result.ok:
        sys.exit(1)
