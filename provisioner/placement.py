"""Fractional request -> pool -> pod-spec fragment: the last step from a catalog of pools to a pod
that lands on the right one with the right resource name, node selector and tolerations.

    from provisioner.placement import Request, place
    chosen = place(store, Request(gpu_memory="4GB"))   # a Store, or `catalog ls --json` rows
    chosen.json()   # {"cluster", "cloud", "pool", "isolation", "slice", "resources", "nodeSelector", ...}

A request is a MIG profile, an amount of GPU memory (with a minimum isolation) or whole GPUs,
optionally narrowed by GPU model, cloud, cluster and pool. The choice rule, among the live GPU
pools that satisfy it:

0. the capacity tier first (tiers.py): a pool with slices free for the pod now, then one whose
   free slices nobody knows (no allocation in the catalog, or stale), then one whose autoscaler
   can add a node for it; a pool that can do none of these is never chosen, and where every pool
   that would fit is such, the refusal names them and why;
1. within a tier, the smallest slice that fits: least memory per slice, then the weakest
   isolation that still meets the minimum (stronger isolation is kept for requests that need it);
2. then the pool with more capacity at its maximum size (pods of this request it holds);
3. then cluster and pool names in order.

A MIG request matches its profile exactly, with the isolation of a MIG instance (hardware) unless
a lower minimum lets a MIG pool shared on top (time-slicing, MPS) serve it. A memory request is
met by one slice whose memory is at least the request: a time-sliced or MPS slice's memory is its
nominal share, a MIG slice or a whole GPU its own; on a memory-scheduler pool (ACK) by the request
rounded up to whole GiB, within one GPU. Never by several shared replicas in one container: the
device plugin refuses them (failRequestsGreaterThanOne). Whole GPUs come from pools that neither
partition nor share them, at most a node's GPUs per pod.

Every per-cloud rule of the fragment is data (hardware/clouds.yaml `placement`, with sources);
resource names come from nvidia.py, the same module that decides how the pool shares its GPUs.
Nothing here imports a cloud SDK or the catalog's database layer: a `Store` is used only through
its `snapshot()`, the live pools kept while the catalog is unchanged, with this module's Index of
them built once per snapshot: a request after the first weighs one pool of each shape of slice.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable

from provisioner import hardware
from provisioner.capacity import ISOLATION_LEVELS, resource_of, sharing_text
from provisioner.claims import CLAIM, DeviceAsk, claim_notes, claim_object, pod_claim
from provisioner.errors import NoPlacement
from provisioner.nvidia import dra_device_class
from provisioner.pools import POOL_NODE_LABEL
from provisioner.request import Request
from provisioner.tiers import TIERS, Standing, standing, unknown_reason

# A slice's memory is stored rounded to 0.01 GB; a request that far above it still fits.
_ROUNDING_GB = 0.005
# The catalog is refreshed nightly: a cluster not listed for longer missed at least one sync.
STALE_AFTER = timedelta(days=2)
GIB_GB = 2**30 / 10**9
View = TypeVar("View")


class Snapshot(Protocol):
    def derived(self, build: Callable[[Sequence[dict[str, Any]]], View]) -> View: ...


@runtime_checkable
class Catalog(Protocol):
    """A Store: its live pools as a snapshot, read again only once the catalog has changed."""

    def snapshot(self) -> Snapshot: ...


@dataclass(frozen=True)
class Offer:
    """How one pool meets a request: the slice a pod gets there, how many such pods it holds, and
    whether it can take one now, after a scale-up, or not (tier None)."""

    row: Mapping[str, Any]
    memory_gb: float  # the slice's memory (nominal share where shared)
    isolation: str
    quantity: int  # of the resource the pod requests
    per_node: int  # pods of this request one node holds
    standing: Standing
    tier: str | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tier", self.standing.tier(self.quantity))

    @property
    def capacity_at_max(self) -> int:
        """Pods of this request the pool holds at its maximum size."""
        return self.per_node * _nodes(self.row)

    def order(self) -> tuple[Any, ...]:
        """The choice rule as a sort key (module docstring); a full pool (tier None) last."""
        return (
            TIERS.index(self.tier) if self.tier else len(TIERS),
            self.memory_gb,
            ISOLATION_LEVELS.index(self.isolation),
            -self.capacity_at_max,
            self.row["cluster"],
            self.row["pool"],
        )


@dataclass(frozen=True)
class Placement:
    """The chosen pool and what a pod needs to land there."""

    cluster: str
    cloud: str
    pool: str
    isolation: str
    slice_memory_gb: float
    slice_unit: str  # slice, or GiB where a scheduler shares GPU memory
    limits: dict[str, int]  # per container
    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]
    pod_fields: dict[str, Any]  # other pod-spec fields the mode needs (GKE MPS: hostIPC)
    capacity_at_max: int
    max_nodes: int
    why: str  # the slice, in words
    others: int  # other pools that can take it too (in any tier)
    warnings: list[str]
    capacity: dict[str, Any] = field(default_factory=dict)  # `place --json`'s "capacity"
    tier_why: str = ""  # the tier, and why, in words
    # On a DRA pool: what the pod claims (no limits then), and the shared claim it names, if shared.
    device: DeviceAsk | None = None
    share: str | None = None
    namespace: str | None = None  # the claim's, where `place --namespace` names it
    share_read: bool = False  # the shared claim was chosen from the cluster's claims (--live)
    # The cloud's own pool label and the values by which it named this pool (its name, its ID),
    # as an earlier place selected it: a manifest carrying it is pinned to one generation.
    cloud_pool_label: tuple[str, tuple[str, ...]] | None = None

    @property
    def claim(self) -> dict[str, Any] | None:
        """On a DRA pool, the object to apply before the pod: a ResourceClaimTemplate, or the
        shared ResourceClaim."""
        return None if self.device is None else claim_object(self.device, self.share, self.namespace)

    @property
    def pod_claims(self) -> list[dict[str, str]]:
        """The pod spec's resourceClaims (none on a device-plugin pool)."""
        return [] if self.device is None else [pod_claim(self.device, self.share)]

    @property
    def notes(self) -> list[str]:
        """On a DRA pool, what each object is for and, for a share, how pods find its claim."""
        return [] if self.device is None else claim_notes(self.device, self.share, self.share_read)

    def resources(self) -> dict[str, Any]:
        """The container's resources: the GPU limit, or on a DRA pool the claim it uses."""
        if self.device is None:
            return {"limits": dict(self.limits)}
        return {"claims": [{"name": CLAIM}]}

    def json(self) -> dict[str, Any]:
        """`place --json` (DESIGN.md): pod-spec fields by their Kubernetes names; on a DRA pool
        also the pod's resourceClaims and the claim object, with an empty limits."""
        shown = {
            "cluster": self.cluster,
            "cloud": self.cloud,
            "pool": self.pool,
            "isolation": self.isolation,
            "slice": {"memory_gb": self.slice_memory_gb, "unit": self.slice_unit},
            "resources": {"limits": dict(self.limits)},
            "nodeSelector": dict(self.node_selector),
            "tolerations": [dict(t) for t in self.tolerations],
            **self.pod_fields,
            "capacity": dict(self.capacity),
        }
        if self.device is not None:
            shown["resources"] |= self.resources()
            shown |= {
                "allocation_mode": "dra",
                "resourceClaims": self.pod_claims,
                "claim": self.claim,
                "notes": self.notes,
            }
        return shown

    def fragment(self) -> dict[str, Any]:
        """What the pod needs: `resources` goes on the container, the rest on the pod spec."""
        return {
            "resources": self.resources(),
            **({"resourceClaims": self.pod_claims} if self.device is not None else {}),
            "nodeSelector": dict(self.node_selector),
            "tolerations": [dict(t) for t in self.tolerations],
            **self.pod_fields,
        }


