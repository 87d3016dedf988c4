"""`sandbox serve`: the local emulators of the clouds and a Kubernetes API per cluster."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from provisioner.commands.common import out, plural

_VERSION_OPTION = "--kubernetes-version"


def _kubernetes_versions(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> dict[str | None, str]:
    """Each `[CLUSTER=]X.Y[.Z]`, checked, by cluster (None: the default); one value per key."""
    from provisioner.sandbox.versions import parse_setting

    settings: dict[str | None, str] = {}
    for value in values:
        try:
            cluster, release = parse_setting(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=_VERSION_OPTION) from None
        if cluster in settings:
            what = f"cluster {cluster}'s version" if cluster else "the default version (no CLUSTER=)"
            raise click.BadParameter(f"{what} is given twice", param_hint=_VERSION_OPTION)
        settings[cluster] = str(release)
    return settings


def _check_names(versions: dict[str | None, str], seeded: list[str]) -> None:
    """Every CLUSTER= names a cluster of the seeded fleet."""
    unknown = ", ".join(sorted(name for name in versions if name is not None and name not in seeded))
    if unknown and not seeded:
        raise click.BadParameter(
            f"{unknown}: no cluster is seeded (give --seed FLEET)", param_hint=_VERSION_OPTION
        )
    if unknown:
        raise click.BadParameter(
            f"{unknown}: no seeded cluster has that name (the fleet's: {', '.join(seeded)})",
            param_hint=_VERSION_OPTION,
        )


@click.group()
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
@click.option(
    _VERSION_OPTION,
    "kubernetes_versions",
    multiple=True,
    metavar="[CLUSTER=]X.Y[.Z]",
    callback=_kubernetes_versions,
    help="The Kubernetes version the seeded clusters run (default 1.35, in each cloud's own form); "
    "CLUSTER= sets one cluster's, by its fleet name. Repeatable.",
)
def serve(
    *,
    directory: Path,
    seed_fleet: str | None,
    latency_ms: float,
    op_seconds: float,
    fault_rate: float,
    kubernetes_versions: dict[str | None, str],
) -> None:
    """Run the emulators on 127.0.0.1 until stopped (Ctrl-C or SIGTERM)."""
    import signal
    import threading

    from provisioner.clusters import Target
    from provisioner.fleet import load
    from provisioner.sandbox.server import Sandbox, SandboxSettings
    from provisioner.sandbox.serving import serve_alone
    from provisioner.sandbox.versions import DEFAULT_KUBERNETES_VERSION

    fleet = load(seed_fleet) if seed_fleet else None
    _check_names(kubernetes_versions, [c.name for c in fleet.clusters] if fleet else [])
    settings = SandboxSettings(
        latency_ms=latency_ms,
        op_seconds=op_seconds,
        fault_rate=fault_rate,
        kubernetes_version=kubernetes_versions.get(None, DEFAULT_KUBERNETES_VERSION),
        kubernetes_versions={name: v for name, v in kubernetes_versions.items() if name is not None},
    )
    running = Sandbox(directory, settings).start(
        [Target(c.name, c.ref) for c in fleet.clusters] if fleet else ()
    )
    serve_alone()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    for cloud, url in running.endpoints.items():
        out.print(escape(f"{cloud}: {url}"))
    seeded = f", {plural(len(fleet.clusters), 'cluster')} seeded" if fleet else ""
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
