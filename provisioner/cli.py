"""The command line: parse arguments, call the library, print. Nothing else lives here."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console
from rich.markup import escape

from provisioner import __version__
from provisioner.commands.kube import (
    inspect_command,
    kube_access,
    kube_options,
    sandbox_option,
    verify_command,
)
from provisioner.drivers.registry import DRIVERS  # names only: no SDK behind this import
from provisioner.errors import FleetError, ProvisionerError

if TYPE_CHECKING:
    from provisioner.apply import ApplyResult
    from provisioner.catalog.store import Store
    from provisioner.catalog.sync import SyncReport
    from provisioner.observe import Drivers
    from provisioner.plan import Plan
    from provisioner.report import ProgressReporter

# Diagnostics go through click, not rich: rich would read "[azure-ml]" in a path as markup. What
# does go through rich has every value from the user or a cloud escaped (rich.markup.escape), and
# no :name: in one becomes an emoji (emoji=False: escape leaves those).
# Piped output gets room for whole instance-type names rather than a terminal's default 80 columns.
out = Console(highlight=False, soft_wrap=True, emoji=False, width=None if sys.stdout.isatty() else 132)


# Old spellings kept for one release, each the command that now does the job. `render cronjob`
# (before `manifests cronjob`) generated users' CronJobs; `render FLEET` is a fleet file's.
DEPRECATED: dict[tuple[str, ...], tuple[str, ...]] = {("render", "cronjob"): ("manifests", "cronjob")}


class _Group(click.Group):
    """Prints any error of the tool's one tree and exits 1: never a traceback."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        old = tuple(args[:2])
        new = DEPRECATED.get(old)
        if new is not None and not Path(args[1]).is_file():  # a fleet file named `cronjob` renders
            click.echo(
                f"warning: `provisioner {' '.join(old)}` is deprecated and goes in the next release; "
                f"use `provisioner {' '.join(new)}`",
                err=True,
            )
            args = [*new, *args[2:]]
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ProvisionerError as exc:
            for line in exc.report():
                click.echo(line, err=True)
            ctx.exit(1)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _os_error(doing: str, exc: OSError) -> NoReturn:
    """An OS error on a path the user gave, as one line naming the path; exit 1, never a traceback."""
    click.echo(f"error: {doing}: {exc.filename}: {exc.strerror or exc}", err=True)
    sys.exit(1)


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
    """Fractional-GPU node pools on AKS, GKE, EKS and ACK from one fleet file."""
    ctx.obj = sandbox


@main.command()
@click.argument("fleets", nargs=-1, required=True, metavar="FLEET...")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@sandbox_option
def validate(fleets: tuple[str, ...], as_json: bool) -> None:
    """Check fleet files against the cloud and GPU rules; list every error."""
    from provisioner.compile import compile_file

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
        out.print(f"[green]✓[/] {escape(result['file'])}: {counts}")
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
@sandbox_option
def render(fleet: str, *, cluster_name: str | None, out_dir: Path | None) -> None:
    """Print the Kubernetes YAML each cluster needs: device-plugin ConfigMap, GPU Operator values."""
    from provisioner import render as rendering
    from provisioner.compile import compile_file

    compiled = compile_file(fleet)
    if cluster_name is not None and compiled.cluster(cluster_name) is None:
        names = ", ".join(c.name for c in compiled.clusters)
        raise click.ClickException(f"no cluster {cluster_name!r} in {fleet}; clusters: {names}")
    rendered = rendering.render_fleet(compiled, cluster_name)
    if out_dir is None:
        click.echo(rendering.as_stream(rendered), nl=False)
        return
    for cluster in rendered:
        for filename, text in cluster.files.items():
            target = out_dir / cluster.name / filename
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            except OSError as exc:
                _os_error("cannot write the rendered files", exc)
            out.print(f"wrote {escape(str(target))}")
        if not cluster.files:
            out.print(escape(f"{cluster.name}: {cluster.note}"))


@main.group()
def manifests() -> None:
    """Kubernetes manifests for running provisioner itself in a cluster."""


