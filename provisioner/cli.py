"""The command line: parse arguments, call the library, print. Nothing else lives here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console

from provisioner import __version__
from provisioner.source import Diagnostic, FleetError

# Diagnostics go through click, not rich: rich would read "[azure-ml]" in a path as markup.
out = Console(highlight=False)


class _Group(click.Group):
    """Turns FleetError into its listed diagnostics and exit status 1, never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except FleetError as exc:
            _print_diagnostics(exc.diagnostics)
            ctx.exit(1)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _print_diagnostics(diagnostics: list[Diagnostic]) -> None:
    for diagnostic in diagnostics:
        click.echo(str(diagnostic), err=True)
    click.echo(_count(len(diagnostics), "error"), err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="provisioner")
def main() -> None:
    """Fractional-GPU node pools on AKS, GKE and EKS from one fleet file."""


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
