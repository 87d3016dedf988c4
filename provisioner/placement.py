"""Fractional request -> pool -> pod-spec fragment: the last step from a catalog of pools to a pod
that lands on the right one with the right resource name, node selector and tolerations.

    from provisioner.placement import Request, place
    chosen = place(store, Request(gpu_memory="4GB"))   # a Store, or `catalog ls --json` rows
    chosen.json()   # {"cluster", "cloud", "pool", "isolation", "slice", "resources", "nodeSelector", ...}

A request is a MIG profile, an amount of GPU memory (with a minimum isolation) or whole GPUs,
optionally narrowed by GPU model, cloud, cluster and pool. The choice rule, among the live GPU
pools that satisfy it:

1. the smallest slice that fits: least memory per slice, then the weakest isolation that still
   meets the minimum (stronger isolation is kept for requests that need it);
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

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable

from provisioner import hardware
from provisioner.capacity import ISOLATION_LEVELS, sharing_text
from provisioner.errors import BadRequest, NoPlacement
from provisioner.nvidia import marks

# Units a size may carry: SI (a GB is 10^9 bytes, as GPU makers count) and binary (a GiB is 2^30),
# also in Kubernetes' quantity spelling (G, Gi). Case does not matter.
MEMORY_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}
_SIZE = re.compile(r"^\s*(?P<number>[-+]?\d+(?:\.\d+)?|[-+]?\.\d+)\s*(?P<unit>[A-Za-z]*)\s*$")
_SIZE_EXAMPLES = "e.g. 4GB, 4000MB or 4GiB"
_MIG_NAME = re.compile(r"^\d+g\.\d+gb$")
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


def parse_size(text: str) -> int:
    """Bytes in a size such as "4GB" (4 x 10^9), "4000MB" or "4GiB" (4 x 2^30)."""
    match = _SIZE.match(text) if isinstance(text, str) else None
    if match is None:
        raise BadRequest(f"gpu_memory: {text!r} is not a size; want a number and a unit, {_SIZE_EXAMPLES}")
    number, unit = float(match["number"]), match["unit"]
    if not unit:
        raise BadRequest(f"gpu_memory: {text!r} has no unit; say which, {_SIZE_EXAMPLES}")
    if unit.lower() not in MEMORY_UNITS:
        raise BadRequest(
            f"gpu_memory: {text!r}: unknown unit {unit!r}; want B, KB, MB, GB, TB (10^3) or KiB, MiB, "
            f"GiB, TiB (2^10), {_SIZE_EXAMPLES}"
        )
    if number <= 0:
        raise BadRequest(f"gpu_memory: {text!r}: a size must be more than zero")
    return math.ceil(number * MEMORY_UNITS[unit.lower()])


@dataclass(frozen=True)
class Request:
    """What a pod asks for: exactly one of `mig`, `gpu_memory` and `gpus`, optionally with a minimum
    `isolation` and narrowed to a GPU model, cloud, cluster or pool. Checked when made (BadRequest)."""

    mig: str | None = None  # a MIG profile, e.g. "1g.10gb"
    gpu_memory: str | None = None  # a size, e.g. "4GB", "4000MB", "4GiB"
    gpus: int | None = None  # whole GPUs
    isolation: str | None = None  # minimum: none < memory < compute < hardware
    gpu: str | None = None  # GPU model: a key (A100-80GB) or a family (A100)
    cloud: str | None = None
    cluster: str | None = None
    pool: str | None = None
    memory_bytes: int | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        given = [name for name in ("mig", "gpu_memory", "gpus") if getattr(self, name) is not None]
        if len(given) != 1:
            spelled = " and ".join(f"--{n.replace('_', '-')}" for n in given) if given else "none"
            raise BadRequest(
                f"ask for exactly one of --mig PROFILE, --gpu-memory SIZE and --gpus N (got {spelled})"
            )
        if self.isolation is not None and self.isolation not in ISOLATION_LEVELS:
            raise BadRequest(
                f"isolation: {self.isolation!r} is not a level; want one of {', '.join(ISOLATION_LEVELS)}"
            )
        known = hardware.load()
        if self.cloud is not None and self.cloud not in known.clouds:
            raise BadRequest(f"cloud: {self.cloud!r} is not a cloud; want one of {', '.join(known.clouds)}")
        if self.gpu is not None and not known.gpus_named(self.gpu):
            raise BadRequest(f"gpu: {self.gpu!r} is not a GPU model; known: {', '.join(known.gpus)}")
        if self.gpus is not None and (isinstance(self.gpus, bool) or not isinstance(self.gpus, int)):
            raise BadRequest(f"gpus: {self.gpus!r} is not a whole number of GPUs")
        if self.gpus is not None and self.gpus < 1:
            raise BadRequest(f"gpus: {self.gpus} GPUs; ask for at least 1")
        if self.gpu_memory is not None:
            object.__setattr__(self, "memory_bytes", parse_size(self.gpu_memory))
        if self.mig is not None:
            self._check_mig(known)

    def _check_mig(self, known: hardware.Hardware) -> None:
        gpus = known.gpus_named(self.gpu) if self.gpu else list(known.gpus.values())
        offered = sorted({p for g in gpus for p in g.mig}, key=_profile_order)
        if self.mig in offered:
            return
        where = f"the {', '.join(g.name for g in gpus)}" if self.gpu else "any GPU the tool knows"
        shape = "" if _MIG_NAME.match(self.mig or "") else " (a MIG profile reads like 1g.10gb)"
        raise BadRequest(
            f"mig: {self.mig!r} is not a MIG profile of {where}{shape}; "
            f"profiles: {', '.join(offered) or 'none (not MIG-capable)'}"
        )

    @property
    def minimum_isolation(self) -> str:
        """The isolation asked for; a MIG request, unless told otherwise, wants a MIG instance's own."""
        if self.isolation is not None:
            return self.isolation
        return "hardware" if self.mig is not None else "none"

    def describe(self) -> str:
        if self.mig is not None:
            asked = f"a {self.mig} MIG slice"
        elif self.gpu_memory is not None:
            asked = f"{self.gpu_memory} of GPU memory"
        else:
            asked = f"{self.gpus} whole GPU{'' if self.gpus == 1 else 's'}"
        if self.minimum_isolation != "none":
            asked += f" with isolation {self.minimum_isolation} or stronger"
        return asked


