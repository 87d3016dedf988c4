"""`verify` and `inspect`, the commands that look inside each cluster through its Kubernetes API,
and the options with which plan and apply reach the clusters (`--kubeconfig`, `--no-kube`).

Nothing here imports the kubernetes client: provisioner/kube does, when a command runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.text import Text

from provisioner.commands.common import out, sandbox_option

if TYPE_CHECKING:
    from provisioner.kube.contexts import Kube, KubeAccess
    from provisioner.kube.inspect import NodeUse
    from provisioner.kube.verify import PoolVerdict
    from provisioner.observe import Drivers

_STATUS_STYLE = {"ok": "green", "no nodes yet": "dim", "degraded": "red", "unreachable": "red"}


def kubeconfig_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The kubeconfig whose contexts reach the clusters [default: $KUBECONFIG, else "
        "~/.kube/config; with --sandbox DIR, DIR/kubeconfig].",
    )(command)


def kube_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """plan and apply: --kubeconfig, and --no-kube for clusters whose ConfigMaps GitOps applies."""
    command = click.option(
        "--no-kube",
        is_flag=True,
        help="Do not read or write the clusters' device-plugin ConfigMaps (you apply what "
        "`render` prints yourself, e.g. through GitOps).",
    )(command)
    return kubeconfig_option(command)


def kube_access(sandbox: Path | None, kubeconfig: Path | None, no_kube: bool = False) -> KubeAccess | None:
    """How plan and apply reach the clusters' Kubernetes APIs; None with --no-kube."""
    from provisioner.kube.contexts import KubeAccess

    return None if no_kube else KubeAccess(kubeconfig, sandbox)


