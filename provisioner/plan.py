"""Desired vs observed -> Plan: per cluster, which pools to create, update in place, replace or delete.

Pools the tool does not own never appear, except as a conflict when the fleet names one, or as
`adopt` when the fleet's entry for it says `adopt: true`. Which fields a cloud changes in place is
data (`inPlace` in hardware/clouds.yaml).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provisioner import hardware
from provisioner.actions import ACTIONS, ADOPT, CREATE, DELETE, REPLACE, UPDATE, Action
from provisioner.autoscaler import autoscaler_note
from provisioner.clusters import KubernetesVersion, Target
from provisioner.compile import CompiledCluster, desired_state
from provisioner.errors import CloudError
from provisioner.observe import Observation
from provisioner.pooljson import state_json, value_json
from provisioner.pools import POOL_FIELDS, PoolState

if TYPE_CHECKING:
    from provisioner.kube.configmap import ConfigMapPlan


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: Any
    after: Any
    forces_replacement: bool = False


@dataclass(frozen=True)
class Change:
    cluster: str
    pool: str
    action: Action
    fields: tuple[FieldChange, ...] = ()
    desired: PoolState | None = None  # None for delete
    reason: str = ""  # why a replace: the fields that force it, or a failed pool
    then: Action | None = None  # after adopt: the update or replace the fleet entry asks for

    @property
    def steps(self) -> tuple[str, ...]:
        """The driver calls that carry the change out, in order (an adoption's follow-up after it)."""
        return self.action.steps + (self.then.steps if self.then is not None else ())

    @property
    def run_order(self) -> int:
        return (self.then or self.action).run_order

    def json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "pool": self.pool,
            "action": self.action.name,
            **({"then": self.then.name} if self.then is not None else {}),
            "fields": [
                {
                    "field": f.field,
                    "before": f.before,
                    "after": f.after,
                    "forces_replacement": f.forces_replacement,
                }
                for f in self.fields
            ],
            **({"reason": self.reason} if self.reason else {}),
        }


@dataclass(frozen=True)
class Conflict:
    pool: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Note:
    """What to know of a pool the plan changes, that no field says (autoscaler_note)."""

    pool: str
    message: str


@dataclass(frozen=True)
class ClusterPlan:
    target: Target
    changes: tuple[Change, ...] = ()
    fingerprint: str = ""  # of the observed pools, so apply can tell whether the cluster changed since
    in_progress: tuple[str, ...] = ()  # pools with an operation still running: apply waits for them
    conflicts: tuple[Conflict, ...] = ()  # fleet pools that exist but are not the tool's: never touched
    error: str | None = None  # the cluster could not be observed
    configmap: ConfigMapPlan | None = None  # its device-plugin ConfigMap, where planned with --kube
    notes: tuple[Note, ...] = ()  # what to know of the changed pools


