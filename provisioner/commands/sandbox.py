"""`sandbox serve`: the local emulators of the clouds and a Kubernetes API per cluster."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from provisioner.commands.common import out, plural


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
def serve(
    directory: Path, seed_fleet: str | None, latency_ms: float, op_seconds: float, fault_rate: float
) -> None:
    """Run the emulators on 127.0.0.1 until stopped (Ctrl-C or SIGTERM)."""
    import signal
    import threading

    from provisioner.clusters import Target
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
