"""`sync` and `catalog ls|inspect|drift|serve`: writing the catalog and reading it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape

from provisioner.commands.common import (
    catalog_option,
    drivers_for,
    err,
    out,
    plural,
    sandbox_option,
    store_for,
)
from provisioner.commands.kube import kube_access, kube_options
from provisioner.drivers.registry import DRIVERS  # names only: no SDK behind this import


def _shard(value: str | None) -> tuple[int, int] | None:
    from provisioner.shards import parse_shard

    if value is None:
        return None
    try:
        return parse_shard(value)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--shard") from None


@click.command()
@click.argument("fleet")
@catalog_option
@click.option(
    "--discover",
    is_flag=True,
    help="Also catalog the GPU pools of clusters the fleet does not name (with --shard, in its scopes).",
)
@click.option(
    "--shard",
    metavar="I/N",
    help="Only shard I (from 0) of N: whole quota scopes (subscription, project, account and "
    "region), dealt so each shard has about as many clusters; every shard deals alike.",
)
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
    store = store_for(sandbox, catalog_url)
    drivers = drivers_for(sandbox)
    found, discovery_errors = (
        syncing.discover(compiled.clusters, drivers, shard=shard_range) if discover else ([], {})
    )
    kube = kube_access(sandbox, kubeconfig, no_kube)
    from provisioner.report import CountHeartbeat, heartbeat_seconds
    from provisioner.spread import fork_helpers

    total = sum(map(len, syncing.in_shard(compiled.clusters, found, shard_range)))
    fork_helpers(total)  # before the heartbeat's thread: a process running threads forks none
    with CountHeartbeat(err, "syncing", total, heartbeat_seconds()) as progress:
        report = syncing.sync(
            compiled.clusters,
            drivers,
            store,
            shard=shard_range,
            discovered=found,
            kube=kube,
            each_done=progress.tick,
        )
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
        synced = f"{plural(len(report.written), 'cluster')} ({plural(report.pools, 'pool')})"
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


@click.group()
def catalog() -> None:
    """What the catalog holds: pools, GPU capacity, drift."""


@catalog.command("ls")
@catalog_option
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

    pools = store_for(sandbox, catalog_url, create=False).live_pools(cloud, cluster_name)
    if as_json:
        click.echo(json.dumps(pools, indent=2))
    else:
        out.print(pools_table(pools))


@catalog.command("inspect")
@catalog_option
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--json", "as_json", is_flag=True, help="Print the capacity as JSON.")
@sandbox_option
@click.pass_obj
def catalog_inspect(sandbox: Path | None, catalog_url: str | None, cluster_name: str | None, as_json: bool):
    """GPU capacity per cluster and pool: GPUs, slices, memory per slice, and totals."""
    from provisioner.catalog.views import capacity_rows, capacity_table

    rows = capacity_rows(store_for(sandbox, catalog_url, create=False).live_pools(cluster=cluster_name))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        out.print(capacity_table(rows))


@catalog.command("drift")
@catalog_option
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--json", "as_json", is_flag=True, help="Print the drift as JSON.")
@sandbox_option
@click.pass_obj
def catalog_drift(sandbox: Path | None, catalog_url: str | None, cluster_name: str | None, as_json: bool):
    """Pools that differ from the fleet, as the last sync of each cluster found them."""
    from provisioner.catalog.views import drift_lines

    drift = store_for(sandbox, catalog_url, create=False).drift(cluster_name)
    if as_json:
        click.echo(json.dumps(drift, indent=2))
        return
    for line in drift_lines(drift):
        click.echo(line)
    if not drift:
        out.print("No drift: every synced fleet cluster matches the fleet.")


@catalog.command("serve")
@catalog_option
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
    store = store_for(sandbox, catalog_url)

    def announce(address: str) -> None:
        out.print(escape(f"Serving the catalog {redacted(store.url)} at {address} (Ctrl-C to stop)"))

    serve(store, host, port, token or None, announce)
