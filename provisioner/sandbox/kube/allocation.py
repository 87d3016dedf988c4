"""Allocating a pod's ResourceClaims on one node, as kube-scheduler's DynamicResources plugin does
through the structured-parameters allocator.

Source: kubernetes/kubernetes staging/src/k8s.io/dynamic-resource-allocation/structured/internal/
stable/allocator_stable.go (Allocate, validateDeviceRequest, allocateOne, isSelectable,
selectorsMatch, allocateDevice, matchAttributeConstraint, lookupAttribute, createNodeSelector) and
pools_stable.go (GatherPools: only a pool's newest generation counts; a pool missing slices is
incomplete). The allocator takes the pod's unallocated claims together, each claim's requests in
order, each device from the pools in order, and keeps the first full solution it finds (no scoring);
`None` means "cannot allocate all claims" on this node; an `AllocationError` (a claim or class the
allocator cannot work with, a CEL error) aborts scheduling of the pod, as the plugin's Filter
returns an error status for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.sandbox.kube.cel import CompileError, EvaluationError, Unsupported, compile_selector

# resourceapi.AllocationResultsMaxSize and ResourceClaimReservedForMaxSize (resource/v1 types.go).
ALLOCATION_RESULTS_MAX = 32
RESERVED_FOR_MAX = 256
FINALIZER = "resource.kubernetes.io/delete-protection"
OPTIONAL_HINT = "Consider using CEL optional chaining (?), has() macro, or orValue() for optional fields"
DeviceId = tuple[str, str, str]  # driver, pool, device (internal.DeviceID)


class AllocationError(Exception):
    """The allocator's error for a claim it cannot work with (scheduling of the pod aborts)."""


def device_id_text(device: DeviceId) -> str:
    return "/".join(device)


def claim_ref(claim: Mapping[str, Any]) -> str:
    """klog.KObj: namespace/name."""
    metadata = claim.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> set[DeviceId]:
    """Devices held by allocated claims (the scheduler's ListAllAllocatedDevices: admin-access
    results do not take the device)."""
    held: set[DeviceId] = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if not result.get("adminAccess"):
                held.add((result["driver"], result["pool"], result["device"]))
    return held


# ---------------------------------------------------------------- pools on the node


@dataclass
class Candidate:
    id: DeviceId
    device: Mapping[str, Any]
    slice: Mapping[str, Any]


