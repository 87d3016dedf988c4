"""The steps plan, apply, destroy and sync take, in order: compile, observe, diff, the staleness
check, ask, carry out, record in the catalog. The CLI parses, calls these and prints; what a person
sees and answers along the way goes through an ApplyView, so no step here prints or prompts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from provisioner.clusters import KubernetesVersion
from provisioner.compile import CompiledFleet, compile_file
from provisioner.errors import CloudError, StalePlan
from provisioner.kube.contexts import KubeAccess
from provisioner.observe import Drivers, Observation, kubernetes_versions, observe, observe_settled
from provisioner.plan import Plan, diff
from provisioner.planfile import SavedPlan
from provisioner.rollout import RolloutSettings
from provisioner.source import read_text
from provisioner.spread import fork_helpers

if TYPE_CHECKING:  # the catalog (SQLAlchemy) is imported only where a catalog is used
    from provisioner.apply import ApplyResult, Reporter
    from provisioner.catalog.store import Store
    from provisioner.catalog.sync import SyncReport
    from provisioner.kube.configmap import ConfigMapPlan


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
    dra = [] if destroy else [c.target for c in compiled.clusters if c.dra_pools]
    reads_kube = kube is not None and not destroy

    def observed() -> list[Observation]:
        return observe_settled(clusters, drivers, on_wait=on_wait) if settle else observe(clusters, drivers)

    # What plan reads besides the pools is read while they are listed, so a cluster costs its
    # longest chain of requests (EKS: list, then describe), not the sum of them: DRA pools need
    # a cluster at 1.34 or later (its version), and the device-plugin ConfigMaps are compared.
    versions: dict[str, KubernetesVersion | CloudError] = {}
    config_maps: dict[str, ConfigMapPlan | None] = {}
    if dra or reads_kube:
        fork_helpers(len(clusters))  # before the threads beside the listings start
        drivers.prepare(clusters)  # before two threads would make a driver at once
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="plan-beside") as beside:
            reading = beside.submit(kubernetes_versions, dra, drivers) if dra else None
            comparing = beside.submit(read_config_maps, compiled, kube) if reads_kube else None
            observations = observed()
            versions = reading.result() if reading else {}
            config_maps = comparing.result() if comparing else {}
    else:
        observations = observed()
    plan = diff(compiled.clusters, observations, destroy, versions)
    if not reads_kube:
        return plan
    planned = tuple(  # a cluster whose pools could not be listed has nothing planned, its ConfigMap too
        c if c.error is not None else dataclasses.replace(c, configmap=config_maps.get(c.target.name))
        for c in plan.clusters
    )
    return dataclasses.replace(plan, clusters=planned)


def read_config_maps(compiled: CompiledFleet, kube: KubeAccess) -> dict[str, ConfigMapPlan | None]:
    """Each cluster's device-plugin ConfigMap compared with the one it needs, all clusters at once."""
    from provisioner.kube.configmap import observe_config_map
    from provisioner.kube.contexts import each_cluster

    # Read beside the listings, which the helpers are for: these reads in a helper did not pay
    # (bench/README.md, fleet scale), and whichever batch claimed the helpers first took them all.
    configs = each_cluster(functools.partial(observe_config_map, kube), compiled.clusters, helpers=False)
    return dict(zip([c.name for c in compiled.clusters], configs, strict=True))


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
    if _compared(plan.json()["changes"]) != _compared(saved.changes):
        raise StalePlan("the saved plan is stale: planning again gives other changes; run plan again")
    return compiled, plan


def _compared(changes: list[dict]) -> list[dict]:
    """A plan's changes less what moves without the plan changing: the node count `keeps` says."""
    return [{k: v for k, v in change.items() if k != "keeps"} for change in changes]


class ApplyView(Protocol):
    """What a person sees and answers while apply or destroy runs (the CLI prints it)."""

    def waiting(self, running: list[str]) -> None: ...  # operations still running before planning
    def show_plan(self, plan: Plan) -> None: ...
    def show_errors(self, errors: list[str]) -> None: ...
    def approve(self, destroy: bool) -> bool: ...  # False: nothing is changed
    def progress(self) -> AbstractContextManager[Reporter]: ...
    def applied(self, result: ApplyResult) -> None: ...
    def recorded(self, report: SyncReport) -> None: ...


