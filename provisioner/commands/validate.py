"""`validate`, `render` and `schema`: the commands that read a fleet file and touch no cloud."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape

from provisioner.commands.common import os_error, out, plural, sandbox_option
from provisioner.errors import FleetError


@click.command()
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
        counts = f"{plural(result['clusters'], 'cluster')}, {plural(result['pools'], 'pool')}"
        out.print(f"[green]✓[/] {escape(result['file'])}: {counts}")
    if problems:
        raise FleetError(problems)


@click.command()
@click.argument("fleet")
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write DIR/<cluster>/<file>.yaml instead of printing one stream.",
)
@click.option(
    "--kubernetes-version",
    "version_text",
    metavar="X.Y",
    help="The clusters' Kubernetes version (render reads no cloud): from 1.36, a MIG DeviceClass "
    "of a DRA pool also maps its extended resource.",
)
@sandbox_option
def render(fleet: str, *, cluster_name: str | None, out_dir: Path | None, version_text: str | None) -> None:
    """Print the Kubernetes YAML each cluster needs: device-plugin ConfigMap, GPU Operator values,
    and where pools use DRA, the DRA driver's values and DeviceClasses."""
    from provisioner import render as rendering
    from provisioner.clusters import KubernetesVersion
    from provisioner.compile import compile_file
    from provisioner.errors import InvalidOption

    version = None
    if version_text is not None:
        try:
            version = KubernetesVersion.parse(version_text)
        except ValueError as exc:
            raise InvalidOption("--kubernetes-version", f"{exc}, e.g. 1.36") from None
    compiled = compile_file(fleet)
    if cluster_name is not None and compiled.cluster(cluster_name) is None:
        names = ", ".join(c.name for c in compiled.clusters)
        raise click.ClickException(f"no cluster {cluster_name!r} in {fleet}; clusters: {names}")
    versions = {c.name: version for c in compiled.clusters} if version is not None else None
    rendered = rendering.render_fleet(compiled, cluster_name, versions)
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
                os_error("cannot write the rendered files", exc)
            out.print(f"wrote {escape(str(target))}")
        if not cluster.files:
            out.print(escape(f"{cluster.name}: {cluster.note}"))


@click.command()
@sandbox_option
def schema() -> None:
    """Print the fleet file's JSON Schema (for editors)."""
    from provisioner.fleet import Fleet

    document = Fleet.model_json_schema(by_alias=True)
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "provisioner fleet file"
    click.echo(json.dumps(document, indent=2))