@manifests.command()
@click.option(
    "--schedule", required=True, metavar="CRON", help="When the nightly sync runs, e.g. '0 2 * * *'."
)
@click.option("--image", default="ghcr.io/example/provisioner:latest", show_default=True, help="The image.")
@click.option(
    "--shards", default=1, show_default=True, type=click.IntRange(min=1), help="Sync pods, each a share."
)
@click.option("--namespace", default="provisioner", show_default=True, help="Its namespace.")
@sandbox_option
def cronjob(schedule: str, image: str, shards: int, namespace: str) -> None:
    """Print the CronJob that runs `provisioner sync` nightly (with --shards N, an Indexed Job of
    N pods, each syncing its share of the fleet)."""
    from provisioner import render as rendering

    manifest = rendering.render_cronjob(schedule=schedule, image=image, namespace=namespace, shards=shards)
    click.echo(manifest, nl=False)


@manifests.command("catalog-service")
@click.option("--image", default="ghcr.io/example/provisioner:latest", show_default=True, help="The image.")
@click.option("--namespace", default="provisioner", show_default=True, help="Its namespace.")
@click.option("--replicas", default=1, show_default=True, type=click.IntRange(min=1), help="Pods serving.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="Pod port.")
@sandbox_option
def catalog_service(image: str, namespace: str, replicas: int, port: int) -> None:
    """Print the Deployment and Service that run `catalog serve` (token and catalog URL from the
    Secret provisioner-catalog, keys token and url)."""
    from provisioner import render as rendering

    manifest = rendering.render_catalog_service(
        image=image, namespace=namespace, replicas=replicas, port=port
    )
    click.echo(manifest, nl=False)


@main.command()
@sandbox_option
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
@sandbox_option
@click.pass_obj
def pools(sandbox: Path | None, fleet: str, cluster_name: str | None, as_json: bool) -> None:
    """List every pool the fleet's clusters hold now, the ones provisioner does not own included."""
    from provisioner import report
    from provisioner.drivers import Target
    from provisioner.fleet import load
    from provisioner.observe import observe

    clusters = [Target(c.name, c.ref) for c in load(fleet).clusters if cluster_name in (None, c.name)]
    observations = observe(clusters, _drivers(sandbox))
    if as_json:
        click.echo(json.dumps(report.observations_json(observations), indent=2))
    else:
        out.print(report.observations_table(observations))
    failed = [o for o in observations if o.error is not None]
    for observation in failed:
        click.echo(f"error: {observation.target.name}: {observation.error}", err=True)
    if failed:
        sys.exit(1)


@main.command("import")
@click.argument("fleet")
@click.option(
    "--cluster", "cluster_names", multiple=True, metavar="NAME", help="Only this cluster (repeatable)."
)
@click.option(
    "--pool", "pool_names", multiple=True, metavar="NAME", help="Only pools of this name (repeatable)."
)
@click.option(
    "--all", "all_pools", is_flag=True, help="Every pool provisioner does not own, not only GPU pools."
)
@click.option("--write", is_flag=True, help="Add the entries (adopt: true) to FLEET in place.")
@sandbox_option
@click.pass_obj
def import_pools(
    sandbox: Path | None,
    fleet: str,
    *,
    cluster_names: tuple[str, ...],
    pool_names: tuple[str, ...],
    all_pools: bool,
    write: bool,
) -> None:
    """Fleet entries for the pools the clusters hold that provisioner does not own, each proven to
    describe its pool exactly; printed, or with --write added to FLEET (plan then shows `adopt`)."""
    from provisioner import importing
    from provisioner.observe import observe
    from provisioner.workflow import read_fleet

    compiled, text = read_fleet(fleet)
    unknown = [name for name in cluster_names if compiled.cluster(name) is None]
    if unknown:
        names = ", ".join(c.name for c in compiled.clusters)
        raise click.ClickException(f"no cluster {', '.join(unknown)} in {fleet}; clusters: {names}")
    clusters = [c for c in compiled.clusters if not cluster_names or c.name in cluster_names]
    observations = observe([c.target for c in clusters], _drivers(sandbox))
    result = importing.import_pools(clusters, observations, pool_names, all_pools)
    for skipped in result.skipped:
        click.echo(f"skipped {skipped.cluster}/{skipped.pool}: {skipped.reason}", err=True)
    if not result.entries:
        click.echo("No pools to import.", err=True)
    elif not write:
        click.echo(importing.entries_yaml(result), nl=False)
    else:
        written = importing.write_entries(fleet, text, result)
        try:
            _replace_file(Path(fleet), written)
        except OSError as exc:
            _os_error("cannot write the fleet file", exc)
        names = ", ".join(f"{e.cluster}/{e.pool}" for e in result.entries)
        out.print(
            escape(
                f"Added {_count(len(result.entries), 'pool')} with adopt: true to {fleet}: {names}. "
                f"`provisioner plan {fleet}` shows what adopting them does."
            )
        )
        for entry in result.entries:
            if entry.updates:
                out.print(
                    escape(f"  {entry.cluster}/{entry.pool}: adopting it updates it in place: ")
                    + escape("; ".join(entry.updates))
                )
    for error in result.errors:
        click.echo(f"error: {error}", err=True)
    if result.errors:
        sys.exit(1)


def _replace_file(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all (a temporary file beside it, then a rename),
    keeping the file's permissions."""
    import os
    import shutil
    import tempfile

    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        shutil.copymode(path, temporary)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@main.group()
def sandbox() -> None:
    """Local emulators of the AKS, GKE, EKS and ACK APIs, and a Kubernetes API per cluster."""


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

    from provisioner.drivers import Target
    from provisioner.fleet import load
    from provisioner.sandbox.server import Sandbox, SandboxSettings
    from provisioner.sandbox.serving import serve_alone

    fleet = load(seed_fleet) if seed_fleet else None
    settings = SandboxSettings(latency_ms=latency_ms, op_seconds=op_seconds, fault_rate=fault_rate)
    running = Sandbox(directory, settings).start(
        [Target(c.name, c.ref) for c in fleet.clusters] if fleet else ()
    )
    serve_alone()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    for cloud, url in running.endpoints.items():
        out.print(escape(f"{cloud}: {url}"))
    seeded = f", {_count(len(fleet.clusters), 'cluster')} seeded" if fleet else ""
    out.print(escape(f"wrote {directory / 'endpoints.json'}{seeded}"))
    out.print(escape(f"wrote {running.kubeconfig}: one context per seeded cluster; Ctrl-C to stop"))
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
    made = make_plan(compiled, _drivers(sandbox), destroy=destroy, kube=kube)
    if as_json:
        click.echo(json.dumps(made.json(), indent=2))
    else:
        out.print(report.plan_text(made), end="")
    if out_file is not None and not made.errors:
        try:
            planfile.save(made, fleet, text, out_file)
        except OSError as exc:
            _os_error("cannot save the plan", exc)
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


def _catalog_option(command):
    return click.option(
        "--catalog",
        "catalog_url",
        metavar="URL",
        envvar="PROVISIONER_CATALOG",
        help="SQLAlchemy URL, e.g. postgresql+psycopg://host/db [env PROVISIONER_CATALOG; "
        "default: a SQLite file in $XDG_DATA_HOME/provisioner, or DIR/catalog.db with --sandbox].",
    )(command)


@main.command()
@click.argument("target", metavar="FLEET|PLANFILE")
@click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")
@_lock_timeout_option
@_lock_url_option
@_outage_timeout_option
@_catalog_option
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
) -> None:
    """Carry out a plan: the fleet's (after confirmation), or a saved one (refused if stale).

    First, in each cluster whose pools name device-plugin config keys, it server-side-applies the
    device-plugin ConfigMap `render` prints (--no-kube: you apply it yourself)."""
    from provisioner import planfile, workflow

    kube = kube_access(sandbox, kubeconfig, no_kube)
    settings = workflow.ApplySettings(sandbox, lock_timeout, catalog_url, outage_timeout, lock_url, kube)
    try:
        saved = planfile.load(Path(target))
    except (planfile.NotAPlan, OSError):
        saved = None
    except planfile.DamagedPlan as exc:
        click.echo(f"error: {exc}; make it again with `provisioner plan FLEET --out FILE`", err=True)
        sys.exit(1)
    drivers = _drivers(sandbox)
    if saved is None:
        ok = workflow.plan_and_carry_out(
            settings, target, drivers, _ConsoleView(), destroy=False, auto_approve=auto_approve
        )
    else:
        compiled, made = workflow.replan_saved(saved, drivers, kube)
        ok = workflow.carry_out(settings, compiled, made, drivers, _ConsoleView())
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("fleet")
@click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")
@_lock_timeout_option
@_lock_url_option
@_outage_timeout_option
@_catalog_option
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
        settings, fleet, _drivers(sandbox), _ConsoleView(), destroy=True, auto_approve=auto_approve
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
        out.print(f"Catalog: recorded {_count(len(report.written), 'changed cluster')}.")
        for name, error in report.failed.items():
            click.echo(
                f"error: catalog: {name} not recorded: {error}; `provisioner sync` records it", err=True
            )


def _store(sandbox: Path | None, catalog_url: str | None, *, create: bool = True) -> Store:
    from provisioner.workflow import open_catalog

    return open_catalog(sandbox, catalog_url, create=create)


def _shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    index, _, count = value.partition("/")
    if not (index.isdigit() and count.isdigit() and 0 <= int(index) < int(count)):
        raise click.BadParameter(f"{value!r}: want i/n with 0 <= i < n, e.g. 0/4", param_hint="--shard")
    return int(index), int(count)


@main.command()
@click.argument("fleet")
@_catalog_option
@click.option(
    "--discover", is_flag=True, help="Also catalog the GPU pools of clusters the fleet does not name."
)
@click.option("--shard", metavar="I/N", help="Only the clusters whose stable hash falls in shard I of N.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@kube_options
@sandbox_option
@click.pass_obj
def sync(
    sandbox: Path | None,
    fleet: str,
    *,
    catalog_url: str | None,
    discover: bool,
    shard: str | None,
    as_json: bool,
    kubeconfig: Path | None,
    no_kube: bool,
) -> None:
    """Observe every cluster at once and write what it holds into the catalog, with what each
    pool's nodes advertise and pods hold where the cluster's Kubernetes API answers."""
    from provisioner.catalog import sync as syncing
    from provisioner.catalog.url import redacted
    from provisioner.catalog.views import drift_lines
    from provisioner.workflow import read_fleet

    shard_range = _shard(shard)
    compiled, _ = read_fleet(fleet)
    store = _store(sandbox, catalog_url)
    drivers = _drivers(sandbox)
    found, discovery_errors = syncing.discover(compiled.clusters, drivers) if discover else ([], {})
    kube = kube_access(sandbox, kubeconfig, no_kube)
    report = syncing.sync(compiled.clusters, drivers, store, shard=shard_range, discovered=found, kube=kube)
    drift = drift_lines(report.drift)
    if as_json:
        document = {
            "written": report.written,
            "failed": report.failed,
            "discovery_failed": discovery_errors,
            "pools": report.pools,
            "allocation_stale": report.allocation_stale,
            "drift": [
                {"cluster": c, "pool": d.pool, "kind": d.kind, "fields": d.fields}
                for c, ds in report.drift.items()
                for d in ds
            ],
        }
        click.echo(json.dumps(document, indent=2))
    else:
        where = escape(redacted(store.url))  # a SQLite file's path may read as markup
        synced = f"{_count(len(report.written), 'cluster')} ({_count(report.pools, 'pool')})"
        out.print(
            f"Synced {synced} into {where}" + (f", {len(found)} found by --discover" if discover else "")
        )
        for line in drift:
            out.print(f"[yellow]drift[/] {escape(line)}", highlight=False, markup=True)
    for name, error in report.allocation_stale.items():
        click.echo(f"warning: {error}; {name}'s allocation figures are kept, marked stale", err=True)
    for scope, error in discovery_errors.items():
        click.echo(f"error: discovering clusters in {scope}: {error}", err=True)
    for name, error in report.failed.items():
        click.echo(f"error: {name}: {error} (its catalog rows are kept as they were)", err=True)
    if report.failed or discovery_errors:
        failed = ", ".join([*report.failed, *discovery_errors])
        click.echo(f"sync failed for: {failed}", err=True)
    for name, conflict in report.conflicts:
        click.echo(f"error: {name}: {conflict}", err=True)
    if report.failed or discovery_errors or report.conflicts:
        sys.exit(1)


@main.command()
@click.option("--mig", metavar="PROFILE", help="A MIG slice of exactly this profile, e.g. 1g.10gb.")
@click.option("--gpu-memory", metavar="SIZE", help="At least this much GPU memory: 4GB, 4000MB, 4GiB.")
@click.option("--gpus", type=int, metavar="N", help="N whole GPUs.")
@click.option(
    "--isolation",
    metavar="LEVEL",
    help="The weakest isolation acceptable: none < memory < compute < hardware "
    "[default: hardware with --mig, else none].",
)
@click.option("--gpu", "gpu_model", metavar="MODEL", help="Only this GPU model (A100, A100-80GB, T4...).")
@click.option("--cloud", type=click.Choice(list(DRIVERS)), help="Only this cloud.")
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--pool", "pool_name", metavar="NAME", help="Only this pool.")
@_catalog_option
@click.option("--json", "as_json", is_flag=True, help="Print the placement as JSON.")
@click.option(
    "--manifest",
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Print this Kubernetes YAML (Pod, Deployment, StatefulSet, Job, CronJob; - for stdin) "
    "with the fragment merged into every pod template.",
)
@click.option("--container", metavar="NAME", help="With --manifest: the container that gets the GPU limit.")
@click.option(
    "--allow-device-bypass",
    is_flag=True,
    help="With --manifest: merge even where a container sets NVIDIA_VISIBLE_DEVICES or runs privileged "
    "(it reaches GPUs the scheduler does not count); each is named in a warning.",
)
@sandbox_option
@click.pass_obj
def place(
    sandbox: Path | None,
    *,
    mig: str | None,
    gpu_memory: str | None,
    gpus: int | None,
    isolation: str | None,
    gpu_model: str | None,
    cloud: str | None,
    cluster_name: str | None,
    pool_name: str | None,
    catalog_url: str | None,
    as_json: bool,
    manifest: str | None,
    container: str | None,
    allow_device_bypass: bool,
) -> None:
    """Pick the pool a fractional-GPU request lands on, from the catalog, and print what the pod
    needs there (resource limit, node selector, tolerations), or the manifest with it merged."""
    from provisioner.errors import BadRequest
    from provisioner.placement import Request
    from provisioner.placement import place as choose

    request = Request(
        mig=mig,
        gpu_memory=gpu_memory,
        gpus=gpus,
        isolation=isolation,
        gpu=gpu_model,
        cloud=cloud,
        cluster=cluster_name,
        pool=pool_name,
    )
    if as_json and manifest:
        raise BadRequest("--json prints the placement, --manifest the manifest: give one of them")
    if container and not manifest:
        raise BadRequest("--container names a container of the --manifest FILE; give --manifest too")
    if allow_device_bypass and not manifest:
        raise BadRequest(
            "--allow-device-bypass is about the --manifest FILE's containers; give --manifest too"
        )
    source = "<stdin>" if manifest == "-" else str(manifest)
    text = _read_manifest(manifest, source) if manifest else None
    if text is not None:
        from provisioner.podspec import at_most, check

        # Said before any pool is chosen: a file that is no manifest, or one that bypasses the GPU count.
        allowed = check(text, source, container=container, allow_device_bypass=allow_device_bypass)
        for finding in at_most(allowed):
            click.echo(f"warning: {finding} (let through by --allow-device-bypass)", err=True)
    chosen = choose(_store(sandbox, catalog_url, create=False), request)
    for warning in chosen.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        click.echo(json.dumps(chosen.json(), indent=2))
        return
    summary = _placement_lines(chosen)
    if text is not None:
        from provisioner.podspec import merge

        merged = merge(
            text, chosen, source=source, container=container, allow_device_bypass=allow_device_bypass
        )
        for line in summary:  # stderr: stdout is the manifest, for `| kubectl apply -f -`
            click.echo(f"# {line}", err=True)
        click.echo(merged, nl=False)
        return
    for line in summary:
        click.echo(line)
    click.echo("# resources go on the container; the rest on the pod spec")
    click.echo(_yaml(chosen.fragment()), nl=False)


def _read_manifest(manifest: str, source: str) -> str:
    from provisioner.podspec import MAX_MANIFEST_BYTES, decode

    try:  # bounded: a pipe or /dev/zero reads like a file, or fails cleanly
        if manifest == "-":
            data = sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
        else:
            with Path(manifest).open("rb") as stream:
                data = stream.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        _os_error("reading the manifest", exc)
    return decode(data, source)


def _placement_lines(chosen) -> list[str]:
    nodes = f"{_count(chosen.max_nodes, 'node')}"
    fits = (
        f"{_count(chosen.others, 'other pool')} also fit{'s' if chosen.others == 1 else ''}"
        if chosen.others
        else "the only pool that fits"
    )
    # A memory scheduler's slice is what the pod asks for, not the pool's unit (one GiB).
    amount = next(iter(chosen.limits.values()))
    gets = f"; this pod gets {amount} GiB ({chosen.slice_memory_gb} GB)" if chosen.slice_unit == "GiB" else ""
    return [
        f"Placed on cluster {chosen.cluster} ({chosen.cloud}), pool {chosen.pool}.",
        f"Why: the smallest slice that fits: {chosen.why}{gets}; {chosen.capacity_at_max} such pods at its "
        f"maximum size ({nodes}); {fits}.",
    ]


def _yaml(document) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # keep the fragment's order
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    return buffer.getvalue()


main.add_command(verify_command)
main.add_command(inspect_command)


@main.group()
def catalog() -> None:
    """What the catalog holds: pools, GPU capacity, drift."""


@catalog.command("ls")
@_catalog_option
@click.option("--cloud", type=click.Choice(list(DRIVERS)), help="Only this cloud.")
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--json", "as_json", is_flag=True, help="Print the pools as JSON.")
@sandbox_option
@click.pass_obj
def catalog_ls(
    sandbox: Path | None, catalog_url: str | None, cloud: str | None, cluster_name: str | None, as_json: bool
):
    """The live pools in the catalog with their GPU capacity."""
    from provisioner.catalog.views import pools_table

    pools = _store(sandbox, catalog_url, create=False).live_pools(cloud, cluster_name)
    if as_json:
        click.echo(json.dumps(pools, indent=2))
    else:
        out.print(pools_table(pools))


@catalog.command("inspect")
@_catalog_option
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--json", "as_json", is_flag=True, help="Print the capacity as JSON.")
@sandbox_option
@click.pass_obj
def catalog_inspect(sandbox: Path | None, catalog_url: str | None, cluster_name: str | None, as_json: bool):
    """GPU capacity per cluster and pool: GPUs, slices, memory per slice, and totals."""
    from provisioner.catalog.views import capacity_rows, capacity_table

    rows = capacity_rows(_store(sandbox, catalog_url, create=False).live_pools(cluster=cluster_name))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        out.print(capacity_table(rows))


@catalog.command("drift")
@_catalog_option
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--json", "as_json", is_flag=True, help="Print the drift as JSON.")
@sandbox_option
@click.pass_obj
def catalog_drift(sandbox: Path | None, catalog_url: str | None, cluster_name: str | None, as_json: bool):
    """Pools that differ from the fleet, as the last sync of each cluster found them."""
    from provisioner.catalog.views import drift_lines

    drift = _store(sandbox, catalog_url, create=False).drift(cluster_name)
    if as_json:
        click.echo(json.dumps(drift, indent=2))
        return
    for line in drift_lines(drift):
        click.echo(line)
    if not drift:
        out.print("No drift: every synced fleet cluster matches the fleet.")


@catalog.command("serve")
@_catalog_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="0: any free port."
)
@click.option(
    "--token",
    envvar="PROVISIONER_CATALOG_TOKEN",
    metavar="T",
    help="Every request must carry it (Bearer, or Basic's password); required beyond loopback "
    "[env PROVISIONER_CATALOG_TOKEN].",
)
@sandbox_option
@click.pass_obj
def catalog_serve(sandbox: Path | None, catalog_url: str | None, host: str, port: int, token: str | None):
    """Serve the catalog read-only over HTTP: JSON API, /metrics and a capacity page at /."""
    from provisioner.catalog.service import is_loopback, serve
    from provisioner.catalog.url import redacted

    if not token and not is_loopback(host):
        click.echo(
            f"error: --host {host}: listening beyond this machine needs --token T "
            "(or PROVISIONER_CATALOG_TOKEN); every request must then carry it",
            err=True,
        )
        sys.exit(1)
    store = _store(sandbox, catalog_url)

    def announce(address: str) -> None:
        out.print(escape(f"Serving the catalog {redacted(store.url)} at {address} (Ctrl-C to stop)"))

    serve(store, host, port, token or None, announce)
