"""The ACK emulator's wire glue: ROA JSON as alibabacloud-cs20151215 speaks it.

Bodies use the API's snake_case names (SDK models' to_map/from_map). Errors are
`{"code", "message", "requestId"}` with the HTTP status; throttling adds `x-acs-retry-after` in
milliseconds, which the SDK turns into ThrottlingException.retry_after (alibabacloud_tea_openapi
utils get_throttling_time_left). The SDK sends empty lists for every list field it was not
given (data_disks, tags, ...): an empty list here means "not given", except in
kubernetes_config, whose labels and taints the SDK always sends whole.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.sandbox.ack import exceptions as err
from provisioner.sandbox.ack.models import AckBackends, AutoScaling, Cluster, NodePool, Task
from provisioner.sandbox.ack.urls import ACTIONS, ROUTES
from provisioner.sandbox.engine import Engine
from provisioner.sandbox.wire import ApiError, EmulatorApp, WireErrors, json_response, request_json

API_VERSION = "2015-12-15"
SIGNATURE_PREFIX = "ACS3-HMAC-SHA256 Credential="  # the SDK's default signature (tea-openapi do_request)
_REQUEST_IDS = itertools.count(1)


def app(backends: AckBackends, latency: float = 0.0) -> EmulatorApp:
    handlers = AckHandlers(backends)
    return EmulatorApp(
        backends.engine,
        routes=ROUTES,
        handlers={
            rule.endpoint: _signed(ACTIONS[rule.endpoint], getattr(handlers, rule.endpoint))
            for rule in ROUTES.iter_rules()
        },
        render_error=render_error,
        errors=WireErrors(
            malformed=err.InvalidRequestContent,
            no_route=lambda what: err.NotFound(f"Specified api is not found: {what}."),
            faults={
                429: lambda: err.ThrottlingUser("Request was denied due to user flow control."),
                503: lambda: err.ServiceUnavailable(
                    "The request has failed due to a temporary failure of the server."
                ),
            },
        ),
        latency=latency,
    )


def _request_id() -> str:
    return f"{next(_REQUEST_IDS):08X}-ACK0-4000-8000-SANDBOX00000"


def render_error(error: ApiError) -> Response:
    headers = None
    if error.retry_after is not None:
        headers = {"x-acs-retry-after": str(max(1, round(error.retry_after * 1000)))}
    body = {"code": error.code, "message": error.message, "requestId": _request_id()}
    return json_response(body, error.status, headers)


def _signed(action: str, handler: Callable[..., Response]) -> Callable[..., Response]:
    """Refuse what the SDK never sends: no ACS3 signature, or another action's name."""

    def checked(request: Request, **args: Any) -> Response:
        if not request.headers.get("Authorization", "").startswith(SIGNATURE_PREFIX):
            raise err.IncompleteSignature(
                "The request signature does not conform to Alibaba Cloud standards."
            )
        sent = request.headers.get("x-acs-action")
        if sent != action or request.headers.get("x-acs-version") != API_VERSION:
            version = request.headers.get("x-acs-version")
            raise err.InvalidParameter(
                f"x-acs-action {sent!r} / x-acs-version {version!r} do not match "
                f"{request.method} {request.path} ({action}, {API_VERSION})."
            )
        return handler(request, **args)

    return checked