def place(catalog: Catalog | Iterable[Mapping[str, Any]], request: Request) -> Placement:
    """The pool `request` lands on by the choice rule, with its pod-spec fragment; NoPlacement
    (naming the closest pools and what they offer) where none fits."""
    if isinstance(catalog, Catalog):  # its index lives as long as the catalog is unchanged
        return catalog.snapshot().derived(Index).place(request)
    return weigh(catalog, request)  # rows read once: indexing them would cost more than weighing


class Index:
    """A catalog's live GPU pools, arranged once for many requests: grouped by the shape of slice
    they offer (what `_offer` reads of a pool, but for its size, names and standing), each group
    in the order the choice rule gives pools that meet a request alike within a tier. A request
    then weighs the first pool of each tier in each shape, or only the pools of the cluster or
    pool it names. Its answers are `weigh`'s."""

    def __init__(self, rows: Iterable[Mapping[str, Any]]):
        self.rows = [r for r in rows if r.get("gpu") and r.get("deleted_at") is None]
        self.by_cluster: dict[str, list[Mapping[str, Any]]] = {}
        self.by_pool: dict[str, list[Mapping[str, Any]]] = {}
        shapes: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
        for row in self.rows:
            self.by_cluster.setdefault(row["cluster"], []).append(row)
            self.by_pool.setdefault(row["pool"], []).append(row)
            if _unplaceable(row) is None:
                shapes.setdefault(tuple(row[key] for key in _SHAPE), []).append(row)
        self.shapes = [_Shape(g) for g in shapes.values()]

    def place(self, request: Request) -> Placement:
        named = self._named(request)
        if named is None:
            best, fitting = self._best_shape(request)
        else:
            offers = [o for r in named if _within(r, request) and isinstance(o := _offer(r, request), Offer)]
            taken = [o for o in offers if o.tier]
            best, fitting = min(taken, key=Offer.order, default=None), len(taken)
        if best is None:
            return weigh(self.rows, request)  # raises NoPlacement, naming the closest pools
        return _placement(best, others=fitting - 1)

    def _named(self, request: Request) -> list[Mapping[str, Any]] | None:
        """The few pools a request that names a cluster or a pool can land on; None: it names neither."""
        if request.cluster is not None:
            return self.by_cluster.get(request.cluster, [])
        if request.pool is not None:
            return self.by_pool.get(request.pool, [])
        return None

    def _best_shape(self, request: Request) -> tuple[Offer | None, int]:
        """The best offer over every shape that meets `request`, and how many pools can take it."""
        best: Offer | None = None
        fitting = 0
        for shape in self.shapes:
            if not _within(shape.rows[0], request):
                continue
            offer = _offer(shape.rows[0], request)
            if not isinstance(offer, Offer):
                continue
            units = offer.quantity
            fitting += len(shape.rows) - bisect.bisect_left(shape.stuck, units)
            if offer.per_node == 0:  # no pod fits a node: size does not order them, names do
                candidates = [shape.rows[i] for i in range(len(shape.rows))]
            else:
                candidates = [shape.rows[i] for i in shape.firsts(units)]
            taken = [o for r in candidates if isinstance(o := _offer(r, request), Offer) and o.tier]
            offer = min(taken, key=Offer.order, default=None)
            if offer is not None and (best is None or offer.order() < best.order()):
                best = offer
        return best, fitting


