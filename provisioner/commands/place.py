"""`place`: the pool a fractional-GPU request lands on, and what its pod needs there."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from provisioner.commands.common import catalog_option, os_error, plural, sandbox_option, store_for
from provisioner.commands.kube import kubeconfig_option
from provisioner.drivers.registry import DRIVERS  # names only: no SDK behind this import

if TYPE_CHECKING:
    from provisioner.catalog.store import Store
    from provisioner.request import Request


@click.command()
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
@catalog_option
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
@click.option(
    "--live",
    is_flag=True,
    help="Count free slices from each cluster's Kubernetes API now, not from the last sync.",
)
@click.option(
    "--fleet",
    metavar="FLEET",
    help="With --live: the fleet file whose entries say which kubeconfig context reaches each "
    "cluster [default: the context named as the catalog names the cluster].",
)
@click.option(
    "--share-group",
    metavar="NAME",
    help="On a time-sliced or MPS DRA pool: pods placed with the same group share its claims "
    "(<pool>-NAME-0, -1, ...) [default: share].",
)
@click.option(
    "--namespace",
    metavar="NS",
    help="The namespace the pod and its claim go in: set on the claim object; with --live, where "
    "shared claims are counted [default: the kubectl context's, counted in default].",
)
@kubeconfig_option
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
    live: bool,
    fleet: str | None,
    kubeconfig: Path | None,
    share_group: str | None,
    namespace: str | None,
) -> None:
    """Pick the pool a fractional-GPU request lands on, from the catalog, and print what the pod
    needs there (resource limit, node selector, tolerations), or the manifest with it merged. On a
    DRA pool: the ResourceClaimTemplate or shared ResourceClaim first, then the pod's claims."""
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
    _refuse_flags(
        as_json=as_json,
        manifest=manifest,
        container=container,
        live=live,
        how_live=bool(fleet or kubeconfig),
        allow_device_bypass=allow_device_bypass,
        labels={"--share-group": share_group, "--namespace": namespace},
    )
    source = "<stdin>" if manifest == "-" else str(manifest)
    text = _read_manifest(manifest, source) if manifest else None
    if text is not None:
        from provisioner.podspec import at_most, check

        # Said before any pool is chosen: a file that is no manifest, or one that bypasses the GPU count.
        allowed = check(text, source, container=container, allow_device_bypass=allow_device_bypass)
        for finding in at_most(allowed):
            click.echo(f"warning: {finding} (let through by --allow-device-bypass)", err=True)
    store = store_for(sandbox, catalog_url, create=False)
    chosen = choose(_live(store, request, sandbox, fleet, kubeconfig) if live else store, request)
    for warning in chosen.warnings:
        click.echo(f"warning: {warning}", err=True)
    if text is not None and chosen.claim is not None:
        namespace = _claim_namespace(text, source, namespace)
    chosen = _claimed(chosen, share_group, namespace, live, sandbox, fleet, kubeconfig)
    if as_json:
        click.echo(json.dumps(chosen.json(), indent=2))
        return
    summary = _placement_lines(chosen) + [f"# {note}" for note in chosen.notes]
    claim = "" if chosen.claim is None else _yaml(chosen.claim) + "---\n"
    if text is None:
        _print_fragment(chosen, summary, claim)
        return
    from provisioner.podspec import merge

    merged = merge(text, chosen, source=source, container=container, allow_device_bypass=allow_device_bypass)
    for line in summary:  # stderr: stdout is the manifest, for `| kubectl apply -f -`
        click.echo(line if line.startswith("# ") else f"# {line}", err=True)
    if claim:
        click.echo("# the claim object comes first: kubectl apply -f applies documents in order", err=True)
        merged = claim + merged.removeprefix("---\n")
    click.echo(merged, nl=False)


def _claim_namespace(text: str, source: str, given: str | None) -> str | None:
    """The namespace of a DRA pool's claim: the manifest's workloads' (claims are namespaced, and a
    pod finds only its own namespace's), which --namespace, where given, must agree with."""
    from provisioner.errors import InvalidOption
    from provisioner.podspec import workload_namespaces

    named = workload_namespaces(text, source) - {None}
    if len(named) > 1:
        raise InvalidOption(
            "--manifest",
            f"{source}: its workloads are in namespaces {', '.join(sorted(named))}, and a DRA claim lives "
            "in one: place each namespace's workloads on their own",
        )
    if given is not None and named and given not in named:
        raise InvalidOption(
            "--namespace", f"{given!r}, but {source}'s workloads are in namespace {next(iter(named))}"
        )
    return given if given is not None else next(iter(named), None)


def _print_fragment(chosen: Any, summary: list[str], claim: str) -> None:
    """The placement in words, the claim object where the pool is a DRA pool, and the fragment."""
    for line in summary:
        click.echo(line)
    if claim:
        click.echo("# apply the claim object first; the pod fragment follows it")
        click.echo("---\n" + claim, nl=False)
        click.echo("# resources go on the container; resourceClaims and the rest on the pod spec")
    else:
        click.echo("# resources go on the container; the rest on the pod spec")
    click.echo(_yaml(chosen.fragment()), nl=False)


