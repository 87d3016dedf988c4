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
    "--op-seconds",
    default=0.0,
    type=click.FloatRange(min=0),
    help="How long each pool operation (and a MIG reconfiguration) takes.",
)
@click.option(
    "--fault-rate",
    default=0.0,
    type=click.FloatRange(0, 1),
    help="Share of requests answered 429 or 503 (and of MIG reconfigurations that fail).",
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
@click.option(
    "--quotas",
    is_flag=True,
    help="Enforce each cloud's published API rate quotas, per scope (subscription, project, account "
    "and region): past them, the cloud's throttling error with Retry-After (docs/sandbox.md).",
)
@click.option(
    "--quota-scale",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="With --quotas: multiply every quota's count and refill rate by this.",
)
@click.option(
    "--quota-speedup",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="With --quotas: multiply every refill rate, and divide every window's length, by this.",
)
def serve(
    *,
    directory: Path,
    seed_fleet: str | None,
    latency_ms: float,
    op_seconds: float,
    fault_rate: float,
    kubernetes_versions: dict[str | None, str],
    quotas: bool,
    quota_scale: float,
    quota_speedup: float,
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
        quotas=quotas,
        quota_scale=quota_scale,
        quota_speedup=quota_speedup,
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
    if quotas:
        out.print(
            escape(
                f"quotas enforced (scale {quota_scale:g}, speedup {quota_speedup:g}): "
                "each cloud's counts at GET <its address>/sandbox/quotas"
            )
        )
    out.print(escape(f"wrote {running.kubeconfig}: one context per seeded cluster; Ctrl-C to stop"))
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
        out.print("sandbox stopped")


_DIR_OPTION = click.option(
    "--dir",
    "directory",
    default=".sandbox",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The directory of the running `sandbox serve`.",
)
_CLUSTER_OPTION = click.option(
    "--cluster", "cluster", required=True, metavar="NAME", help="The cluster: its kubeconfig context."
)
_RELEASE_OPTION = click.option(
    "--release", default="dra-driver-nvidia-gpu", show_default=True, help="The Helm release's name."
)


@sandbox.command("install-dra-driver")
@_DIR_OPTION
@_CLUSTER_OPTION
@click.option(
    "--values",
    "-f",
    "values_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A values file, as `helm install -f` takes it (repeat: later files win).",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="A value, as `helm --set` takes it.")
@click.option("--namespace", "-n", default="dra-driver-nvidia-gpu", show_default=True)
@_RELEASE_OPTION
def install_dra_driver(
    *,
    directory: Path,
    cluster: str,
    values_files: tuple[Path, ...],
    sets: tuple[str, ...],
    namespace: str,
    release: str,
) -> None:
    """Do what `helm install RELEASE dra-driver-nvidia-gpu -n NAMESPACE -f FILE` does in the
    sandbox cluster NAME: install NVIDIA's DRA driver, or print helm's error and exit 1."""
    values: dict[str, object] = {}
    for path in values_files:
        values = _merged(values, _values_file(path))
    for assignment in sets:
        values = _merged(values, _set_value(assignment))
    body = {"values": values, "namespace": namespace, "release": release}
    answer = _sandbox_call(directory, cluster, "PUT", body)
    click.echo(answer["output"])


@sandbox.command("uninstall-dra-driver")
@_DIR_OPTION
@_CLUSTER_OPTION
@_RELEASE_OPTION
def uninstall_dra_driver(directory: Path, cluster: str, release: str) -> None:
    """Do what `helm uninstall RELEASE` does in the sandbox cluster NAME."""
    click.echo(_sandbox_call(directory, cluster, "DELETE", None, {"release": release})["output"])


def _values_file(path: Path) -> dict[str, object]:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        loaded = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        from provisioner.commands.common import os_error

        os_error("reading the values file", exc)
    except YAMLError as exc:
        raise click.ClickException(f"{path}: not YAML: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise click.ClickException(
            f"{path}: a values file is a mapping of the chart's values, not a list or a scalar"
        )
    return loaded


def _set_value(assignment: str) -> dict[str, object]:
    """`a.b=c` as helm --set reads it: dotted keys nest, the value typed as YAML (true, 3, null)."""
    from ruamel.yaml import YAML

    key, sep, text = assignment.partition("=")
    if not sep or not key:
        raise click.ClickException(
            f"--set {assignment!r}: expected KEY=VALUE, e.g. gpuResourcesEnabledOverride=true"
        )
    from ruamel.yaml.error import YAMLError

    try:
        value = YAML(typ="safe", pure=True).load(text) if text else ""
    except YAMLError as exc:
        problem = " ".join(str(getattr(exc, "problem", None) or "not YAML").split())
        raise click.ClickException(f"--set {assignment!r}: the value is not YAML ({problem})") from None
    for part in reversed(key.split(".")):
        value = {part: value}
    assert isinstance(value, dict)
    return value


def _merged(base: dict[str, object], extra: dict[str, object]) -> dict[str, object]:
    """A later values file over an earlier one: maps merge, anything else (null too) replaces."""
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        out[key] = _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def _sandbox_call(
    directory: Path, cluster: str, method: str, body: object, query: dict[str, str] | None = None
) -> dict[str, object]:
    """A call to the sandbox's own /sandbox/dra-driver path of `cluster`, through its kubeconfig
    context (its token and CA); the sandbox's refusal printed as helm prints one, exit 1."""
    import json
    import sys

    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import HTTPError

    kubeconfig = directory / "kubeconfig"
    if not kubeconfig.exists():
        raise click.ClickException(
            f"no sandbox is running in {directory} (no {kubeconfig}): start one with "
            f"`provisioner sandbox serve --dir {directory} --seed FLEET`"
        )
    try:
        api = config.new_client_from_config(str(kubeconfig), context=cluster)
    except ConfigException:
        contexts = ", ".join(c["name"] for c in config.list_kube_config_contexts(str(kubeconfig))[0])
        raise click.ClickException(f"no cluster {cluster!r} in {kubeconfig}; clusters: {contexts}") from None
    try:
        response = api.call_api(
            "/sandbox/dra-driver",
            method,
            query_params=list((query or {}).items()),
            body=body,
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
    except client.ApiException as refused:
        message = json.loads(refused.body or "{}").get("message") or refused.reason
        click.echo(f"Error: {message}", err=True)
        sys.exit(1)
    except HTTPError as exc:
        raise click.ClickException(f"the sandbox in {directory} does not answer: {exc}") from None
    return json.loads(response.data)