class AckHandlers:
    def __init__(self, backends: AckBackends):
        self.backends = backends

    def describe_clusters(self, request: Request) -> Response:
        region = request.args.get("region_id")
        page_size = _int(request.args.get("page_size", 10), "page_size")
        page_number = _int(request.args.get("page_number", 1), "page_number")
        if not 1 <= page_size <= 100 or page_number < 1:  # page_size: max 100 (SDK docstring)
            raise err.InvalidParameter("page_size must be 1 to 100 and page_number at least 1.")
        clusters = sorted(
            (cluster for backend in self.backends.all() for cluster in backend.clusters.values()),
            key=lambda c: c.cluster_id,
        )
        clusters = [c for c in clusters if region in (None, "", c.region_id)]
        page = clusters[(page_number - 1) * page_size : page_number * page_size]
        return json_response(
            {
                "clusters": [encode_cluster(c) for c in page],
                "page_info": {
                    "page_number": page_number,
                    "page_size": page_size,
                    "total_count": len(clusters),
                },
            }
        )

    def describe_cluster(self, request: Request, cluster_id: str) -> Response:
        return json_response(encode_cluster(self.backends.of_cluster(cluster_id).get_cluster(cluster_id)))

    def list_pools(self, request: Request, cluster_id: str) -> Response:
        backend = self.backends.of_cluster(cluster_id)
        pools = backend.list_pools(cluster_id, request.args.get("NodepoolName") or None)
        return json_response({"nodepools": [encode_pool(p) for p in pools]})

    def get_pool(self, request: Request, cluster_id: str, nodepool_id: str) -> Response:
        return json_response(
            encode_pool(self.backends.of_cluster(cluster_id).get_pool(cluster_id, nodepool_id))
        )

    def create_pool(self, request: Request, cluster_id: str) -> Response:
        backend = self.backends.of_cluster(cluster_id)
        task = backend.create_pool(cluster_id, decode_pool(request_json(request)))
        return json_response(
            {"nodepool_id": task.nodepool_id, "task_id": task.task_id, "request_id": _request_id()}
        )

    def modify_pool(self, request: Request, cluster_id: str, nodepool_id: str) -> Response:
        backend = self.backends.of_cluster(cluster_id)
        current = backend.get_pool(cluster_id, nodepool_id)
        task = backend.modify_pool(cluster_id, nodepool_id, decode_changes(request_json(request), current))
        return json_response(
            {"nodepool_id": nodepool_id, "task_id": task.task_id, "request_id": _request_id()}
        )

    def delete_pool(self, request: Request, cluster_id: str, nodepool_id: str) -> Response:
        # The Python SDK sends str(True): "True"; other clients send "true".
        force = request.args.get("force", "false").lower() == "true"
        task = self.backends.of_cluster(cluster_id).delete_pool(cluster_id, nodepool_id, force)
        return json_response({"task_id": task.task_id, "request_id": _request_id()})

    def describe_task(self, request: Request, task_id: str) -> Response:
        return json_response(encode_task(self.backends.engine, self.backends.of_task(task_id)))


def encode_cluster(cluster: Cluster) -> dict[str, Any]:
    """A cluster as DescribeClusterDetail and DescribeClustersV1 give it (the fields the SDK's
    response models name; the sandbox never upgrades a cluster, so init_version is current_version)."""
    return {
        "cluster_id": cluster.cluster_id,
        "name": cluster.name,
        "region_id": cluster.region_id,
        "cluster_type": "ManagedKubernetes",
        "profile": "Default",
        "state": "running",
        "init_version": cluster.current_version,
        "current_version": cluster.current_version,
    }


def encode_task(engine: Engine, task: Task) -> dict[str, Any]:
    """DescribeTaskInfo's body; `created` and `updated` (SDK DescribeTaskInfoResponseBody: when the
    task was created, when it was updated: its end, once it has one) in whole seconds, as ACK
    writes its times."""
    updated = task.started_at if task.ended_at is None else task.ended_at
    body: dict[str, Any] = {
        "task_id": task.task_id,
        "cluster_id": task.cluster_id,
        "task_type": task.task_type,
        "state": task.state,
        "target": {"id": task.nodepool_id, "type": "nodepool"},
        "created": engine.wall(task.started_at).isoformat(timespec="seconds"),
        "updated": engine.wall(updated).isoformat(timespec="seconds"),
    }
    if task.error:
        body["error"] = {"code": "TaskFailed", "message": task.error}
    return body


def encode_pool(pool: NodePool) -> dict[str, Any]:
    scaling = pool.auto_scaling
    total = pool.total_nodes
    return {
        "nodepool_info": {
            "nodepool_id": pool.nodepool_id,
            "name": pool.name,
            "type": pool.type,
            "is_default": pool.is_default,
            "region_id": pool.region_id,
            "resource_group_id": "",
            "created": pool.created,
        },
        "status": {
            "state": pool.state,
            "total_nodes": total,
            "healthy_nodes": total,
            "serving_nodes": total,
            "failed_nodes": 0,
            "offline_nodes": 0,
            "removing_nodes": 0,
            "initial_nodes": 0,
        },
        "scaling_group": {
            "scaling_group_id": f"asg-{pool.nodepool_id[-12:]}",
            "instance_types": list(pool.instance_types),
            "vswitch_ids": list(pool.vswitch_ids),
            "desired_size": pool.desired_size,
            "system_disk_size": pool.system_disk_size,
            "system_disk_category": pool.system_disk_category,
            "spot_strategy": pool.spot_strategy,
            "instance_charge_type": pool.instance_charge_type,
            "tags": [{"key": k, "value": v} for k, v in pool.tags],
        },
        "kubernetes_config": {
            "labels": [{"key": k, "value": v} for k, v in pool.labels],
            "taints": [{"key": k, "value": v, "effect": e} for k, v, e in pool.taints],
            "runtime": pool.runtime,
            "cpu_policy": "none",
        },
        "auto_scaling": {
            "enable": scaling.enable,
            "min_instances": scaling.min_instances,
            "max_instances": scaling.max_instances,
            "type": scaling.type,
        },
    }


