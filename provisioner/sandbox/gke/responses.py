"""The GKE emulator's wire glue: the v1 REST API as google-cloud-container's REST transport speaks it.

Proto3 JSON: camelCase names, enums by name unless the client asks for integers with
`$alt=json;enum-encoding=int` (google-cloud-container's REST transport does; gcloud does not, and
reads names: "status": "RUNNING"), int64 as strings, fields at their default value left out.
Errors are Google's `{"error": {"code", "message", "status"}}`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.sandbox.engine import BackendDict, Engine, Operation
from provisioner.sandbox.gke.exceptions import InvalidArgument, NotFound, ResourceExhausted, Unavailable
from provisioner.sandbox.gke.models import Accelerator, Autoscaling, GkeBackend, NodePool
from provisioner.sandbox.gke.urls import ROUTES
from provisioner.sandbox.wire import ApiError, EmulatorApp, WireErrors, json_response, request_json

# Enum numbers from google/container/v1/cluster_service.proto.
TAINT_EFFECT = {"NO_SCHEDULE": 1, "PREFER_NO_SCHEDULE": 2, "NO_EXECUTE": 3}
SHARING_STRATEGY = {"TIME_SHARING": 1, "MPS": 2}
DRIVER_VERSION = {"INSTALLATION_DISABLED": 1, "DEFAULT": 2, "LATEST": 3}
POOL_STATUS = {"PROVISIONING": 1, "RUNNING": 2, "RECONCILING": 4, "STOPPING": 5, "ERROR": 6}
OPERATION_TYPES = {"CREATE_NODE_POOL": 7, "DELETE_NODE_POOL": 8, "UPGRADE_NODES": 4}
OPERATION_TYPE_NAMES = {"create": "CREATE_NODE_POOL", "delete": "DELETE_NODE_POOL", "update": "UPGRADE_NODES"}
OPERATION_STATUS = {"RUNNING": 2, "DONE": 3}
CLUSTER_STATUS = {"RUNNING": 2}
LOCATION_POLICY = {"BALANCED": 1, "ANY": 2}


def _int_enums(request: Request) -> bool:
    """Whether the client asked for enums as numbers (System parameters, `$alt`: json;enum-encoding=int)."""
    return "enum-encoding=int" in request.args.get("$alt", "")


def _enum_out(table: dict[str, int], name: str | None, ints: bool) -> int | str | None:
    """An enum value in the spelling the client asked for; None (left out) where unset."""
    if not name:
        return None
    return table[name] if ints else name


def app(engine: Engine, backends: BackendDict[GkeBackend], latency: float = 0.0) -> EmulatorApp:
    handlers = GkeHandlers(engine, backends)
    return EmulatorApp(
        engine,
        routes=ROUTES,
        handlers={rule.endpoint: getattr(handlers, rule.endpoint) for rule in ROUTES.iter_rules()},
        render_error=render_error,
        errors=WireErrors(
            malformed=InvalidArgument,
            no_route=lambda what: NotFound(f"Not found: {what}."),
            faults={
                429: lambda: ResourceExhausted("Quota exceeded for quota metric 'Requests'."),
                503: lambda: Unavailable("The service is currently unavailable."),
            },
        ),
        latency=latency,
    )


def render_error(error: ApiError) -> Response:
    headers = {"Retry-After": f"{error.retry_after:g}"} if error.retry_after is not None else None
    body = {"error": {"code": error.status, "message": error.message, "status": error.code}}
    return json_response(body, error.status, headers)


class GkeHandlers:
    def __init__(self, engine: Engine, backends: BackendDict[GkeBackend]):
        self.engine = engine
        self.backends = backends

    def list_clusters(self, request: Request, project: str, location: str) -> Response:
        """`-` as the location lists every location's clusters (ListClustersRequest.parent)."""
        if location == "-":
            backends = list(self.backends[project].values())
        else:
            backends = [self.backends[project][location]]
        ints = _int_enums(request)
        clusters = [
            encode_cluster(backend, key.rsplit("/", 1)[1], ints)
            for backend in backends
            for key in sorted(backend.clusters())
        ]
        return json_response({"clusters": sorted(clusters, key=lambda c: c["selfLink"])} if clusters else {})

    def get_cluster(self, request: Request, project: str, location: str, cluster: str) -> Response:
        return json_response(encode_cluster(self.backends[project][location], cluster, _int_enums(request)))

    def list_pools(self, request: Request, project: str, location: str, cluster: str) -> Response:
        backend = self.backends[project][location]
        ints = _int_enums(request)
        pools = [encode_pool(backend.cluster_key(cluster), p, ints) for p in backend.list_pools(cluster)]
        return json_response({"nodePools": pools} if pools else {})

    def get_pool(self, request: Request, project: str, location: str, cluster: str, pool: str) -> Response:
        backend = self.backends[project][location]
        found = backend.get_pool(cluster, pool)
        return json_response(encode_pool(backend.cluster_key(cluster), found, _int_enums(request)))

    def create_pool(self, request: Request, project: str, location: str, cluster: str) -> Response:
        body = request_json(request)
        if "nodePool" not in body:
            raise InvalidArgument("nodePool is required.")
        backend = self.backends[project][location]
        return self._operation(request, backend.create_pool(cluster, decode_pool(body["nodePool"])))

    def update_pool(self, request: Request, project: str, location: str, cluster: str, pool: str) -> Response:
        backend = self.backends[project][location]
        return self._operation(
            request, backend.update_pool(cluster, pool, decode_update(request_json(request)))
        )

    def set_autoscaling(
        self, request: Request, project: str, location: str, cluster: str, pool: str
    ) -> Response:
        autoscaling = decode_autoscaling(request_json(request).get("autoscaling", {}))
        return self._operation(
            request, self.backends[project][location].set_autoscaling(cluster, pool, autoscaling)
        )

    def set_size(self, request: Request, project: str, location: str, cluster: str, pool: str) -> Response:
        node_count = _int(request_json(request).get("nodeCount", 0), "nodeCount")
        return self._operation(request, self.backends[project][location].set_size(cluster, pool, node_count))

    def delete_pool(self, request: Request, project: str, location: str, cluster: str, pool: str) -> Response:
        return self._operation(request, self.backends[project][location].delete_pool(cluster, pool))

    def get_operation(self, request: Request, project: str, location: str, operation: str) -> Response:
        return self._operation(request, self.backends[project][location].get_operation(operation))

    def _operation(self, request: Request, operation: Operation) -> Response:
        return json_response(encode_operation(self.engine, operation, _int_enums(request)))


