"""The fleet file: which GPU node pools each cluster should have, and how each GPU is shared.

`parse` checks a file's structure and reports every problem with its file, line and field path.
The cloud rules (which MIG profiles a GPU has, what each cloud accepts) are checked in rules.py,
and compile.py turns a checked pool into its NodeSetup.
"""

from __future__ import annotations

import difflib
import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails, PydanticCustomError

from provisioner.clusters import ClusterRef
from provisioner.errors import Diagnostic, FleetError
from provisioner.pools import TAINT_EFFECTS, Scaling, Taint
from provisioner.source import Loc, SourceDocument, cut, shown

Sharing = Literal["exclusive", "time-slicing", "mps", "memory"]
# What memory-based sharing enforces between the pods on one GPU (ACK: share, cgpu, core_mem).
Isolation = Literal["none", "memory", "compute"]


def _matching(regex: str, what: str) -> Any:
    """A string type that must match `regex`; the error says what it should be instead."""
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise PydanticCustomError(
                "format", "{value} is not {what}", {"value": shown(value), "what": what}
            )
        return value

    return Annotated[str, AfterValidator(check), Field(json_schema_extra={"pattern": regex})]


_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_LABEL_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
# The prefix is a DNS subdomain: at most 253 characters (the lookahead), then "/".
_LABEL_KEY = rf"((?=[^/]{{1,253}}/){_DNS_LABEL}(\.{_DNS_LABEL})*/)?{_LABEL_NAME}"
_LABEL_VALUE = rf"{_LABEL_NAME}?"

LabelKey = _matching(
    _LABEL_KEY,
    "a Kubernetes label key ([prefix/]name: prefix a DNS subdomain of at most 253 characters, "
    "name at most 63)",
)
LabelValue = _matching(_LABEL_VALUE, "a Kubernetes label value (at most 63 letters, digits, -, _ or .)")
LABEL_VALUE = re.compile(_LABEL_VALUE)  # apimachinery IsValidLabelValue (docs/FACTS.md)
ClusterName = _matching(_DNS_LABEL, "a name of lowercase letters, digits and hyphens (at most 63)")
NonEmpty = Annotated[str, Field(min_length=1)]

_TAINT = re.compile(rf"^(?P<key>{_LABEL_KEY})(=(?P<value>{_LABEL_VALUE}))?:(?P<effect>\w+)$")


def _parse_taint(value: Any) -> Any:
    if isinstance(value, Taint):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("taint", "must be a string key=value:Effect")
    match = _TAINT.match(value)
    if not match:
        raise PydanticCustomError(
            "taint",
            "{value} is not a taint; write key=value:Effect, e.g. dedicated=ml:NoSchedule",
            {"value": shown(value)},
        )
    if match["effect"] not in TAINT_EFFECTS:
        raise PydanticCustomError(
            "taint",
            "{value} has effect {effect}; allowed: {allowed}",
            {
                "value": shown(value),
                "effect": cut(match["effect"]),
                "allowed": ", ".join(TAINT_EFFECTS),
            },
        )
    return Taint(match["key"], match["value"] or "", match["effect"])


TaintSpec = Annotated[
    Taint,
    BeforeValidator(_parse_taint),
    WithJsonSchema(
        {"type": "string", "pattern": r"^[^=:\s]+(=[^:\s]*)?:(NoSchedule|PreferNoSchedule|NoExecute)$"}
    ),
]