@dataclass(frozen=True)
class Plan:
    clusters: tuple[ClusterPlan, ...]
    destroy: bool = False

    @property
    def changes(self) -> list[Change]:
        return [change for cluster in self.clusters for change in cluster.changes]

    @property
    def config_maps(self) -> list[ConfigMapPlan]:
        """The device-plugin ConfigMaps apply would write, or could not: what plan shows of them."""
        return [c.configmap for c in self.clusters if c.configmap is not None and c.configmap.worth_showing]

    @property
    def has_changes(self) -> bool:
        """Pool changes, or a ConfigMap to write."""
        return bool(self.changes) or any(c.pending for c in self.config_maps)

    @property
    def summary(self) -> dict[str, int]:
        # An adoption that is then updated or replaced counts as both, as Terraform counts an import.
        counts = Counter(
            action for change in self.changes for action in (change.action, change.then) if action is not None
        )
        return {action.name: counts.get(action, 0) for action in ACTIONS}

    @property
    def errors(self) -> list[str]:
        return self.json()["errors"]

    def view(self) -> dict[str, Any]:
        """The plan as plain data, cluster by cluster: `plan --json` and the text plan are both
        made from it (as Terraform's views are), so they cannot tell two stories."""
        return {
            "clusters": [
                {
                    "cluster": c.target.name,
                    "cloud": c.target.cloud,
                    "error": c.error,
                    "in_progress": list(c.in_progress),
                    "conflicts": [str(conflict) for conflict in c.conflicts],
                    "changes": [change.json() for change in c.changes],
                    "notes": [{"pool": note.pool, "note": note.message} for note in c.notes],
                }
                for c in self.clusters
            ],
            "summary": self.summary,
        }

    def json(self) -> dict[str, Any]:
        view = self.view()
        clusters = view["clusters"]
        return {
            "changes": [change for c in clusters for change in c["changes"]],
            "summary": view["summary"],
            "in_progress": [f"{c['cluster']}/{pool}" for c in clusters for pool in c["in_progress"]],
            "errors": [f"{c['cluster']}: {c['error']}" for c in clusters if c["error"]]
            + [f"{c['cluster']}: {conflict}" for c in clusters for conflict in c["conflicts"]],
            "kube": [config_map.json() for config_map in self.config_maps],
            "notes": [f"{c['cluster']}/{n['pool']}: {n['note']}" for c in clusters for n in c["notes"]],
        }


def fingerprint(pools: Sequence[PoolState]) -> str:
    """A digest of a cluster's pools as observed: equal digests, same pools (status aside)."""
    rows = sorted(json.dumps(state_json(p), sort_keys=True) for p in pools)
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


def diff_cluster(
    compiled: CompiledCluster,
    observation: Observation,
    destroy: bool = False,
    version: KubernetesVersion | CloudError | None = None,
) -> ClusterPlan:
    """The changes that bring the observed cluster to the compiled one (to no owned pools, if
    destroy); `version` the cluster's Kubernetes version (or why it could not be read), where
    its DRA pools need one."""
    if observation.error is not None:
        return ClusterPlan(compiled.target, error=str(observation.error))
    changes, conflicts = cluster_changes(compiled, observation, destroy)
    if not destroy:
        changes, refused = _withhold_dra(compiled, changes, version)
        conflicts += refused
    return ClusterPlan(
        compiled.target,
        changes,
        fingerprint(observation.pools),
        in_progress=tuple(p.name for p in observation.pools if p.status == "changing"),
        conflicts=conflicts,
        notes=tuple(
            Note(change.pool, note)
            for change in changes
            if change.desired is not None
            and (note := autoscaler_note(compiled.cloud, change.desired.autoscaler_hints))
        ),
    )


def cluster_changes(
    compiled: CompiledCluster, observation: Observation, destroy: bool = False
) -> tuple[tuple[Change, ...], tuple[Conflict, ...]]:
    """A listed cluster's changes, in the order apply runs them, and its fleet pools that are not
    the tool's (what sync records as drift, without the plan's fingerprint)."""
    target = compiled.target
    desired = {} if destroy else {p.pool.name: desired_state(p) for p in compiled.pools}
    compiled_pools = {p.pool.name: p for p in compiled.pools}
    observed = {p.name: p for p in observation.pools}
    in_place = compiled.cloud.in_place
    changes: list[Change] = []
    conflicts: list[Conflict] = []
    for name, want in desired.items():
        have = observed.get(name)
        if have is None:
            changes.append(Change(target.name, name, CREATE, _all_fields(want), want))
        elif not have.owned and compiled_pools[name].pool.adopt:
            changes.append(_adoption(target.name, want, have, in_place))
        elif not have.owned:
            conflicts.append(
                Conflict(
                    name,
                    f"pool {name} exists but was not created by provisioner; it is left alone "
                    "(rename the pool in the fleet, remove the existing one yourself, or mark the "
                    "fleet entry adopt: true to bring it under management; `provisioner import` "
                    "writes that entry)",
                )
            )
        else:
            change = _compare(target.name, want, have, in_place)
            if change is not None:
                changes.append(change)
    for name, have in observed.items():
        if have.owned and name not in desired:
            changes.append(Change(target.name, name, DELETE, _all_fields(have, removed=True)))
    changes.sort(key=lambda c: (c.run_order, c.pool))
    return tuple(changes), tuple(conflicts)