def _link(path: str) -> str:
    return f"https://container.googleapis.com/v1/{path}"


def encode_cluster(backend: GkeBackend, cluster: str, ints: bool) -> dict[str, Any]:
    """A Cluster as clusters.get and clusters.list give it: the fields placement and the users'
    tools read (Cluster reference: locations, "the zones in which the cluster's nodes should be
    located"; currentNodeCount, the nodes of all its pools), and its pools."""
    key = backend.cluster_key(cluster)
    pools = backend.list_pools(cluster)
    body = {
        "name": cluster,
        "location": backend.location,
        "zone": backend.location,
        "locations": list(backend.cluster_locations(cluster)),
        "status": _enum_out(CLUSTER_STATUS, "RUNNING", ints),
        # Its pools' nodes run the control plane's version: no pool here is upgraded on its own.
        "currentMasterVersion": backend.master_version(cluster),
        "currentNodeVersion": backend.master_version(cluster),
        "currentNodeCount": sum(p.node_count * len(p.locations) for p in pools),
        "selfLink": _link(key),
        "nodePools": [encode_pool(key, p, ints) for p in pools],
    }
    return _omit_defaults(body)


def encode_operation(engine: Engine, operation: Operation, ints: bool = True) -> dict[str, Any]:
    """An Operation as operations.get returns it; startTime and endTime (once DONE) are RFC 3339
    (container v1 Operation reference: "[Output only] The time the operation started/completed")."""
    location = operation.cluster.split("/")[3]
    body = {
        "name": operation.id,
        "zone": location,
        "location": location,
        "operationType": _enum_out(OPERATION_TYPES, OPERATION_TYPE_NAMES[operation.kind], ints),
        "status": _enum_out(OPERATION_STATUS, "DONE" if operation.done else "RUNNING", ints),
        "selfLink": _link(f"{'/'.join(operation.cluster.split('/')[:4])}/operations/{operation.id}"),
        "targetLink": _link(f"{operation.cluster}/nodePools/{operation.pool}"),
        "startTime": _rfc3339(engine.wall(operation.started_at)),
    }
    if operation.done:
        body["endTime"] = _rfc3339(engine.wall(operation.done_at))
    return body