def _slice_on_node(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    metadata = node.get("metadata") or {}
    if spec.get("nodeName"):
        return bool(spec["nodeName"] == metadata.get("name"))
    if spec.get("allNodes"):
        return True
    selector = spec.get("nodeSelector")
    return bool(selector) and node_selector_matches(selector, node)


def node_selector_matches(selector: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """core/v1 NodeSelector: any term matches when all its requirements do (labels, and the
    metadata.name field)."""
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    for term in selector.get("nodeSelectorTerms") or []:
        expressions = [(r, labels) for r in term.get("matchExpressions") or []]
        fields = [(r, {"metadata.name": metadata.get("name")}) for r in term.get("matchFields") or []]
        if (expressions or fields) and all(_requirement(r, values) for r, values in expressions + fields):
            return True
    return False


def _requirement(requirement: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    key, operator = requirement.get("key"), requirement.get("operator")
    wanted = requirement.get("values") or []
    if operator == "In":
        return key in values and values[key] in wanted
    if operator == "NotIn":
        return key not in values or values[key] not in wanted
    if operator == "Exists":
        return key in values
    if operator == "DoesNotExist":
        return key not in values
    if operator in ("Gt", "Lt") and key in values and str(values[key]).lstrip("-").isdigit():
        number, bound = int(values[key]), int(wanted[0])
        return number > bound if operator == "Gt" else number < bound
    return False


@dataclass
class Pool:
    driver: str
    name: str
    slices: list[Mapping[str, Any]]
    incomplete: bool

    def candidates(self) -> list[Candidate]:
        return [
            Candidate((self.driver, self.name, str(d.get("name"))), d, s)
            for s in self.slices
            for d in (s.get("spec") or {}).get("devices") or []
        ]


def gather_pools(slices: Iterable[Mapping[str, Any]], node: Mapping[str, Any]) -> list[Pool]:
    """The pools with slices for this node, in the order first seen; only the newest generation of
    each pool counts, and a pool with fewer slices than resourceSliceCount is incomplete."""
    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        grouped.setdefault((str(spec.get("driver")), str(pool.get("name"))), []).append(item)
    pools = []
    for (driver, name), members in grouped.items():
        newest = max(int((m["spec"].get("pool") or {}).get("generation", 0)) for m in members)
        current = [m for m in members if int((m["spec"].get("pool") or {}).get("generation", 0)) == newest]
        expected = int((current[0]["spec"].get("pool") or {}).get("resourceSliceCount", 1))
        local = [m for m in current if _slice_on_node(m["spec"], node)]
        if local:
            pools.append(Pool(driver, name, local, incomplete=len(current) < expected))
    return pools


# ---------------------------------------------------------------- requests


@dataclass
class Request:
    """One request or subrequest (exactly / firstAvailable[i]) of claim `claim_index`."""

    claim_index: int
    name: str  # "request" or "request/subrequest"
    base: str  # the request's own name (constraints name it)
    sub: str  # the subrequest's name, or ""
    class_name: str
    selectors: list[str]
    mode: str
    count: int
    admin_access: bool
    device_class: Mapping[str, Any] = field(default_factory=dict)
    all_devices: list[Candidate] = field(default_factory=list)


@dataclass
class Constraint:
    """matchAttribute: every device of the named requests (all, when none are named) shares one
    value of the attribute; a device without it cannot join."""

    requests: set[str]
    attribute: str
    value: Mapping[str, Any] | None = None
    members: int = 0

    def applies(self, request: Request) -> bool:
        return not self.requests or request.base in self.requests or request.name in self.requests

    def add(self, request: Request, candidate: Candidate) -> bool:
        if not self.applies(request):
            return True
        value = lookup_attribute(candidate, self.attribute)
        if value is None:
            return False
        if self.members and value != self.value:
            return False
        self.value = value if not self.members else self.value
        self.members += 1
        return True

    def remove(self, request: Request) -> None:
        if self.applies(request):
            self.members -= 1


def lookup_attribute(candidate: Candidate, name: str) -> Mapping[str, Any] | None:
    """A fully qualified attribute, or, in the driver's own domain, its unqualified name."""
    attributes = candidate.device.get("attributes") or {}
    if name in attributes:
        return dict(attributes[name])
    domain, slash, ident = name.partition("/")
    if slash and domain == candidate.id[0] and ident in attributes:
        return dict(attributes[ident])
    return None


def _requests(
    claims: list[Mapping[str, Any]], classes: Mapping[str, Mapping[str, Any]]
) -> list[list[Request]]:
    """Each claim request's alternatives (one, or its firstAvailable subrequests in order)."""
    out = []
    for index, claim in enumerate(claims):
        for raw in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            name = str(raw.get("name", ""))
            if raw.get("firstAvailable"):
                subs = [
                    (f"{name}/{s.get('name', '')}", str(s.get("name", "")), s) for s in raw["firstAvailable"]
                ]
            elif raw.get("exactly"):
                subs = [(name, "", raw["exactly"])]
            else:
                where = f"claim {claim_ref(claim)}, request {name}"
                raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
            out.append([_request(claim, index, name, full, sub, body, classes) for full, sub, body in subs])
    return out


def _request(  # noqa: PLR0917 - one request's parts, as the claim holds them
    claim: Mapping[str, Any],
    index: int,
    base: str,
    full: str,
    sub: str,
    body: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
) -> Request:
    where = f"claim {claim_ref(claim)}, request {full}"
    class_name = str(body.get("deviceClassName") or "")
    if not class_name:
        raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
    if class_name not in classes:
        raise AllocationError(
            f"{where}: could not retrieve device class {class_name}: "
            f'deviceclass.resource.k8s.io "{class_name}" not found'
        )
    mode = str(body.get("allocationMode") or "ExactCount")
    if mode not in ("ExactCount", "All"):
        raise AllocationError(f"{where}: unsupported count mode {mode}")
    selectors = []
    for number, selector in enumerate(body.get("selectors") or []):
        expression = (selector.get("cel") or {}).get("expression")
        if expression is None:
            raise AllocationError(
                f"{where}, selector #{number}: CEL expression empty (unsupported selector type?)"
            )
        selectors.append(str(expression))
    return Request(
        claim_index=index,
        name=full,
        base=base,
        sub=sub,
        class_name=class_name,
        selectors=selectors,
        mode=mode,
        count=int(body.get("count") or 1),
        admin_access=bool(body.get("adminAccess")),
        device_class=classes[class_name],
    )


# ---------------------------------------------------------------- the search


class _Search:
    def __init__(
        self,
        claims: list[Mapping[str, Any]],
        pools: list[Pool],
        allocated: set[DeviceId],
    ) -> None:
        self.claims = claims
        self.pools = pools
        self.allocated = allocated
        self.allocating: dict[DeviceId, set[int]] = {}
        self.results: list[list[tuple[Request, Candidate]]] = [[] for _ in claims]
        self.chosen: dict[tuple[int, str], int] = {}  # (claim, request) -> chosen subrequest index
        self.constraints: list[list[Constraint]] = []
        for claim in claims:
            found = []
            for number, raw in enumerate(
                ((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []
            ):
                if not raw.get("matchAttribute"):
                    where = f"claim {claim_ref(claim)}, constraint #{number}"
                    raise AllocationError(f"{where}: empty constraint (unsupported constraint type?)")
                found.append(Constraint(set(raw.get("requests") or []), str(raw["matchAttribute"])))
            self.constraints.append(found)
        self.matches: dict[tuple[DeviceId, int], bool] = {}

    def candidates(self) -> list[Candidate]:
        return [c for pool in self.pools if not pool.incomplete for c in pool.candidates()]

    def in_use(self, request: Request, device: DeviceId) -> bool:
        if request.admin_access:
            return request.claim_index in self.allocating.get(device, set())
        return device in self.allocated or bool(self.allocating.get(device))

    def selectable(self, request: Request, candidate: Candidate) -> bool:
        key = (candidate.id, id(request))
        if key not in self.matches:
            self.matches[key] = self._selectors_match(request, candidate, request.device_class) and (
                self._selectors_match(request, candidate, None)
            )
        return self.matches[key]

    def _selectors_match(
        self, request: Request, candidate: Candidate, device_class: Mapping[str, Any] | None
    ) -> bool:
        if device_class is not None:
            owner = f"class {(device_class.get('metadata') or {}).get('name', request.class_name)}"
            expressions = [
                str((s.get("cel") or {}).get("expression", ""))
                for s in (device_class.get("spec") or {}).get("selectors") or []
            ]
        else:
            owner, expressions = f"claim {claim_ref(self.claims[request.claim_index])}", request.selectors
        for number, expression in enumerate(expressions):
            try:
                program = compile_selector(expression)
            except CompileError as error:
                raise AllocationError(f"{owner}: selector #{number}: CEL compile error: {error}") from None
            except Unsupported as error:
                raise AllocationError(f"{owner}: selector #{number}: {error}") from None
            try:
                matched = program.matches(candidate.id[0], candidate.device)
            except EvaluationError as error:
                message = str(error)
                if message.startswith("no such key:"):  # cel.EnhanceRuntimeError
                    message += f". {OPTIONAL_HINT}"
                where = f"{owner}: selector #{number} on device {device_id_text(candidate.id)}"
                raise AllocationError(f"{where}: CEL runtime error: {message}") from None
            if not matched:
                return False
        return True

    def take(self, request: Request, candidate: Candidate, must: bool) -> bool:
        """allocateDevice: the device is free and every constraint of the claim accepts it."""
        if self.in_use(request, candidate.id):
            return False
        constraints = self.constraints[request.claim_index]
        for number, constraint in enumerate(constraints):
            if not constraint.add(request, candidate):
                if must:
                    where = f"claim {claim_ref(self.claims[request.claim_index])}, request {request.name}"
                    raise AllocationError(
                        f"{where}: cannot add device {device_id_text(candidate.id)} "
                        "because a claim constraint would not be satisfied"
                    )
                for earlier in constraints[:number]:
                    earlier.remove(request)
                return False
        self.allocating.setdefault(candidate.id, set()).add(request.claim_index)
        self.results[request.claim_index].append((request, candidate))
        return True

    def give_back(self, request: Request, candidate: Candidate) -> None:
        for constraint in self.constraints[request.claim_index]:
            constraint.remove(request)
        self.allocating[candidate.id].discard(request.claim_index)
        self.results[request.claim_index].pop()

    def solve(self, requests: list[list[Request]], at: int = 0) -> bool:
        if at == len(requests):
            return True
        for number, request in enumerate(requests[at]):
            if len(self.results[request.claim_index]) + request.count > ALLOCATION_RESULTS_MAX and (
                request.mode == "ExactCount"
            ):
                continue  # errAllocationResultMaxSizeExceeded: try the next subrequest
            solved = (
                self.all_of(request, requests, at)
                if request.mode == "All"
                else self.pick(request, requests, at)
            )
            if solved:
                self.chosen[(request.claim_index, request.base)] = number
                return True
        return False

    def all_of(self, request: Request, requests: list[list[Request]], at: int) -> bool:
        """allocationMode All: every matching device of the node, or nothing."""
        if not request.all_devices:
            return False
        taken: list[Candidate] = []
        for candidate in request.all_devices:
            if not self.take(request, candidate, must=True):
                break
            taken.append(candidate)
        if len(taken) == len(request.all_devices) and self.solve(requests, at + 1):
            return True
        for candidate in reversed(taken):
            self.give_back(request, candidate)
        return False

    def pick(
        self, request: Request, requests: list[list[Request]], at: int, need: int = -1, start: int = 0
    ) -> bool:
        """`need` more devices for `request`, trying the node's devices in order, the first one
        that works then the rest (the first solution found is the allocator's)."""
        need = request.count if need < 0 else need
        if need == 0:
            return self.solve(requests, at + 1)
        candidates = self.candidates()
        for index in range(start, len(candidates)):
            candidate = candidates[index]
            if self.in_use(request, candidate.id) or not self.selectable(request, candidate):
                continue
            if not self.take(request, candidate, must=False):
                continue
            if self.pick(request, requests, at, need - 1, index + 1):
                return True
            self.give_back(request, candidate)
        return False


def allocate(
    claims: list[Mapping[str, Any]],
    classes: Mapping[str, Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    node: Mapping[str, Any],
    allocated: set[DeviceId],
) -> list[dict[str, Any]] | None:
    """Each claim's `status.allocation` on `node`, or None when not all of them fit there.

    `claims` are the pod's unallocated claims, `classes` DeviceClasses by name, `slices` the
    cluster's ResourceSlices, `allocated` the devices other claims hold."""
    pools = gather_pools(slices, node)
    requests = _requests(claims, classes)
    search = _Search(claims, pools, allocated)
    for alternatives in requests:
        for request in alternatives:
            if request.mode == "All":
                request.all_devices = _all_devices(search, request, pools)
    if not search.solve(requests):
        return None
    return [_result(claim, search, requests, index) for index, claim in enumerate(claims)]


def _all_devices(search: _Search, request: Request, pools: list[Pool]) -> list[Candidate]:
    where = (
        f"claim {claim_ref(search.claims[request.claim_index])}, request {request.name}: asks for all devices"
    )
    found = []
    for pool in pools:
        if pool.incomplete:
            raise AllocationError(
                f"{where}, but resource pool {pool.driver}/{pool.name} is currently being updated"
            )
        found += [c for c in pool.candidates() if search.selectable(request, c)]
    return found


def _result(
    claim: Mapping[str, Any], search: _Search, requests: list[list[Request]], index: int
) -> dict[str, Any]:
    devices = search.results[index]
    results = []
    for request, candidate in devices:
        entry = {
            "request": request.name,
            "driver": candidate.id[0],
            "pool": candidate.id[1],
            "device": candidate.id[2],
        }
        if request.admin_access:
            entry["adminAccess"] = True
        results.append(entry)
    config = _configs(claim, search, [r for r in requests if r[0].claim_index == index], index)
    allocation: dict[str, Any] = {"devices": {"results": results}}
    if config:
        allocation["devices"]["config"] = config
    selector = _node_selector([c for _, c in devices])
    if selector is not None:
        allocation["nodeSelector"] = selector
    return allocation


def _configs(
    claim: Mapping[str, Any], search: _Search, requests: list[list[Request]], index: int
) -> list[dict[str, Any]]:
    """The classes' configs (each class once, listing the requests that used it), then the
    claim's; a config naming every request of the claim names none ("empty means all")."""
    out: list[dict[str, Any]] = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    chosen = []
    for alternatives in requests:
        request = alternatives[search.chosen.get((index, alternatives[0].base), 0)]
        chosen.append(request)
        if request.class_name in by_class:
            for entry in by_class[request.class_name]:
                entry["requests"].append(request.name)
            continue
        entries = [
            {"source": "FromClass", "requests": [request.name], **_configuration(c)}
            for c in (request.device_class.get("spec") or {}).get("config") or []
        ]
        by_class[request.class_name] = entries
        out += entries
    for raw in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        named = list(raw.get("requests") or [])
        if not named:
            out.append({"source": "FromClaim", **_configuration(raw)})
            continue
        # Copied once per request of the claim that it names, as Allocate's loop does.
        for request in chosen:
            if request.base in named or (request.sub and request.name in named):
                out.append({"source": "FromClaim", "requests": named, **_configuration(raw)})
    total = len(requests)
    for entry in out:
        if len(entry.get("requests") or []) == total:
            entry.pop("requests")
    return out


def _configuration(raw: Mapping[str, Any]) -> dict[str, Any]:
    """DeviceConfiguration: today only `opaque` {driver, parameters}."""
    return {k: v for k, v in raw.items() if k not in ("requests", "source")}


def _node_selector(devices: list[Candidate]) -> dict[str, Any] | None:
    """createNodeSelector: a node-local device pins the claim to that node; selectors of slices
    shared by several nodes add up; devices available everywhere add nothing."""
    term: dict[str, list[Any]] = {"matchFields": [], "matchExpressions": []}
    for candidate in devices:
        spec = candidate.slice.get("spec") or {}
        if spec.get("nodeName"):
            return {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [spec["nodeName"]]}
                        ]
                    }
                ]
            }
        terms = (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
        if len(terms) == 1:
            for kind in ("matchFields", "matchExpressions"):
                for requirement in terms[0].get(kind) or []:
                    if requirement not in term[kind]:
                        term[kind].append(requirement)
    kept = {k: v for k, v in term.items() if v}
    return {"nodeSelectorTerms": [kept]} if kept else None
