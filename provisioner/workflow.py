"""The steps plan, apply and destroy share: compile, observe, diff, and the staleness check."""

from __future__ import annotations

from collections.abc import Callable

from provisioner.compile import CompiledFleet, compile_file
from provisioner.errors import StalePlan
from provisioner.observe import Drivers, observe, observe_settled
from provisioner.plan import Plan, diff
from provisioner.planfile import SavedPlan
from provisioner.source import read_text


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
) -> Plan:
    """Observe every cluster at once and diff. With `settle`, first wait for operations still
    running (apply plans from where they end, so a killed run's operation is never repeated)."""
    clusters = [c.target for c in compiled.clusters]
    observations = (
        observe_settled(clusters, drivers, on_wait=on_wait) if settle else observe(clusters, drivers)
    )
    return diff(compiled.clusters, observations, destroy)


def replan_saved(saved: SavedPlan, drivers: Drivers) -> tuple[CompiledFleet, Plan]:
    """The saved plan made again from the clusters as they are now; StalePlan if any differs."""
    compiled = compile_file(saved.fleet_path, saved.fleet_text)
    plan = make_plan(compiled, drivers, destroy=saved.destroy)
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