class Spec(BaseModel):
    """Fleet-file models: camelCase keys, no unknown keys, no silent type coercion."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class Nodes(Spec):
    """Autoscaling bounds {min, max}, or a fixed {count}."""

    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=1)
    count: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _one_form(self) -> Nodes:
        bounds = (self.min, self.max)
        if self.count is not None and bounds != (None, None):
            raise PydanticCustomError("nodes", "give either {min, max} or {count}, not both")
        if self.count is None and None in bounds:
            raise PydanticCustomError("nodes", "give both min and max (autoscaling) or count (fixed size)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise PydanticCustomError(
                "nodes", "min ({min}) is greater than max ({max})", {"min": self.min, "max": self.max}
            )
        return self

    @property
    def scaling(self) -> Scaling:
        if self.count is not None:
            return Scaling.fixed(self.count)
        return Scaling(self.min or 0, self.max or 0, autoscaling=True)


class GpuSpec(Spec):
    mig: str | None = Field(None, description="MIG profile every GPU is partitioned into, e.g. 1g.10gb")
    sharing: Sharing = "exclusive"
    replicas: int | None = Field(
        None, description="with time-slicing or mps: clients per GPU (or per MIG instance)"
    )
    count: int | None = Field(
        None, description="GPUs per node, where the pool chooses it (GKE N1 machines, edge pools)"
    )
    model: str | None = Field(
        None,
        description="the GPU model of an edge pool's machines, e.g. T4 (cloud pools: the instance type's)",
    )
    isolation: Isolation | None = Field(
        None, description="with sharing: memory, what the sharing enforces: none, memory or compute"
    )
    placement: Literal["binpack", "spread"] | None = Field(
        None, description="with sharing: memory, how pods are spread over a node's GPUs"
    )
    allocation: Literal["device-plugin", "dra"] = Field(
        "device-plugin",
        description="how pods get the GPUs: the device plugin's extended resources, or Dynamic "
        "Resource Allocation claims (resource.k8s.io/v1, Kubernetes 1.34+)",
    )
    dra_feature_gates: list[NonEmpty] = Field(
        [],
        description="with allocation: dra, the NVIDIA DRA driver's alpha feature gates this pool's "
        "sharing may turn on (TimeSlicingSettings, MPSSupport)",
    )

    @model_validator(mode="after")
    def _settings_that_go_together(self) -> GpuSpec:
        counted = self.sharing in ("time-slicing", "mps")
        if not counted and self.replicas is not None:
            raise PydanticCustomError(
                "replicas",
                "replicas applies only with sharing: time-slicing or mps (sharing is {sharing})",
                {"sharing": self.sharing},
            )
        if counted and self.replicas is None:
            raise PydanticCustomError(
                "replicas", "sharing: {sharing} needs replicas (clients per GPU)", {"sharing": self.sharing}
            )
        if self.sharing == "memory" and self.isolation is None:
            raise PydanticCustomError(
                "isolation", "sharing: memory needs isolation: none, memory or compute (what is enforced)"
            )
        if self.sharing != "memory" and (self.isolation or self.placement):
            raise PydanticCustomError("isolation", "isolation and placement apply only with sharing: memory")
        if self.dra_feature_gates and self.allocation != "dra":
            raise PydanticCustomError("draFeatureGates", "draFeatureGates applies only with allocation: dra")
        return self


class Pool(Spec):
    """A node pool. Cloud pools need instanceType and nodes; an edge pool (edge: true) has neither:
    its nodes are the user's own machines, so the GPU is named by gpu.model and gpu.count (the
    compiler checks which a pool needs, and which clouds have edge pools)."""

    name: NonEmpty
    instance_type: NonEmpty | None = None
    gpu: GpuSpec = GpuSpec()
    nodes: Nodes | None = Field(None, description="the whole pool's nodes, on every cloud")
    zones: Annotated[list[NonEmpty], Field(min_length=1)] | None = Field(
        None, description="the zones its nodes run in (GKE node locations, AKS availability zones)"
    )
    edge: bool = False
    spot: bool = False
    disk_size_gb: int | None = Field(None, ge=1)
    labels: dict[LabelKey, LabelValue] = {}
    taints: list[TaintSpec] = []
    replace: Literal["create-first", "delete-first"] = Field(
        "create-first",
        description="how a change the cloud cannot make in place is carried out: create-first makes the "
        "new pool beside the old, then drains and deletes the old; delete-first deletes first (quota for "
        "one pool only; the pool has no nodes meanwhile)",
    )
    adopt: bool = Field(
        False,
        description="take over the pool of this name that provisioner did not create (plan: adopt); "
        "inert once provisioner owns it",
    )

    _loc: Loc = PrivateAttr(())


class _ClusterSpec(Spec):
    """A cluster entry; `ref` is how drivers are told which cluster it is."""

    name: ClusterName
    pools: list[Pool] = []
    kube_context: NonEmpty | None = Field(None, description="kubeconfig context of this cluster's API")

    _loc: Loc = PrivateAttr(())
    _complete: bool = PrivateAttr(True)  # as SalvagedCluster's: its own fields are valid
    # The field that names the cluster in its cloud (ACK names it by ID).
    identity_field: ClassVar[str] = "cluster"
    identity_note: ClassVar[str] = ""  # how the cloud tells clusters apart, where it is not plain

    @property
    def ref(self) -> ClusterRef:
        raise NotImplementedError

    @property
    def zone_region(self) -> str:
        """The region its pools' zones lie in, where a zone's name says ("" elsewhere)."""
        return ""


class AksCluster(_ClusterSpec):
    cloud: Literal["aks"]
    # Every identifier here goes into the ARM resource path .../resourceGroups/{g}/.../managedClusters/{c}.
    # managedClusters resourceName: 1-63, ^[a-zA-Z0-9]$|^[a-zA-Z0-9][-_a-zA-Z0-9]{0,61}[a-zA-Z0-9]$
    # (azure-rest-api-specs managedClusters.json; the SDK's URL serializer checks the same).
    cluster: _matching(
        r"[a-zA-Z0-9]([-_a-zA-Z0-9]{0,61}[a-zA-Z0-9])?",
        "an AKS cluster name (1-63 letters, digits, - and _, starting and ending with a letter or digit)",
    )
    subscription: _matching(
        r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", "a subscription ID (a UUID)"
    )
    resource_group: _matching(r"[-\w.()]{0,89}[-\w()]", "a resource group name")

    @property
    def ref(self) -> ClusterRef:
        # ARM compares subscription IDs and resource group names without case.
        return ClusterRef("aks", self.subscription.lower(), self.resource_group.lower(), self.cluster)


class GkeCluster(_ClusterSpec):
    cloud: Literal["gke"]
    # projects/{project}/locations/{location}/clusters/{cluster}: GKE cluster names start with a
    # lowercase letter, then lowercase letters, digits and hyphens, not ending with a hyphen, at
    # most 40 characters (Cloud console and gcloud's rule for `clusters create`).
    cluster: _matching(
        r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?",
        "a GKE cluster name (1-40 lowercase letters, digits and hyphens, starting with a letter, "
        "not ending with a hyphen)",
    )
    project: _matching(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", "a Google Cloud project ID")
    location: _matching(r"[a-z]+-[a-z]+\d+(-[a-z])?", "a region or zone, e.g. us-central1 or us-central1-a")

    @property
    def ref(self) -> ClusterRef:
        return ClusterRef("gke", self.project, self.location, self.cluster)

    @property
    def _zonal(self) -> bool:
        return self.location.count("-") == 2  # us-central1-a is a zone, us-central1 a region

    @property
    def zone_region(self) -> str:
        return self.location.rsplit("-", 1)[0] if self._zonal else self.location


class EksCluster(_ClusterSpec):
    cloud: Literal["eks"]
    # /clusters/{name}/node-groups: botocore eks 2017-11-01 service-2.json, shape ClusterName:
    # min 1, max 100, pattern ^[0-9A-Za-z][A-Za-z0-9\-_]* (the CreateCluster API reference says so too).
    cluster: _matching(
        r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}",
        "an EKS cluster name (1-100 letters, digits, - and _, starting with a letter or digit)",
    )
    region: _matching(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d+", "an AWS region, e.g. us-east-1")
    node_role: _matching(r"arn:aws[-a-z]*:iam::\d{12}:role/[\w+=,.@/-]+", "an IAM role ARN")
    subnets: Annotated[
        list[_matching(r"subnet-[0-9a-f]{8,17}", "a subnet ID (subnet-...)")], Field(min_length=1)
    ]

    identity_note: ClassVar[str] = (
        "EKS reaches a cluster by region and name in the credentials' account; "
        "a node role's account does not choose it"
    )

    @property
    def ref(self) -> ClusterRef:
        # The fleet does not name the AWS account: the credentials choose it, so two entries with
        # one region and name are one cluster whatever account their node roles are in.
        extras = {"node_role": self.node_role, "subnets": tuple(self.subnets)}
        return ClusterRef("eks", "", self.region, self.cluster, extras)


class AckCluster(_ClusterSpec):
    cloud: Literal["ack"]
    # /clusters/{ClusterId}/nodepools: the CS API takes the cluster's ID, c + 32 hex digits as
    # the console and DescribeClustersV1 show it (CS API 2015-12-15 examples).
    cluster_id: _matching(r"c[0-9a-f]{32}", "an ACK cluster ID (c and 32 hexadecimal digits)")
    region: _matching(r"[a-z]{2}(-[a-z]+)+(-\d+)?", "an Alibaba Cloud region ID, e.g. cn-hangzhou")
    # Cloud (ECS) node pools need at least one; edge pools take none (CreateClusterNodePool:
    # scaling_group.vswitch_ids, 1 to 8).
    vswitches: list[_matching(r"vsw-[0-9a-z]{1,64}", "a vSwitch ID (vsw-...)")] = []

    identity_field: ClassVar[str] = "cluster_id"

    @property
    def ref(self) -> ClusterRef:
        # The fleet does not name the Alibaba Cloud account: the credentials choose it.
        return ClusterRef("ack", "", self.region, self.cluster_id, {"vswitches": tuple(self.vswitches)})


Cluster = Annotated[
    Union[AksCluster, GkeCluster, EksCluster, AckCluster],  # noqa: UP007
    Field(discriminator="cloud"),
]
# The cluster model of each cloud tag, read off the Cluster union so a new cloud is added once.
_CLUSTER_MODELS: dict[str, type[_ClusterSpec]] = {
    get_args(model.model_fields["cloud"].annotation)[0]: model for model in get_args(get_args(Cluster)[0])
}
CLOUDS = tuple(_CLUSTER_MODELS)  # in the union's order, which is the order errors list them


class Fleet(Spec):
    clusters: Annotated[list[Cluster], Field(min_length=1)]

    _source: SourceDocument | None = PrivateAttr(None)

    @property
    def source(self) -> SourceDocument:
        assert self._source is not None, "a Fleet built in code has no source file"
        return self._source


_CLUSTER = TypeAdapter(Cluster)


def parse(path: str | Path, text: str | None = None) -> tuple[Fleet | SalvagedFleet, list[Diagnostic]]:
    """The fleet in `path` (or `text`, read from `path` before) and every structural problem in it.

    Where the file has problems, the fleet holds the clusters and pools that are themselves
    valid, so the compiler can still report the cloud-rule problems of those.
    """
    doc = SourceDocument.read(path) if text is None else SourceDocument.parse(text, str(path))
    try:
        fleet = Fleet.model_validate(doc.data)
        problems: list[Diagnostic] = []
        for ci, cluster in enumerate(fleet.clusters):
            cluster._loc = ("clusters", ci)
            for pi, pool in enumerate(cluster.pools):
                pool._loc = ("clusters", ci, "pools", pi)
    except ValidationError as exc:
        if not isinstance(doc.data, dict):
            raise FleetError([doc.diagnostic((), "expected a mapping with a clusters: list")]) from exc
        problems = [_diagnostic(doc, error) for error in exc.errors()]
        fleet = _valid_parts(doc.data)
    fleet._source = doc
    problems += [doc.diagnostic(loc, message) for loc, message in _duplicates(doc.data, fleet)]
    return fleet, problems


def load(path: str | Path, text: str | None = None) -> Fleet:
    """The fleet in `path`; FleetError lists every structural problem."""
    fleet, problems = parse(path, text)
    if problems:
        raise FleetError(problems)
    assert isinstance(fleet, Fleet)  # only a file with problems is salvaged
    return fleet


@dataclass
class SalvagedCluster:
    """A cluster entry whose own fields are invalid, but whose cloud is known: its valid pools,
    so that their cloud rules are checked (and reported) in the same run."""

    name: Any
    cloud: str
    pools: list[Pool]
    _loc: Loc = ()
    _complete: bool = False
    zone_region: str = ""  # its location is not known to be valid


@dataclass
class SalvagedFleet:
    """The parts of a fleet file with problems that are valid on their own: enough to report
    every problem at once, never enough to plan from."""

    clusters: list[Any]
    _source: SourceDocument | None = None

    @property
    def source(self) -> SourceDocument:
        assert self._source is not None
        return self._source


def _valid_parts(data: Any) -> SalvagedFleet:
    """The clusters and pools of `data` that are valid on their own. A cluster whose own fields
    are invalid but whose cloud is known still carries its valid pools (SalvagedCluster)."""
    clusters = []
    for ci, raw in _items(data, "clusters"):
        try:
            cluster = _CLUSTER.validate_python({**raw, "pools": []})
        except ValidationError:
            cloud = raw.get("cloud")
            if not isinstance(cloud, str) or cloud not in _CLUSTER_MODELS:
                continue
            cluster = SalvagedCluster(raw.get("name"), cloud, [])
        pools = []
        for pi, raw_pool in _items(raw, "pools"):
            try:
                pool = Pool.model_validate(raw_pool)
            except ValidationError:
                continue
            pool._loc = ("clusters", ci, "pools", pi)
            pools.append(pool)
        if isinstance(cluster, SalvagedCluster):
            cluster.pools = pools
        else:
            cluster = cluster.model_copy(update={"pools": pools})  # its pools, each validated above
        cluster._loc = ("clusters", ci)
        clusters.append(cluster)
    return SalvagedFleet(clusters)


def _items(data: Any, key: str) -> list[tuple[int, dict[str, Any]]]:
    """The mappings in the list `data[key]`, with their indexes; nothing where it is no list."""
    items = data.get(key) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [(i, item) for i, item in enumerate(items) if isinstance(item, dict)]


def _duplicates(data: Any, fleet: Fleet) -> list[tuple[Loc, str]]:
    """Names used twice, read from the raw file so that even invalid entries count."""
    problems: list[tuple[Loc, str]] = []
    cluster_names: set[str] = set()
    for ci, raw in _items(data, "clusters"):
        name = raw.get("name")
        if not isinstance(name, str):
            continue  # reported as a structural problem already
        if name in cluster_names:
            problems.append(
                (
                    ("clusters", ci, "name"),
                    f"duplicate cluster name {shown(name)}; names are unique in a fleet",
                )
            )
        cluster_names.add(name)
        pool_names: set[str] = set()
        for pi, raw_pool in _items(raw, "pools"):
            pool_name = raw_pool.get("name")
            if not isinstance(pool_name, str):
                continue
            if pool_name in pool_names:
                problems.append(
                    (
                        ("clusters", ci, "pools", pi, "name"),
                        f"duplicate pool name {shown(pool_name)} in this cluster",
                    )
                )
            pool_names.add(pool_name)
    targets: dict[tuple[str, ...], Any] = {}
    for cluster in fleet.clusters:
        if not cluster._complete:
            continue
        first = targets.setdefault(cluster.ref.key, cluster)
        if first is not cluster:
            problems.append(
                (
                    (*cluster._loc, to_camel(cluster.identity_field)),
                    f"{cluster.ref.name!r} is the same cluster as clusters[{first.name}]"
                    + (f" ({cluster.identity_note})" if cluster.identity_note else "")
                    + "; two entries would fight over its pools",
                )
            )
    return problems


# --- pydantic errors as fleet-file messages -------------------------------------------------


def _diagnostic(doc: SourceDocument, error: ErrorDetails) -> Diagnostic:
    loc, kind, ctx = tuple(error["loc"]), error["type"], error.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = ctx.get("tag")
        given = f"{shown(tag)} is not a supported cloud; " if tag is not None else "is required; "
        return doc.diagnostic((*loc, "cloud"), f"{given}one of: {', '.join(CLOUDS)}")
    # The cluster union puts its tag after the cluster's index: ('clusters', 0, 'aks', ...).
    in_file = loc[:2] + loc[3:] if len(loc) > 2 and loc[0] == "clusters" else loc
    return doc.diagnostic(in_file, _message(loc, kind, error))


def _message(loc: Loc, kind: str, error: ErrorDetails) -> str:
    ctx, value = error.get("ctx") or {}, error.get("input")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        hint = difflib.get_close_matches(str(loc[-1])[:100], allowed, n=1)
        did_you_mean = f"did you mean {hint[0]}? " if hint else ""
        return f"unknown field; {did_you_mean}allowed: {', '.join(allowed)}"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        expected = ctx.get("expected", "").replace("'", "").replace(" or ", ", ")
        return f"{shown(value)} is not allowed; one of: {expected}"
    if kind.startswith("too_short") and isinstance(value, list | dict):
        return "must not be empty"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"must be a mapping (got {shown(value)})"
    message = error["msg"]
    for generic, plain in (
        ("Input should be", "must be"),
        ("String should", "must"),
        ("List should", "must"),
        ("Value should", "must"),
    ):
        message = message.replace(generic, plain)
    bound = kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than")
    if bound or (kind.endswith("_type") and not isinstance(value, dict | list)):
        message += f" (got {shown(value)})"
    return message


def _allowed_keys(loc: Loc) -> list[str]:
    """The keys the model at `loc` accepts, in its declared order."""
    model = _model_at(Fleet, loc)
    if model is None:
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def _model_at(annotation: Any, loc: Loc) -> type[BaseModel] | None:
    for step in loc:
        annotation = _unwrap(annotation, step)
        if annotation is None:
            return None
    annotation = _unwrap(annotation, None)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _unwrap(annotation: Any, step: str | int | None) -> Any:
    """Follow one step of a validation loc through a type annotation."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [m for m in get_args(annotation) if m is not type(None)]
        if step is None:
            return members[0] if len(members) == 1 else None
        for member in members:  # a tagged union: the step is the tag
            cloud = getattr(member, "model_fields", {}).get("cloud")
            if cloud is not None and step in get_args(cloud.annotation):
                return member
        return _unwrap(members[0], step) if len(members) == 1 else None
    if step is None:
        return annotation
    if origin is list and isinstance(step, int):
        return get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            if step in (name, field.alias):
                return field.annotation
    return None