# Requests


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise err.InvalidParameter(f"{name} must be an integer, not {value!r}.")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise err.InvalidParameter(f"{name} must be an integer, not {value!r}.") from None


def _object(body: dict[str, Any], name: str) -> dict[str, Any]:
    value = body.get(name) or {}
    if not isinstance(value, dict):
        raise err.InvalidParameter(f"{name} must be an object.")
    return value


def _strings(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise err.InvalidParameter(f"{name} must be a list of strings.")
    return tuple(value)


def _pairs(value: Any, name: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise err.InvalidParameter(f"{name} must be a list of {{key, value}} objects.")
    return tuple((str(v.get("key") or ""), str(v.get("value") or "")) for v in value)


def _taints(value: Any) -> tuple[tuple[str, str, str], ...]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise err.InvalidParameter("kubernetes_config.taints must be a list of {key, value, effect} objects.")
    # effect defaults to NoSchedule (SDK models/_taint.py)
    return tuple(
        (str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
        for t in value
    )


def _auto_scaling(raw: dict[str, Any], base: AutoScaling) -> AutoScaling:
    return AutoScaling(
        enable=bool(raw.get("enable", base.enable)),
        min_instances=_int(raw.get("min_instances", base.min_instances), "auto_scaling.min_instances"),
        max_instances=_int(raw.get("max_instances", base.max_instances), "auto_scaling.max_instances"),
        type=str(raw.get("type", base.type)),
    )


def _scaling_group_fields(group: dict[str, Any]) -> dict[str, Any]:
    """The scaling_group fields given (empty lists are the SDK's "not given")."""
    fields: dict[str, Any] = {}
    for name in ("instance_types", "vswitch_ids"):
        if group.get(name):
            fields[name] = _strings(group[name], f"scaling_group.{name}")
    if group.get("tags"):
        fields["tags"] = _pairs(group["tags"], "scaling_group.tags")
    for name in ("desired_size", "system_disk_size"):
        if group.get(name) is not None:
            fields[name] = _int(group[name], f"scaling_group.{name}")
    for name in ("system_disk_category", "spot_strategy", "instance_charge_type"):
        if group.get(name) is not None:
            fields[name] = str(group[name])
    return fields


def decode_pool(body: dict[str, Any]) -> NodePool:
    info = _object(body, "nodepool_info")
    if not info.get("name"):
        raise err.InvalidParameter("nodepool_info.name is required.")
    config = _object(body, "kubernetes_config")
    pool = NodePool(
        nodepool_id="",
        name=str(info["name"]),
        type=str(info.get("type") or "ess"),
        region_id="",
        labels=_pairs(config.get("labels") or [], "kubernetes_config.labels"),
        taints=_taints(config.get("taints") or []),
        runtime=str(config.get("runtime") or "containerd"),
        auto_scaling=_auto_scaling(_object(body, "auto_scaling"), AutoScaling()),
    )
    return replace(pool, **_scaling_group_fields(_object(body, "scaling_group")))


def decode_changes(body: dict[str, Any], current: NodePool) -> dict[str, Any]:
    """ModifyClusterNodePool's body as NodePool fields to change."""
    changes: dict[str, Any] = {}
    info = _object(body, "nodepool_info")
    if info.get("name"):
        changes["name"] = str(info["name"])
    changes.update(_scaling_group_fields(_object(body, "scaling_group")))
    if "kubernetes_config" in body:
        config = _object(body, "kubernetes_config")
        changes["labels"] = _pairs(config.get("labels") or [], "kubernetes_config.labels")
        changes["taints"] = _taints(config.get("taints") or [])
    if body.get("auto_scaling"):
        changes["auto_scaling"] = _auto_scaling(_object(body, "auto_scaling"), current.auto_scaling)
    return changes
