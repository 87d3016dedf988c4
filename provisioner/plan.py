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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from provisioner import hardware
from provisioner.actions import ACTIONS, ADOPT, CREATE, DELETE, REPLACE, UPDATE, Action
from provisioner.autoscaler import autoscaler_note
from provisioner.clusters import KubernetesVersion, Target
from provisioner.compile import CompiledCluster, desired_state
from provisioner.errors import CloudError
from provisioner.generations import Generations, group, names_in_use, next_generation
from provisioner.hardware import CloudProfile
from provisioner.nvidia import DEVICE_PLUGIN_LABEL, MIG_CONFIG_LABEL
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


ReplaceOrder = Literal["create-first", "delete-first"]
# The node labels a live node's GPU stack acts on at once (mig-parted repartitions, the device
# plugin restarts with another config): changed on a pool with nodes, they go node by node.
NODE_RECONFIGURING_LABELS = (MIG_CONFIG_LABEL, DEVICE_PLUGIN_LABEL)


@dataclass(frozen=True)
class Change:
    cluster: str
    pool: str  # the fleet's name
    action: Action
    fields: tuple[FieldChange, ...] = ()
    # None for delete. Its name is the cloud pool the change makes or updates: a new generation's
    # name for a create-first replacement (provisioner/generations.py).
    desired: PoolState | None = None
    reason: str = ""  # why a replace: the fields that force it, or a failed pool
    then: Action | None = None  # after adopt: the update or replace the fleet entry asks for
    order: ReplaceOrder | None = None  # a replacement's
    # The cloud pools the change removes: deleted before the create (delete-first), drained and
    # deleted after it (create-first), or deleted (delete).
    retires: tuple[str, ...] = ()
    resumes: bool = False  # the new generation exists already (an interrupted replacement)
    # A failed newest generation, deleted before it is made again under its name (never a third pool).
    discards: tuple[str, ...] = ()
    node_by_node: tuple[str, ...] = ()  # an update's NODE_RECONFIGURING_LABELS that change on live nodes
    keeps: str = ""  # the capacity the pool keeps while the change runs, in words

    @property
    def steps(self) -> tuple[str, ...]:
        """The operations that carry the change out, in order (an adoption's follow-up after it)."""
        follow = self.then or self.action
        own = self.action.steps if self.then is not None else ()
        if follow is REPLACE and self.order == "create-first":
            made = (("update",) if self.fields else ()) if self.resumes else ("create",)
            return own + (("discard",) if self.discards else ()) + made + ("ready", "drain", "retire")
        if follow is UPDATE and self.node_by_node:
            return (*own, "reconfigure", "update")
        return self.action.steps + (self.then.steps if self.then is not None else ())

    @property
    def run_order(self) -> int:
        return (self.then or self.action).run_order

    @property
    def cloud_name(self) -> str:
        """The cloud pool the change makes or updates (the fleet's name but for later generations)."""
        return self.desired.name if self.desired is not None else self.pool

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
            **({"order": self.order} if self.order else {}),
            **({"cloud_name": self.cloud_name} if self.cloud_name != self.pool else {}),
            **({"retires": list(self.retires)} if self.retires else {}),
            **({"resumes": True} if self.resumes else {}),
            **({"discards": list(self.discards)} if self.discards else {}),
            **(
                {"rollout": "node-by-node", "node_labels": list(self.node_by_node)}
                if self.node_by_node
                else {}
            ),
            **({"keeps": self.keeps} if self.keeps else {}),
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
    the tool's (what sync records as drift, without the plan's fingerprint). The cloud pools of one
    fleet pool's generations are one pool here (provisioner/generations.py)."""
    target = compiled.target
    desired = {} if destroy else {p.pool.name: desired_state(p) for p in compiled.pools}
    compiled_pools = {p.pool.name: p for p in compiled.pools}
    observed = group(observation.pools)
    taken = set(names_in_use(observation.pools, desired))  # grows with each new generation's name
    changes: list[Change] = []
    conflicts: list[Conflict] = []
    for name, want in desired.items():
        have = observed.get(name)
        order = compiled_pools[name].pool.replace
        if have is None:
            changes.append(Change(target.name, name, CREATE, _all_fields(want), want))
        elif not have.current.owned and compiled_pools[name].pool.adopt:
            changes.append(
                _adoption(target.name, want, have.current, cloud=compiled.cloud, order=order, taken=taken)
            )
        elif not have.current.owned:
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
            change = _compare(target.name, want, have, cloud=compiled.cloud, order=order, taken=taken)
            if change is not None:
                changes.append(change)
    for name, have in observed.items():
        if have.current.owned and name not in desired:
            retired = tuple(p.name for p in have.pools if p.owned)
            changes.append(
                Change(target.name, name, DELETE, _all_fields(have.current, removed=True), retires=retired)
            )
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


