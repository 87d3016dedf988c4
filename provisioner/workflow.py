"""The steps plan, apply and destroy share: compile, observe, diff, and the staleness check."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from provisioner.compile import CompiledFleet, compile_file
from provisioner.errors import StalePlan
from provisioner.kube.contexts import KubeAccess
from provisioner.observe import Drivers, observe, observe_settled
from provisioner.plan import Plan, diff
from provisioner.planfile import SavedPlan
from provisioner.source import read_text

MAX_PARALLEL_CLUSTERS = 32  # ConfigMaps read at once: each waits on the network


def read_fleet(path: str) -> tuple[CompiledFleet, str]:
    """The compiled fleet and the text it came from (which a saved plan keeps)."""
    text = read_text(path)  # once, bounded: a pipe or /dev/zero reads like a file, or fails cleanly
    return compile_file(path, text), text


def make_plan(
    compiled: CompiledFleet,
    drivers: Drivers,
    destroy: bool = False,
    settle: bool = False,
    on_wait: Callable[[list[str]], None] | None = None,
    *,
    kube: KubeAccess | None = None,
) -> Plan:
    """Observe every cluster at once and diff. With `settle`, first wait for operations still
    running (apply plans from where they end, so a killed run's operation is never repeated).
    With `kube`, also compare each cluster's device-plugin ConfigMap (never on destroy: the
    tool does not remove what running nodes may still read)."""
    clusters = [c.target for c in compiled.clusters]
    observations = (
        observe_settled(clusters, drivers, on_wait=on_wait) if settle else observe(clusters, drivers)
    )
    plan = diff(compiled.clusters, observations, destroy)
    if kube is None or destroy:
        return plan
    return with_config_maps(plan, compiled, kube)


def with_config_maps(plan: Plan, compiled: CompiledFleet, kube: KubeAccess) -> Plan:
    """`plan` with each observed cluster's device-plugin ConfigMap compared, all clusters at once."""
    from provisioner.kube.configmap import observe_config_map

    unobserved = {c.target.name for c in plan.clusters if c.error is not None}  # nothing planned there
    clusters = [c for c in compiled.clusters if c.name not in unobserved]
    if not clusters:
        return plan
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_CLUSTERS, len(clusters))) as pool:
        found = dict(
            zip(
                [c.name for c in clusters],
                pool.map(lambda c: observe_config_map(kube, c), clusters),
                strict=True,
            )
        )
    planned = tuple(dataclasses.replace(c, configmap=found.get(c.target.name)) for c in plan.clusters)
    return dataclasses.replace(plan, clusters=planned)


def replan_saved(
    saved: SavedPlan, drivers: Drivers, kube: KubeAccess | None = None
) -> tuple[CompiledFleet, Plan]:
    """The saved plan made again from the clusters as they are now; StalePlan if any differs."""
    compiled = compile_file(saved.fleet_path, saved.fleet_text)
    plan = make_plan(compiled, drivers, destroy=saved.destroy, kube=kube)
    changed = sorted(
        c.target.name
        for c in plan.clusters
        if c.error is None and saved.fingerprints.get(c.target.name) != c.fingerprint
    )
    if changed:
        raise StalePlan(
            f"the saved plan is stale: {', '.join(changed)} changed since it was made; "
            "run plan again and apply the new plan"
        )
    if plan.json()["changes"] != saved.changes:
        raise StalePlan("the saved plan is stale: planning again gives other changes; run plan again")
    return compiled, plan