@dataclass(frozen=True)
class ApplySettings:
    """What apply and destroy share once the plan is made."""

    sandbox: Path | None
    lock_timeout: float
    catalog_url: str | None  # where given, the clusters apply touched are synced into it
    outage_timeout: float = 180.0
    lock_url: str | None = None  # PostgreSQL for locks shared across machines
    kube: KubeAccess | None = None  # None: the device-plugin ConfigMaps are left alone (--no-kube)
    rollout: RolloutSettings = dataclasses.field(default_factory=RolloutSettings)  # drains, node by node


def open_catalog(sandbox: Path | None, catalog_url: str | None, *, create: bool = True) -> Store:
    """The catalog at `catalog_url` (else the default one), migrated to the newest schema. Without
    `create`, for commands that only read it, a SQLite catalog that does not exist yet is an error
    saying how to make one, not a new empty file (nor its directories)."""
    from provisioner.catalog.database import default_url
    from provisioner.catalog.store import Store
    from provisioner.catalog.url import CatalogError, sqlite_path

    url = catalog_url or default_url(sandbox)
    path = sqlite_path(url)
    if not create and path is not None and not path.exists():
        raise CatalogError(url, "there is no catalog here yet", "`provisioner sync FLEET` makes one")
    store = Store(url)
    store.migrate()
    return store


def plan_and_carry_out(
    settings: ApplySettings,
    fleet: str,
    drivers: Drivers,
    view: ApplyView,
    *,
    destroy: bool,
    auto_approve: bool,
) -> bool:
    """Plan from where running operations end, show it, ask, carry it out. True: all went well."""
    compiled, _ = read_fleet(fleet)
    made = make_plan(
        compiled, drivers, destroy=destroy, settle=True, on_wait=view.waiting, kube=settings.kube
    )
    view.show_plan(made)
    view.show_errors(made.errors)
    if not made.has_changes:
        return not made.errors
    if not auto_approve and not view.approve(destroy):
        return False
    carried = carry_out(settings, compiled, made, drivers, view)
    return carried and not made.errors


def carry_out(
    settings: ApplySettings, compiled: CompiledFleet, made: Plan, drivers: Drivers, view: ApplyView
) -> bool:
    """Apply the plan, then record the clusters it touched in the catalog, where one is given."""
    from provisioner.apply import Applier
    from provisioner.locks import cluster_locks

    # Opened (and migrated) before any cloud is changed: a catalog that cannot be used refuses the apply.
    store = open_catalog(settings.sandbox, settings.catalog_url) if settings.catalog_url else None
    if not made.has_changes:
        view.show_plan(made)
        return True
    with view.progress() as reporter:
        locks = cluster_locks(settings.sandbox, settings.catalog_url, settings.lock_url)
        applier = Applier(
            drivers,
            locks,
            settings.lock_timeout,
            reporter=reporter,
            outage_window=settings.outage_timeout,
            kube=settings.kube,
            compiled={c.name: c for c in compiled.clusters},
            rollout=settings.rollout,
        )
        result = applier.run(made)
    view.applied(result)
    if store is not None:
        recorded = record_applied(compiled, result, drivers, store)
        view.recorded(recorded)
        if recorded.failed:
            return False
    return result.ok


def record_applied(
    compiled: CompiledFleet, result: ApplyResult, drivers: Drivers, store: Store
) -> SyncReport:
    """Sync the clusters an apply touched into the catalog, so it never waits for the nightly run."""
    from provisioner.catalog.sync import sync

    touched = {o.cluster for o in result.outcomes}
    adopted: dict[str, set[str]] = {}
    for outcome in result.done:
        if outcome.action.name == "adopt":
            adopted.setdefault(outcome.cluster, set()).add(outcome.pool)
    return sync([c for c in compiled.clusters if c.name in touched], drivers, store, adopted=adopted)