def _compare(
    cluster: str,
    want: PoolState,
    have: Generations,
    *,
    cloud: CloudProfile,
    order: ReplaceOrder,
    taken: set[str],
) -> Change | None:
    """What brings `have`'s newest generation to `want`, and retires its older ones: an interrupted
    create-first replacement whose new pool is as wanted is finished, never begun again."""
    current = have.current
    mine = replace(want, name=current.name, fleet_name=current.fleet_name, generation=current.generation)
    older = tuple(p.name for p in have.older)
    if current.status == "failed" and older:  # a new generation that failed: made again in its place
        return Change(
            cluster,
            want.name,
            REPLACE,
            _all_fields(want),
            replace(mine, nodes=_nodes(have.older)),
            f"the new pool {current.name} failed: it is deleted and made again",
            order="create-first",
            retires=older,
            discards=(current.name,),
            keeps=_keeps(have.older, "create-first"),
        )
    if current.status == "failed":
        failed = "its last operation failed"
        return _replacement(
            cluster,
            want,
            have,
            cloud=cloud,
            order=order,
            taken=taken,
            fields=_all_fields(want),
            reason=failed,
        )
    fields = _fields(mine, current, cloud.in_place)
    forcing = [f.field for f in fields if f.forces_replacement]
    if forcing:
        reason = f"{', '.join(forcing)} cannot change in place"
        return _replacement(
            cluster, want, have, cloud=cloud, order=order, taken=taken, fields=fields, reason=reason
        )
    if older:  # the new generation stands: drain and delete the old, after any in-place change
        return Change(
            cluster,
            want.name,
            REPLACE,
            fields,
            replace(mine, nodes=_nodes(have.older)),  # waited for as many nodes as the old still have
            reason=f"a create-first replacement is under way: {', '.join(older)} still to drain and delete",
            order="create-first",
            retires=older,
            resumes=True,
            keeps=_keeps(have.older, "create-first"),
        )
    if not fields:
        return None
    reconfigured = _reconfigured_on_nodes(mine, current)
    return Change(cluster, want.name, UPDATE, fields, mine, node_by_node=reconfigured)


def _replacement(
    cluster: str,
    want: PoolState,
    have: Generations,
    *,
    cloud: CloudProfile,
    order: ReplaceOrder,
    taken: set[str],
    fields: tuple[FieldChange, ...],
    reason: str,
) -> Change:
    """A replacement of all of `have`'s generations by one pool as `want`: create-first under the
    next generation's name, started with the nodes the pool has now; or delete-first, under the
    fleet's name again."""
    retired = tuple(p.name for p in have.pools)
    if order == "delete-first":
        return Change(
            cluster,
            want.name,
            REPLACE,
            fields,
            want,
            reason,
            order=order,
            retires=retired,
            keeps=_keeps(have.pools, order),
        )
    generation, name = next_generation(have, cloud, taken)
    taken.add(name)
    made = replace(want, name=name, fleet_name=want.name, generation=generation, nodes=_nodes(have.pools))
    return Change(
        cluster,
        want.name,
        REPLACE,
        fields,
        made,
        reason,
        order=order,
        retires=retired,
        keeps=_keeps(have.pools, order),
    )


def _nodes(pools: Sequence[PoolState]) -> int | None:
    """The nodes `pools` have now, where their cloud says (GKE does not: apply counts them then)."""
    return sum(p.nodes or 0 for p in pools) or None


def _keeps(pools: Sequence[PoolState], order: ReplaceOrder) -> str:
    """What the pool keeps while it is replaced, in words the plan shows before the user says yes."""
    nodes = sum(p.nodes or 0 for p in pools)
    counted = all(p.nodes is not None for p in pools)
    now = f"its {nodes} node{'s' if nodes != 1 else ''}" if counted else "its nodes"
    if order == "delete-first":
        return f"none: {now} go first, and it has no nodes until the new pool's are ready"
    return f"{now}, until the new pool's nodes are ready"


def _reconfigured_on_nodes(want: PoolState, have: PoolState) -> tuple[str, ...]:
    """The node-reconfiguring labels an update changes on a pool that has (or may have) nodes."""
    if have.nodes == 0:
        return ()
    # A label the fleet drops is the cloud's to remove: each node's stack falls back to its default.
    wanted, had = want.label_map, have.label_map
    return tuple(key for key in NODE_RECONFIGURING_LABELS if key in wanted and wanted[key] != had.get(key))


def _fields(want: PoolState, have: PoolState, in_place: frozenset[str]) -> tuple[FieldChange, ...]:
    return tuple(
        FieldChange(
            name,
            value_json(name, getattr(have, name)),
            value_json(name, getattr(want, name)),
            name not in in_place,
        )
        for name in want.differences(have)
    )


def _adoption(
    cluster: str,
    want: PoolState,
    have: PoolState,
    *,
    cloud: CloudProfile,
    order: ReplaceOrder,
    taken: frozenset[str],
) -> Change:
    """Adopt `have`; where the fleet entry differs from it, the update or replacement that follows,
    with its fields, so the user sees both before saying yes."""
    follow = _compare(cluster, want, Generations((have,)), cloud=cloud, order=order, taken=taken)
    if follow is None:
        return Change(cluster, want.name, ADOPT, (), want)
    return Change(
        cluster,
        want.name,
        ADOPT,
        follow.fields,
        follow.desired,
        follow.reason,
        then=follow.action,
        order=follow.order,
        retires=follow.retires,
        node_by_node=follow.node_by_node,
        keeps=follow.keeps,
    )


def _all_fields(state: PoolState, removed: bool = False) -> tuple[FieldChange, ...]:
    values = [(name, value_json(name, getattr(state, name))) for name in POOL_FIELDS]
    return tuple(
        FieldChange(name, value if removed else None, None if removed else value)
        for name, value in values
        if value not in (None, "", [], {})  # unset, or not the pool's to have (an edge pool's instance type)
    )