def _refuse_flags(
    *,
    as_json: bool,
    manifest: str | None,
    container: str | None,
    live: bool,
    how_live: bool,
    allow_device_bypass: bool,
    labels: dict[str, str | None],
) -> None:
    """BadRequest for an option that needs another one, or a name that is no DNS label."""
    from provisioner.claims import check_label
    from provisioner.errors import BadRequest

    if as_json and manifest:
        raise BadRequest("--json prints the placement, --manifest the manifest: give one of them")
    if container and not manifest:
        raise BadRequest("--container names a container of the --manifest FILE; give --manifest too")
    if how_live and not live:
        raise BadRequest("--fleet and --kubeconfig say how --live reaches the clusters; give --live too")
    if allow_device_bypass and not manifest:
        raise BadRequest(
            "--allow-device-bypass is about the --manifest FILE's containers; give --manifest too"
        )
    for flag, given in labels.items():
        if given is not None and (problem := check_label(flag, given)) is not None:
            raise BadRequest(problem)


def _claimed(  # noqa: PLR0917 (place's options that say which shared claim)
    chosen: Any,
    group: str | None,
    namespace: str | None,
    live: bool,
    sandbox: Path | None,
    fleet: str | None,
    kubeconfig: Path | None,
) -> Any:
    """`chosen` naming the shared claim pods of `group` find (with --live the first with room in
    the namespace), its claim in `namespace`."""
    import dataclasses

    from provisioner.claims import SHARE_GROUP, first_with_room

    device = chosen.device
    if device is None:
        if group is not None:
            click.echo(f"warning: --share-group: pool {chosen.pool} is no shared DRA pool; ignored", err=True)
        return chosen
    if group is not None and not device.shared:
        click.echo(
            f"warning: --share-group: DRA pool {chosen.pool} gives each pod its own devices; ignored",
            err=True,
        )
    read = False
    share = None
    if device.shared:
        group = group or SHARE_GROUP
        reserved: dict[str, int] = {}
        if live:
            from provisioner.kube.contexts import KubeAccess
            from provisioner.kube.live import share_claims

            reserved, error = share_claims(KubeAccess(kubeconfig, sandbox), chosen.cluster, fleet, namespace)
            if error is not None:
                click.echo(f"warning: {error}; the share's claim is the group's first", err=True)
            read = error is None
        share = device.share_name(group, first_with_room(device, reserved, group))
    return dataclasses.replace(chosen, share=share, namespace=namespace, share_read=read)


def _live(
    store: Store, request: Request, sandbox: Path | None, fleet: str | None, kubeconfig: Path | None
) -> list[dict[str, Any]]:
    """The catalog's pools with the allocation of the clusters the request may land on read now;
    a cluster that does not answer is said, and its free slices count as unknown."""
    from provisioner.kube.contexts import KubeAccess
    from provisioner.kube.live import live_rows

    rows = store.live_pools()
    fleet_clusters = None
    if fleet is not None:
        from provisioner.fleet import load

        fleet_clusters = {c.name: c for c in load(fleet).clusters}
    asked = sorted(
        {
            r["cluster"]
            for r in rows
            if r.get("gpu")
            and all(
                wanted is None or r[key] == wanted
                for key, wanted in (
                    ("cloud", request.cloud),
                    ("cluster", request.cluster),
                    ("pool", request.pool),
                )
            )
        }
    )
    shown, errors = live_rows(rows, KubeAccess(kubeconfig, sandbox), fleet_clusters, asked)
    for name, error in errors.items():
        click.echo(f"warning: {error}; {name}'s free slices count as unknown", err=True)
    return shown


def _read_manifest(manifest: str, source: str) -> str:
    from provisioner.podspec import MAX_MANIFEST_BYTES, decode

    try:  # bounded: a pipe or /dev/zero reads like a file, or fails cleanly
        if manifest == "-":
            data = sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
        else:
            with Path(manifest).open("rb") as stream:
                data = stream.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        os_error("reading the manifest", exc)
    return decode(data, source)


def _placement_lines(chosen) -> list[str]:
    nodes = f"{plural(chosen.max_nodes, 'node')}"
    fits = (
        f"{plural(chosen.others, 'other pool')} also fit{'s' if chosen.others == 1 else ''}"
        if chosen.others
        else "the only pool that fits"
    )
    # A memory scheduler's slice is what the pod asks for, not the pool's unit (one GiB).
    amount = next(iter(chosen.limits.values()), 0)  # none on a DRA pool: its pods claim devices
    gets = f"; this pod gets {amount} GiB ({chosen.slice_memory_gb} GB)" if chosen.slice_unit == "GiB" else ""
    return [
        f"Placed on cluster {chosen.cluster} ({chosen.cloud}), pool {chosen.pool}.",
        f"Why: the smallest slice that fits: {chosen.why}{gets}; {chosen.capacity_at_max} such pods at its "
        f"maximum size ({nodes}); {fits}.",
        f"Tier: {chosen.tier_why}.",
    ]


def _yaml(document) -> str:
    """`document` as YAML kubectl reads as meant (provisioner.kubeyaml); a CEL expression on one line."""
    from provisioner.render import to_yaml

    return to_yaml(document, width=4096) + "\n"
