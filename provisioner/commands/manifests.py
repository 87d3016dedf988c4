"""`manifests`: the Kubernetes manifests that run provisioner itself in a cluster."""

from __future__ import annotations

import click

from provisioner.commands.common import sandbox_option


@click.group()
def manifests() -> None:
    """Kubernetes manifests for running provisioner itself in a cluster."""


@manifests.command()
@click.option(
    "--schedule", required=True, metavar="CRON", help="When the nightly sync runs, e.g. '0 2 * * *'."
)
@click.option("--image", default="ghcr.io/example/provisioner:latest", show_default=True, help="The image.")
@click.option(
    "--shards",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Sync pods, each a shard of whole quota scopes, retried alone.",
)
@click.option("--namespace", default="provisioner", show_default=True, help="Its namespace.")
@sandbox_option
def cronjob(schedule: str, image: str, shards: int, namespace: str) -> None:
    """Print the CronJob that runs `provisioner sync` nightly (with --shards N, an Indexed Job of
    N pods, each syncing its shard of the fleet)."""
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
