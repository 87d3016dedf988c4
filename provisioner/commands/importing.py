"""`pools` and `import`: what the clusters hold now, and fleet entries for the pools provisioner
does not own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape

from provisioner.commands.common import drivers_for, os_error, out, plural, sandbox_option


@click.command()
@click.argument("fleet")
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--json", "as_json", is_flag=True, help="Print the pools as JSON.")
@sandbox_option
@click.pass_obj
def pools(sandbox: Path | None, fleet: str, cluster_name: str | None, as_json: bool) -> None:
    """List every pool the fleet's clusters hold now, the ones provisioner does not own included."""
    from provisioner import report
    from provisioner.clusters import Target
    from provisioner.fleet import load
    from provisioner.observe import observe

    clusters = [Target(c.name, c.ref) for c in load(fleet).clusters if cluster_name in (None, c.name)]
    observations = observe(clusters, drivers_for(sandbox))
    if as_json:
        click.echo(json.dumps(report.observations_json(observations), indent=2))
    else:
        out.print(report.observations_table(observations))
    failed = [o for o in observations if o.error is not None]
    for observation in failed:
        click.echo(f"error: {observation.target.name}: {observation.error}", err=True)
    if failed:
        sys.exit(1)


@click.command("import")
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
    observations = observe([c.target for c in clusters], drivers_for(sandbox))
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
            os_error("cannot write the fleet file", exc)
        names = ", ".join(f"{e.cluster}/{e.pool}" for e in result.entries)
        out.print(
            escape(
                f"Added {plural(len(result.entries), 'pool')} with adopt: true to {fleet}: {names}. "
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