def _rfc3339(moment: datetime) -> str:
    """As GKE writes its times: UTC with a Z, fractional seconds (GKE gives nanoseconds)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def _omit_defaults(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v not in (None, "", 0, False, {}, [])}


def encode_pool(key: str, pool: NodePool, ints: bool = True) -> dict[str, Any]:
    accelerators = [
        _omit_defaults(
            {
                "acceleratorCount": str(a.count),  # int64
                "acceleratorType": a.type,
                "gpuPartitionSize": a.partition_size,
                "gpuSharingConfig": _omit_defaults(
                    {
                        "maxSharedClientsPerGpu": str(a.max_shared_clients) if a.max_shared_clients else None,
                        "gpuSharingStrategy": _enum_out(SHARING_STRATEGY, a.sharing_strategy, ints),
                    }
                ),
                "gpuDriverInstallationConfig": _omit_defaults(
                    {"gpuDriverVersion": _enum_out(DRIVER_VERSION, a.driver_version, ints)}
                ),
            }
        )
        for a in pool.accelerators
    ]
    config = _omit_defaults(
        {
            "machineType": pool.machine_type,
            "diskSizeGb": pool.disk_size_gb,
            "labels": pool.labels,
            "resourceLabels": pool.resource_labels,
            "accelerators": accelerators,
            "taints": [
                _omit_defaults({"key": k, "value": v, "effect": _enum_out(TAINT_EFFECT, e, ints)})
                for k, v, e in pool.taints
            ],
            "spot": pool.spot,
        }
    )
    scaling = pool.autoscaling
    autoscaling = _omit_defaults(
        {
            "enabled": scaling.enabled,
            "minNodeCount": scaling.min_nodes,
            "maxNodeCount": scaling.max_nodes,
            "totalMinNodeCount": scaling.total_min_nodes,
            "totalMaxNodeCount": scaling.total_max_nodes,
            "locationPolicy": _enum_out(LOCATION_POLICY, scaling.location_policy, ints),
        }
    )
    return _omit_defaults(
        {
            "name": pool.name,
            "config": config,
            "initialNodeCount": pool.node_count,
            "locations": list(pool.locations),
            "autoscaling": autoscaling,
            "status": _enum_out(POOL_STATUS, pool.status, ints),
            "selfLink": _link(f"{key}/nodePools/{pool.name}"),
        }
    )


# Requests: proto3 JSON parsers take enums by number or by name, and int64 as string or number.


def _enum(value: Any, names: dict[str, int], field: str) -> str:
    by_number = {number: name for name, number in names.items()}
    if value in names:
        return value
    if value in by_number:
        return by_number[value]
    if value in (0, None, ""):
        return ""
    raise InvalidArgument(f"Invalid value for {field}: {value!r}.")


def _int(value: Any, field: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"Invalid value for {field}: {value!r}.") from None


def _taints(raw: list[dict[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    return tuple(
        (t.get("key", ""), t.get("value", ""), _enum(t.get("effect"), TAINT_EFFECT, "taints.effect"))
        for t in raw
    )


def decode_autoscaling(raw: dict[str, Any]) -> Autoscaling:
    return Autoscaling(
        enabled=bool(raw.get("enabled", False)),
        min_nodes=_int(raw.get("minNodeCount", 0), "minNodeCount"),
        max_nodes=_int(raw.get("maxNodeCount", 0), "maxNodeCount"),
        total_min_nodes=_int(raw.get("totalMinNodeCount", 0), "totalMinNodeCount"),
        total_max_nodes=_int(raw.get("totalMaxNodeCount", 0), "totalMaxNodeCount"),
        location_policy=_enum(raw.get("locationPolicy"), LOCATION_POLICY, "locationPolicy"),
    )


def decode_pool(raw: dict[str, Any]) -> NodePool:
    config = raw.get("config", {})
    accelerators = []
    for a in config.get("accelerators", []):
        sharing = a.get("gpuSharingConfig", {})
        driver = a.get("gpuDriverInstallationConfig", {})
        accelerators.append(
            Accelerator(
                type=a.get("acceleratorType", ""),
                count=_int(a.get("acceleratorCount", 0), "acceleratorCount"),
                partition_size=a.get("gpuPartitionSize", ""),
                sharing_strategy=_enum(
                    sharing.get("gpuSharingStrategy"), SHARING_STRATEGY, "gpuSharingStrategy"
                ),
                max_shared_clients=_int(sharing.get("maxSharedClientsPerGpu", 0), "maxSharedClientsPerGpu"),
                driver_version=_enum(driver.get("gpuDriverVersion"), DRIVER_VERSION, "gpuDriverVersion"),
            )
        )
    return NodePool(
        name=raw.get("name", ""),
        machine_type=config.get("machineType", "e2-medium"),
        node_count=_int(raw.get("initialNodeCount", 0), "initialNodeCount"),
        locations=tuple(raw.get("locations", ())),
        disk_size_gb=_int(config.get("diskSizeGb", 0), "diskSizeGb"),
        spot=bool(config.get("spot", False)),
        labels=dict(config.get("labels", {})),
        resource_labels=dict(config.get("resourceLabels", {})),
        taints=_taints(config.get("taints", [])),
        accelerators=tuple(accelerators),
        autoscaling=decode_autoscaling(raw.get("autoscaling", {})),
    )


# UpdateNodePoolRequest fields (camelCase) -> NodePool fields; wrapper messages hold the value.
def decode_update(raw: dict[str, Any]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if "labels" in raw:
        changes["labels"] = dict(raw["labels"].get("labels", {}))
    if "resourceLabels" in raw:
        changes["resource_labels"] = dict(raw["resourceLabels"].get("labels", {}))
    if "taints" in raw:
        changes["taints"] = _taints(raw["taints"].get("taints", []))
    if "diskSizeGb" in raw:
        changes["disk_size_gb"] = _int(raw["diskSizeGb"], "diskSizeGb")
    if raw.get("locations"):  # empty: unchanged (UpdateNodePoolRequest.locations)
        changes["locations"] = tuple(raw["locations"])
    for fixed in ("machineType", "accelerators", "spot", "diskType"):
        if fixed in raw:
            changes[fixed] = raw[fixed]
    return changes