@dataclass(frozen=True)
class Offer:
    """How one pool meets a request: the slice a pod gets there, and how many such pods it holds."""

    row: Mapping[str, Any]
    memory_gb: float  # the slice's memory (nominal share where shared)
    isolation: str
    quantity: int  # of the resource the pod requests
    capacity_at_max: int  # pods of this request the pool holds at its maximum size

    def order(self) -> tuple[Any, ...]:
        """The choice rule as a sort key (module docstring)."""
        return (
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
    others: int  # other pools that fit too
    warnings: list[str]

    def json(self) -> dict[str, Any]:
        """`place --json` (DESIGN.md): pod-spec fields by their Kubernetes names."""
        return {
            "cluster": self.cluster,
            "cloud": self.cloud,
            "pool": self.pool,
            "isolation": self.isolation,
            "slice": {"memory_gb": self.slice_memory_gb, "unit": self.slice_unit},
            "resources": {"limits": dict(self.limits)},
            "nodeSelector": dict(self.node_selector),
            "tolerations": [dict(t) for t in self.tolerations],
            **self.pod_fields,
        }

    def fragment(self) -> dict[str, Any]:
        """What the pod needs: `resources` goes on the container, the rest on the pod spec."""
        return {
            "resources": {"limits": dict(self.limits)},
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
    they offer (what `_offer` reads of a pool, but for its size and names), each group in the order
    the choice rule gives pools that meet a request alike. A request then weighs one pool of each
    shape, or only the pools of the cluster or pool it names. Its answers are `weigh`'s."""

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
        # Alike but for size: more nodes hold more pods of any request, then names decide.
        self.shapes = [
            sorted(g, key=lambda r: (-_nodes(r), r["cluster"], r["pool"])) for g in shapes.values()
        ]

    def place(self, request: Request) -> Placement:
        named = self._named(request)
        if named is None:
            best, fitting = self._best_shape(request)
        else:
            offers = [o for r in named if _within(r, request) and isinstance(o := _offer(r, request), Offer)]
            best, fitting = min(offers, key=Offer.order, default=None), len(offers)
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
        """The best offer over every shape that meets `request`, and how many pools meet it."""
        best: Offer | None = None
        fitting = 0
        for group in self.shapes:
            if not _within(group[0], request):
                continue
            offer = _offer(group[0], request)
            if not isinstance(offer, Offer):
                continue
            if offer.capacity_at_max == 0:  # no pod fits a node: size does not order them, names do
                offer = min((o for r in group if isinstance(o := _offer(r, request), Offer)), key=Offer.order)
            fitting += len(group)
            if best is None or offer.order() < best.order():
                best = offer
        return best, fitting


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
    if not offers:
        where = f" {_narrowing(request)}" if _narrowing(request) else ""
        raise NoPlacement(
            f"no live pool{where} offers {request.describe()}",
            [text for _, text in sorted(misses)[:3]],
        )
    offers.sort(key=Offer.order)
    return _placement(offers[0], others=len(offers) - 1)


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
    if rules.pool_label is None or (rules.pool_label.value == "cloudId" and not row.get("cloud_id")):
        return "the catalog holds no pool ID for it (sync again)"
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
    nodes = _nodes(row)
    isolation = row["isolation"]
    if request.gpus is not None:
        if row["mig"] or row["sharing"] != "exclusive":
            return "its GPUs are partitioned or shared, not whole"
        if request.gpus > row["gpus_per_node"]:
            return f"a node has {row['gpus_per_node']} GPUs, fewer than {request.gpus}"
        per_node = row["gpus_per_node"] // request.gpus
        return Offer(row, row["memory_per_slice_gb"], isolation, request.gpus, per_node * nodes)
    if ISOLATION_LEVELS.index(isolation) < ISOLATION_LEVELS.index(request.minimum_isolation):
        return f"its isolation {isolation} is weaker than {request.minimum_isolation}"
    if request.mig is not None:
        if row["mig"] != request.mig:
            return f"not {request.mig}"
        return Offer(row, row["memory_per_slice_gb"], isolation, 1, row["slices_per_node"] * nodes)
    assert request.memory_bytes is not None
    if row["slice_unit"] == "GiB":  # the scheduler hands out whole GiB within one GPU
        gib = math.ceil(request.memory_bytes / 2**30)
        per_gpu = row["slices_per_node"] // max(row["gpus_per_node"], 1)
        if gib > per_gpu:
            return f"{gib} GiB is more than the {per_gpu} GiB of one GPU"
        pods = row["gpus_per_node"] * (per_gpu // gib) * nodes
        return Offer(row, round(gib * GIB_GB, 2), isolation, gib, pods)
    asked_gb = request.memory_bytes / 10**9
    if row["memory_per_slice_gb"] is None or row["memory_per_slice_gb"] + _ROUNDING_GB < asked_gb:
        return f"its slices have less than {round(asked_gb, 2)} GB"
    return Offer(row, row["memory_per_slice_gb"], isolation, 1, row["slices_per_node"] * nodes)


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
    resource = marks(cloud, None, row["sharing"], row["replicas"], isolation=row["isolation"]).resource
    limits = {resource: offer.quantity}
    compute_share = row["slice_unit"] == "GiB" and row["isolation"] == rules.compute_share_isolation
    if rules.compute_share_resource and compute_share:
        per_gpu = row["slices_per_node"] // max(row["gpus_per_node"], 1)
        limits[rules.compute_share_resource] = min(100, math.ceil(100 * offer.quantity / per_gpu))
    pool_label = cloud.pool_label
    assert pool_label is not None  # _unplaceable refuses clouds without one
    selector = {pool_label.key: row["pool"] if pool_label.value == "name" else row["cloud_id"]}
    if row["mig"] and rules.mig_label:
        selector[rules.mig_label] = row["mig"]
    if row["sharing"] in rules.sharing_strategy_values and rules.sharing_strategy_label:
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
        pod_fields=dict(rules.pod_spec.get(row["sharing"], {})),
        capacity_at_max=offer.capacity_at_max,
        max_nodes=_nodes(row),
        why=describe(row),
        others=others,
        warnings=_warnings(row),
    )


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


def _profile_order(name: str) -> tuple[int, int]:
    compute, _, memory = name.partition("g.")
    return int(compute), int(memory.removesuffix("gb"))