def diff(
    compiled: Sequence[CompiledCluster],
    observations: Sequence[Observation],
    destroy: bool = False,
    versions: Mapping[str, KubernetesVersion | CloudError] | None = None,
) -> Plan:
    by_name = {o.target.name: o for o in observations}
    found = versions or {}
    return Plan(
        tuple(diff_cluster(c, by_name[c.name], destroy, found.get(c.name)) for c in compiled),
        destroy=destroy,
    )


def _withhold_dra(
    compiled: CompiledCluster, changes: tuple[Change, ...], version: KubernetesVersion | CloudError | None
) -> tuple[tuple[Change, ...], tuple[Conflict, ...]]:
    """`changes` less those that would make or keep a DRA pool on a cluster older than DRA's v1
    API (or whose version could not be read), each refused as a conflict saying why."""
    dra = {p.pool.name for p in compiled.dra_pools}
    if not dra or version is None:
        return changes, ()
    least = hardware.load().dra_driver.min_kubernetes
    if isinstance(version, KubernetesVersion) and version.at_least(least):
        return changes, ()
    needed = ".".join(map(str, least))
    if isinstance(version, KubernetesVersion):
        why = (
            f"runs Kubernetes {version.text or version} ({compiled.cloud.title} API); allocation: dra "
            f"needs {needed} or later (resource.k8s.io/v1, GA in {needed}: KEP-4381): upgrade the "
            "cluster, or use allocation: device-plugin"
        )
    else:
        why = f"its Kubernetes version could not be read ({version}); allocation: dra needs {needed} or later"
    withheld = {c.pool for c in changes if c.pool in dra and c.action is not DELETE}
    conflicts = tuple(
        Conflict(pool, f"pool {pool} not planned: the cluster {why}") for pool in sorted(withheld)
    )
    return tuple(c for c in changes if c.pool not in withheld), conflicts


def _compare(cluster: str, want: PoolState, have: PoolState, in_place: frozenset[str]) -> Change | None:
    if have.status == "failed":
        return Change(
            cluster, want.name, REPLACE, _all_fields(want), want, reason="its last operation failed"
        )
    names = want.differences(have)
    if not names:
        return None
    fields = tuple(
        FieldChange(
            name,
            value_json(name, getattr(have, name)),
            value_json(name, getattr(want, name)),
            name not in in_place,
        )
        for name in names
    )
    forcing = [f.field for f in fields if f.forces_replacement]
    if forcing:
        return Change(
            cluster, want.name, REPLACE, fields, want, reason=f"{', '.join(forcing)} cannot change in place"
        )
    return Change(cluster, want.name, UPDATE, fields, want)


def _adoption(cluster: str, want: PoolState, have: PoolState, in_place: frozenset[str]) -> Change:
    """Adopt `have`; where the fleet entry differs from it, the update or replacement that follows,
    with its fields, so the user sees both before saying yes."""
    follow = _compare(cluster, want, have, in_place)
    if follow is None:
        return Change(cluster, want.name, ADOPT, (), want)
    return Change(cluster, want.name, ADOPT, follow.fields, want, follow.reason, then=follow.action)


def _all_fields(state: PoolState, removed: bool = False) -> tuple[FieldChange, ...]:
    values = [(name, value_json(name, getattr(state, name))) for name in POOL_FIELDS]
    return tuple(
        FieldChange(name, value if removed else None, None if removed else value)
        for name, value in values
        if value not in (None, "", [], {})  # unset, or not the pool's to have (an edge pool's instance type)
    )