@click.command("verify")
@click.argument("fleet")
@click.option("--cluster", "cluster_name", metavar="NAME", help="Only this cluster.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@kubeconfig_option
@sandbox_option
@click.pass_obj
def verify_command(
    sandbox: Path | None, fleet: str, cluster_name: str | None, as_json: bool, kubeconfig: Path | None
) -> None:
    """Check inside each cluster that every pool's nodes really give what the fleet promises.

    Per pool: its nodes carry the pool's labels and taints, MIG has finished, the device-plugin
    ConfigMap holds the key each label names with the right replicas, and each node advertises
    the slices the compiler promises. On DRA pools: the DRA driver's ResourceSlices give each node
    the promised devices (count, MIG profile, model), and no device plugin advertises its GPUs too.
    Exit 0 when nothing is degraded or unreachable, else 1.
    """
    from provisioner.compile import compile_file
    from provisioner.kube.contexts import KubeAccess
    from provisioner.kube.verify import verify_fleet
    from provisioner.observe import Drivers

    compiled = compile_file(fleet)
    clusters = [c for c in compiled.clusters if cluster_name in (None, c.name)]
    if not clusters:
        names = ", ".join(c.name for c in compiled.clusters)
        raise click.ClickException(f"no cluster {cluster_name!r} in {fleet}; clusters: {names}")
    verdicts = verify_fleet(clusters, KubeAccess(kubeconfig, sandbox), Drivers(sandbox))
    if as_json:
        click.echo(json.dumps({"pools": [v.json() for v in verdicts]}, indent=2))
    else:
        _print_verdicts(verdicts)
    sys.exit(1 if any(v.status in ("degraded", "unreachable") for v in verdicts) else 0)


def _print_verdicts(verdicts: Sequence[PoolVerdict]) -> None:
    table = Table(title="Pools in their clusters", title_justify="left")
    for column in ("cluster", "pool", "status", "nodes"):
        table.add_column(column)
    for v in verdicts:
        status = f"[{_STATUS_STYLE[v.status]}]{v.status}[/]"
        table.add_row(Text(v.cluster), Text(v.pool), status, str(v.nodes))  # Text: never markup
    out.print(table)
    for v in verdicts:
        for problem in v.problems:
            where = f"{v.cluster}/{v.pool}" + (f" {problem.node}" if problem.node else "")
            out.print(Text.assemble(("✗", "red"), f" {where}: {problem.message}"))
    bad = sum(v.status in ("degraded", "unreachable") for v in verdicts)
    if bad:
        out.print(f"[red]{bad} of {len(verdicts)} pools degraded or unreachable.[/]")
    else:
        out.print(f"[green]All {len(verdicts)} pools give what the fleet promises (or have no nodes yet).[/]")


@click.command("inspect")
@click.argument("fleet", required=False)
@click.option(
    "--cluster",
    "cluster_name",
    metavar="NAME",
    help="Only this cluster (without FLEET: this kubeconfig context).",
)
@click.option("-d", "--details", is_flag=True, help="Also the pods holding each node's GPU resources.")
@click.option("--json", "as_json", is_flag=True, help="Print the allocation as JSON.")
@kubeconfig_option
@sandbox_option
@click.pass_obj
def inspect_command(
    sandbox: Path | None,
    *,
    fleet: str | None,
    cluster_name: str | None,
    details: bool,
    as_json: bool,
    kubeconfig: Path | None,
) -> None:
    """Allocated / total GPU resources per node, pool and cluster, like `kubectl inspect cgpu`.

    Allocation is the sum of the requests of the pods bound to a node and not finished. On DRA
    pools, the DRA driver's devices per DeviceClass (gpu.nvidia.com, mig.nvidia.com), allocated
    where a ResourceClaim holds them, held by the pods the claims are reserved for. Without FLEET,
    every context of the kubeconfig is a cluster.
    """
    from provisioner.kube.contexts import KubeAccess, each_cluster
    from provisioner.kube.inspect import totals

    access = KubeAccess(kubeconfig, sandbox)
    targets = _inspect_targets(access, fleet, cluster_name, sandbox)
    results = each_cluster(_inspect_one, targets)
    uses: list[NodeUse] = [u for found, _ in results for u in found]
    errors = [e for _, e in results if e is not None]
    if as_json:
        document = {
            "nodes": [u.json(details) for u in uses],
            "pools": totals(uses, ("cluster", "pool")),
            "clusters": totals(uses, ("cluster",)),
            "errors": [{"cluster": name, "message": message} for name, message in errors],
        }
        click.echo(json.dumps(document, indent=2))
    else:
        _print_uses(uses, details, totals)
    for _name, message in errors:
        click.echo(f"error: {message}", err=True)
    if errors:
        sys.exit(1)


@dataclass(frozen=True)
class _Target:
    """A cluster to inspect: how to reach it and how to name its nodes' pools; data only, so a
    helper process can inspect it too (provisioner.spread)."""

    name: str
    access: KubeAccess
    label_keys: tuple[str, ...]
    cluster: Any = None  # the fleet's cluster; None: the kubeconfig context `name`
    # Where nodes carry the cloud's ID of their pool (ACK): the drivers whose listing names them.
    drivers: Drivers | None = None
    dra: bool = True  # read its ResourceSlices and ResourceClaims (a fleet's cluster: where it has DRA pools)

    def connect(self) -> Kube:
        if self.cluster is None:
            return self.access.connect(self.name, self.name)
        return self.access.for_cluster(self.cluster)

    def pool_names(self) -> dict[str, str]:
        """Pool ID -> fleet pool name, from the cloud's listing."""
        from provisioner.kube.verify import pool_ids

        assert self.drivers is not None
        return pool_ids(self.cluster, self.drivers) or {}


def _inspect_one(target: _Target) -> tuple[list[NodeUse], tuple[str, str] | None]:
    """One cluster's allocation per node, or the error that kept it from being read."""
    from provisioner.errors import CloudError, KubeUnreachable
    from provisioner.kube.contexts import at_once
    from provisioner.kube.inspect import inspect_cluster, node_uses, read_cluster

    try:
        with target.connect() as kube:
            if target.drivers is None:
                return inspect_cluster(kube, target.label_keys, dra=target.dra), None
            names, reads = at_once(target.pool_names, lambda: read_cluster(kube, target.dra))
            uses = node_uses(
                kube.name,
                reads.nodes,
                reads.pods,
                target.label_keys,
                names,
                slices=reads.slices,
                claims=reads.claims,
            )
            return uses, None
    except KubeUnreachable as error:
        return [], (target.name, str(error))
    except CloudError as error:  # the cloud's listing of pool IDs (ACK): reported for that cluster
        return [], (target.name, f"{target.name}: {error}")


def _inspect_targets(
    access: KubeAccess, fleet: str | None, cluster_name: str | None, sandbox: Path | None
) -> list[_Target]:
    """The clusters to inspect: the fleet's, else every context of the kubeconfig."""
    from provisioner import hardware
    from provisioner.kube.inspect import all_pool_label_keys
    from provisioner.kube.verify import labels_pool_ids

    if fleet is None:
        contexts = access.contexts()
        if cluster_name is not None and cluster_name not in contexts:
            raise click.ClickException(
                f"no context {cluster_name!r} in {access.config_file}; contexts: {', '.join(contexts)}"
            )
        keys = tuple(all_pool_label_keys())
        return [_Target(c, access, keys) for c in contexts if cluster_name in (None, c)]

    from provisioner.fleet import load
    from provisioner.observe import Drivers

    clusters = [c for c in load(fleet).clusters if cluster_name in (None, c.name)]
    if not clusters:
        raise click.ClickException(f"no cluster {cluster_name!r} in {fleet}")
    drivers = Drivers(sandbox)
    targets = []
    for cluster in clusters:
        label = hardware.load().clouds[cluster.cloud].pool_label
        keys = (label.key,) if label is not None else tuple(all_pool_label_keys())
        by_id = drivers if labels_pool_ids(cluster) else None
        dra = any(p.gpu.allocation == "dra" for p in cluster.pools)
        targets.append(_Target(cluster.name, access, keys, cluster, by_id, dra))
    return targets


def _print_uses(uses: Sequence[NodeUse], details: bool, totals: Callable[..., list[dict[str, Any]]]) -> None:
    if not uses:
        out.print("No node advertises a GPU resource.")
        return
    table = Table(title="GPU allocation per node", title_justify="left")
    for column in ("cluster", "pool", "node", "resource", "allocated / total"):
        table.add_column(column)
    for use in uses:
        row = (use.cluster, use.pool, use.node, use.resource, f"{use.allocated} / {use.total}")
        table.add_row(*map(Text, row))
        if details:
            for pod, amount in use.pods:
                table.add_row("", "", "", Text(f"  {pod}"), f"[dim]{amount}[/]")
    out.print(table)
    for title, by in (("Per pool", ("cluster", "pool")), ("Per cluster", ("cluster",))):
        summary = Table(title=title, title_justify="left")
        for column in (*by, "resource", "nodes", "allocated / total"):
            summary.add_column(column)
        for row in totals(uses, by):
            cells = (
                *(row[f] for f in by),
                row["resource"],
                str(row["nodes"]),
                f"{row['allocated']} / {row['total']}",
            )
            summary.add_row(*map(Text, cells))
        out.print(summary)