class _Shape:
    """Pools alike in what they offer, in the order more nodes first, then names; with what each
    has for pods (tiers.Standing), so a request finds the first pool of each tier at once."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]):
        self.rows = sorted(rows, key=lambda r: (-_nodes(r), r["cluster"], r["pool"]))
        standings = [standing(r) for r in self.rows]
        # (position, free units) of the pools known to have some free
        self.free = [(i, s.free_units) for i, s in enumerate(standings) if s.free_units]
        self.most_free = max((units for _, units in self.free), default=0)
        self.first_unknown = next((i for i, s in enumerate(standings) if s.free_units is None), None)
        self.first_growable = next(
            (i for i, s in enumerate(standings) if s.free_units is not None and s.growable), None
        )
        # Free units of the pools that cannot grow: full for a pod asking more.
        self.stuck = sorted(s.free_units for s in standings if s.free_units is not None and not s.growable)

    def firsts(self, units: int) -> list[int]:
        """The first pool of each tier for a pod asking `units` (positions)."""
        free = next((i for i, n in self.free if n >= units), None) if self.most_free >= units else None
        return [i for i in (free, self.first_unknown, self.first_growable) if i is not None]


# What `_offer` and `_within` read of a placeable pool but for its size and names: pools alike in
# these meet every request alike (Index).
_SHAPE = (
    "cloud",
    "gpu",
    "mig",
    "sharing",
    "isolation",
    "slice_unit",
    "gpus_per_node",
    "slices_per_node",
    "memory_per_slice_gb",
)


def weigh(rows: Iterable[Mapping[str, Any]], request: Request) -> Placement:
    """The choice rule, plainly: every live GPU pool weighed against `request`. What Index must
    answer, and how it explains a request nothing fits."""
    gpu_rows = [r for r in rows if r.get("gpu") and r.get("deleted_at") is None]
    if not gpu_rows:
        raise NoPlacement("the catalog holds no live GPU pools; `provisioner sync FLEET` fills it")
    narrowed = [r for r in gpu_rows if _within(r, request)]
    if not narrowed:
        raise NoPlacement(
            f"no live GPU pool in the catalog is {_narrowing(request)}",
            [f"{_name(r)} ({r['cloud']}): {describe(r)}" for r in gpu_rows[:5]],
        )
    offers: list[Offer] = []
    misses: list[tuple[tuple[Any, ...], str]] = []
    for row in narrowed:
        outcome = _offer(row, request)
        if isinstance(outcome, Offer):
            offers.append(outcome)
        else:
            offered = f"{_name(row)} ({row['cloud']}): {describe(row)}; {outcome}"
            misses.append((_closeness(row, request), offered))
    where = f" {_narrowing(request)}" if _narrowing(request) else ""
    if not offers:
        raise NoPlacement(
            f"no live pool{where} offers {request.describe()}",
            [text for _, text in sorted(misses)[:3]],
        )
    offers.sort(key=Offer.order)
    taken = [o for o in offers if o.tier]
    if not taken:  # pools of the right slice, every one full: they are the nearest
        full = [f"{_name(o.row)} ({o.row['cloud']}): {describe(o.row)}; {_full(o)}" for o in offers]
        raise NoPlacement(
            f"no live pool{where} can take {request.describe()} now or after a scale-up",
            (full + [text for _, text in sorted(misses)])[:3],
        )
    return _placement(taken[0], others=len(taken) - 1)


def _full(offer: Offer) -> str:
    """Why a pool of the right slice cannot take the pod: nothing free, and it cannot grow."""
    found = offer.standing
    if not found.free_units:
        free = "no GiB free" if offer.row["slice_unit"] == "GiB" else "no slices free"
    else:
        free = (
            f"{found.free_units} GiB free"
            if offer.row["slice_unit"] == "GiB"
            else plural(found.free_units, "slice") + " free"
        )
    return f"{free} (by {_allocation_source(offer.row)}) and {found.blocked}"


def _allocation_source(row: Mapping[str, Any]) -> str:
    if row.get("allocation_live"):
        return "its Kubernetes API now"
    if row.get("allocation_at") is None:
        return "its cloud: no node"
    return f"the sync at {row['allocation_at']}"


def describe(row: Mapping[str, Any]) -> str:
    """What a pool offers, in words: `1g.5gb MIG slices of A100 40GB (5.0 GB each, isolation hardware)`."""
    isolation = f"isolation {row['isolation']}"
    if row["slice_unit"] == "GiB":
        per_gpu = row["slices_per_node"] // max(row["gpus_per_node"], 1)
        return f"{row['gpu']} memory by the GiB ({per_gpu} GiB per GPU, {isolation})"
    each = f"{row['memory_per_slice_gb']} GB each"
    shared = sharing_text(row["sharing"], row["replicas"]) if row["sharing"] != "exclusive" else ""
    if row["mig"]:
        slices = f"{row['mig']} MIG slices of {row['gpu']}"
        return f"{shared} on {slices} ({each}, {isolation})" if shared else f"{slices} ({each}, {isolation})"
    if shared:
        return f"{shared} of {row['gpu']} ({each}, {isolation})"
    return f"whole {row['gpu']} GPUs ({each}, {row['gpus_per_node']} per node)"


def _name(row: Mapping[str, Any]) -> str:
    return f"{row['cluster']}/{row['pool']}"


def _within(row: Mapping[str, Any], request: Request) -> bool:
    """The narrowing: GPU model, cloud, cluster, pool."""
    models = {g.name for g in hardware.load().gpus_named(request.gpu)} if request.gpu else None
    if models is not None and row["gpu"] not in models:
        return False
    return all(
        wanted is None or row[key] == wanted
        for key, wanted in (("cloud", request.cloud), ("cluster", request.cluster), ("pool", request.pool))
    )


def _narrowing(request: Request) -> str:
    parts = [
        f"{flag} {value}"
        for flag, value in (
            ("--gpu", request.gpu),
            ("--cloud", request.cloud),
            ("--cluster", request.cluster),
            ("--pool", request.pool),
        )
        if value is not None
    ]
    return ("in " + " ".join(parts)) if parts else ""


def _unplaceable(row: Mapping[str, Any]) -> str | None:
    """Why no pod can land on `row` whatever it asks for; None where one can."""
    rules = hardware.load().clouds.get(row["cloud"])
    if rules is None or rules.placement is None:
        return f"the tool does not know how pods land on {row['cloud']} pools"
    if row["slices_per_node"] < 1:
        return "its nodes advertise no slices the tool knows of"
    if _nodes(row) < 1:
        return "its maximum size is 0 nodes"
    return None


def _nodes(row: Mapping[str, Any]) -> int:
    """Nodes at the pool's maximum size. An edge pool (ACK Edge: no instance type) has none: the
    machines that joined it count, and it stays placeable while none has."""
    if row["instance_type"]:
        return row["max_nodes"]
    return max(row["max_nodes"], row["current_nodes"] or 0, 1)


def _offer(row: Mapping[str, Any], request: Request) -> Offer | str:
    """How `row` meets `request`, or why it does not (a phrase)."""
    refusal = _unplaceable(row)
    if refusal is not None:
        return refusal
    isolation = row["isolation"]
    if request.gpus is not None:
        if row["mig"] or row["sharing"] != "exclusive":
            return "its GPUs are partitioned or shared, not whole"
        if request.gpus > row["gpus_per_node"]:
            return f"a node has {row['gpus_per_node']} GPUs, fewer than {request.gpus}"
        per_node = row["gpus_per_node"] // request.gpus
        return Offer(row, row["memory_per_slice_gb"], isolation, request.gpus, per_node, standing(row))
    if ISOLATION_LEVELS.index(isolation) < ISOLATION_LEVELS.index(request.minimum_isolation):
        return f"its isolation {isolation} is weaker than {request.minimum_isolation}"
    if request.mig is not None:
        if row["mig"] != request.mig:
            return f"not {request.mig}"
        return Offer(row, row["memory_per_slice_gb"], isolation, 1, row["slices_per_node"], standing(row))
    assert request.memory_bytes is not None
    if row["slice_unit"] == "GiB":  # the scheduler hands out whole GiB within one GPU
        gib = math.ceil(request.memory_bytes / 2**30)
        per_gpu = row["slices_per_node"] // max(row["gpus_per_node"], 1)
        if gib > per_gpu:
            return f"{gib} GiB is more than the {per_gpu} GiB of one GPU"
        pods = row["gpus_per_node"] * (per_gpu // gib)
        return Offer(row, round(gib * GIB_GB, 2), isolation, gib, pods, standing(row))
    asked_gb = request.memory_bytes / 10**9
    if row["memory_per_slice_gb"] is None or row["memory_per_slice_gb"] + _ROUNDING_GB < asked_gb:
        return f"its slices have less than {round(asked_gb, 2)} GB"
    return Offer(row, row["memory_per_slice_gb"], isolation, 1, row["slices_per_node"], standing(row))


def _closeness(row: Mapping[str, Any], request: Request) -> tuple[Any, ...]:
    """How near a pool that does not fit comes: the same kind of slice first, then memory."""
    if request.mig is not None:
        kind = row["mig"] is None
        asked = hardware.MigProfile(request.mig, 1, 0).memory_gb
    elif request.gpus is not None:
        kind = bool(row["mig"]) or row["sharing"] != "exclusive"
        asked = 0.0
    else:
        kind = False
        asked = (request.memory_bytes or 0) / 10**9
    return (kind, abs((row["memory_per_slice_gb"] or 0) - asked), row["cluster"], row["pool"])


def _placement(offer: Offer, others: int) -> Placement:
    row = offer.row
    cloud = hardware.load().clouds[row["cloud"]]
    rules = cloud.placement
    assert rules is not None  # _offer refuses clouds without rules
    device = _device_ask(row, offer.quantity)
    limits = {resource_of(row): offer.quantity} if device is None else {}
    compute_share = row["slice_unit"] == "GiB" and row["isolation"] == rules.compute_share_isolation
    if rules.compute_share_resource and compute_share:
        per_gpu = row["slices_per_node"] // max(row["gpus_per_node"], 1)
        limits[rules.compute_share_resource] = min(100, math.ceil(100 * offer.quantity / per_gpu))
    # The fleet's pool label, not the cloud's (which names one generation): a pod evicted from a
    # pool being replaced lands on its new generation.
    selector = {POOL_NODE_LABEL: row["pool"]}
    plugin = device is None  # the cloud's own MIG and sharing labels and pod fields are the device plugin's
    if plugin and row["mig"] and rules.mig_label:
        selector[rules.mig_label] = row["mig"]
    if plugin and row["sharing"] in rules.sharing_strategy_values and rules.sharing_strategy_label:
        selector[rules.sharing_strategy_label] = rules.sharing_strategy_values[row["sharing"]]
        if rules.sharing_clients_label and row["replicas"]:
            selector[rules.sharing_clients_label] = str(row["replicas"])
    taints = list(row["taints"] or [])
    if row["spot"]:  # the driver reads the cloud's own Spot taints out of the pool; nodes carry them
        taints += [str(t) for t in cloud.spot_taints if str(t) not in taints]
    return Placement(
        cluster=row["cluster"],
        cloud=row["cloud"],
        pool=row["pool"],
        isolation=offer.isolation,
        slice_memory_gb=offer.memory_gb,
        slice_unit=row["slice_unit"],
        limits=limits,
        node_selector=selector,
        tolerations=[toleration(t) for t in taints],
        pod_fields=dict(rules.pod_spec.get(row["sharing"], {})) if plugin else {},
        capacity_at_max=offer.capacity_at_max,
        max_nodes=_nodes(row),
        why=describe(row),
        others=others,
        warnings=_warnings(row),
        capacity=_capacity(offer),
        tier_why=_tier_why(offer),
        device=device,
        share=device.share_name() if device is not None and device.shared else None,
        cloud_pool_label=_cloud_pool_label(cloud, row),
    )


def _cloud_pool_label(
    cloud: hardware.CloudProfile, row: Mapping[str, Any]
) -> tuple[str, tuple[str, ...]] | None:
    """The cloud's pool label, and the values that named the row's pool by it."""
    if cloud.pool_label is None:
        return None
    values = (row["pool"], row["cloud_id"]) if row.get("cloud_id") else (row["pool"],)
    return cloud.pool_label.key, values


def _device_ask(row: Mapping[str, Any], quantity: int) -> DeviceAsk | None:
    """On a DRA pool, what the pod claims: `quantity` devices of the pool's DeviceClass (one, where
    they are MIG devices or shared); None on a device-plugin pool."""
    if row.get("allocation_mode") != "dra":
        return None
    return DeviceAsk(
        pool=row["pool"],
        device_class=dra_device_class(bool(row["mig"])),
        count=quantity if not row["mig"] and row["sharing"] == "exclusive" else 1,
        mig=row["mig"],
        sharing=row["sharing"],
        replicas=row["replicas"],
    )


def _capacity(offer: Offer) -> dict[str, Any]:
    """`place --json`'s "capacity": pods of this request free now and reachable by growing (None:
    unknown), nodes the pool may still add, its tier, and what the free count was read from."""
    found, row = offer.standing, offer.row
    grows = None if found.nodes_left is None else (found.nodes_left * offer.per_node if found.growable else 0)
    return {
        "tier": offer.tier,
        "free": None if found.free_units is None else found.free_units // offer.quantity,
        "growable": grows,
        "nodes_left": found.nodes_left,
        "at_max": offer.capacity_at_max,
        "allocation": "live" if row.get("allocation_live") else found.allocation,
        "allocation_at": row.get("allocation_at"),
    }


def _tier_why(offer: Offer) -> str:
    """The tier, and why, in one phrase."""
    found, shown = offer.standing, _capacity(offer)
    if offer.tier == "free":
        source = _allocation_source(offer.row)
        return f"free now: {shown['free']} such pods fit in the slices free by {source}"
    grows = (
        f"its autoscaler can add {plural(found.nodes_left or 0, 'node')} ({shown['growable']} such pods)"
        if found.growable
        else f"it cannot grow: {found.blocked}"
    )
    if offer.tier == "unknown":
        growth = f"; if none is free, {grows}" if found.nodes_now is not None else ""
        return f"free slices unknown: {unknown_reason(found.allocation)}{growth}"
    return f"can grow: no slice free for it by {_allocation_source(offer.row)}; {grows}"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def toleration(taint: str) -> dict[str, str]:
    """The toleration for a taint spelled `key=value:Effect` (or `key:Effect`). Explicit even for
    the GPU taint: the ExtendedResourceToleration admission plugin adds it only for the resource
    name itself, not for renamed ones (nvidia.com/gpu.shared) or aliyun.com/gpu-mem."""
    key_value, _, effect = taint.rpartition(":")
    key, equals, value = key_value.partition("=")
    if equals:
        return {"key": key, "operator": "Equal", "value": value, "effect": effect}
    return {"key": key, "operator": "Exists", "effect": effect}


def _warnings(row: Mapping[str, Any], now: datetime | None = None) -> list[str]:
    """What the catalog says about how current the chosen pool's row is."""
    status = row.get("cluster_status")
    seen = row.get("last_seen")
    found = []
    if status == "error":
        found.append(
            f"the last sync of cluster {row['cluster']} failed; "
            f"this pool is as it was at {seen or 'an unknown time'}"
        )
    elif seen:
        age = (now or datetime.now(UTC)) - datetime.fromisoformat(seen)
        if age > STALE_AFTER:
            found.append(
                f"cluster {row['cluster']} was last synced {age.days} days ago ({seen}); "
                "the pool may have changed"
            )
    return found
