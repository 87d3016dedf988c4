"""ACK node pools through alibabacloud-cs20151215 (CS API 2015-12-15, ROA JSON); credentials from
the Alibaba Cloud default chain (environment, OIDC role, CLI profile, credentials file, ECS RAM
role), as alibabacloud_credentials' Client() resolves it.

A ClusterRef for ACK: location = region, name = the cluster ID (c + 32 hex), account "" where
the fleet does not name one, extras["vswitches"] = the vSwitch IDs of new ECS pools.

Ownership is a node-pool label (OWNER_LABEL_KEY), not an ECS tag: ACK Edge pools have no ECS
instances to carry one (SDK ScalingGroup.tags: "Adds tags only to ECS instances"). ECS pools get
the tag too. The label is stripped from what the driver returns, so desired == observed. A
replacement's pool (generation > 1) carries its generation the same way, in a node-pool label
stripped on read (GENERATION_LABEL_KEY); its fleet pool's name is the POOL_NODE_LABEL its nodes
carry, which stays among its labels.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from provisioner import hardware
from provisioner.autoscaler import hint_tags, read_hint_tags
from provisioner.clusters import ClusterRef, KubernetesVersion
from provisioner.drivers import (
    OPERATION_TIMEOUT,
    OperationTimes,
    reported_version,
    requests_at_once,
    seconds_between,
    wait_until,
)
from provisioner.drivers.generation import read_generation, starting_nodes
from provisioner.errors import (
    AuthenticationFailed,
    CloudError,
    ErrorCodes,
    InvalidRequest,
    NotFound,
    NotOwned,
    OperationFailed,
    Throttled,
    Unavailable,
    cloud_error,
)
from provisioner.hardware import AutoscalerHints
from provisioner.pools import (
    GENERATION_LABEL_KEY,
    OWNER_LABEL_KEY,
    OWNER_LABEL_VALUE,
    OWNER_TAG_KEY,
    OWNER_TAG_VALUE,
    POOL_NODE_LABEL,
    PoolState,
    PoolStatus,
    Scaling,
    Taint,
)
from provisioner.quotas import PACER, action_kind, quota_scope
from provisioner.sdks import import_sdk

# The pool labels the tool writes on ACK Edge pools to name the GPUs of machines it never sees.
EDGE_GPU_MODEL_LABEL = "gpu.provisioner.io/model"
EDGE_GPU_COUNT_LABEL = "gpu.provisioner.io/count"
CONNECT_TIMEOUT_MS, READ_TIMEOUT_MS = 5_000, 60_000  # per HTTP call
DESCRIBE_CLUSTERS_PAGE = 100  # DescribeClustersV1 page_size maximum (SDK docstring)
# status.state: active when idle; initial, scaling, removing, deleting, updating while an operation
# runs (SDK DescribeClusterNodePoolsResponseBodyNodepoolsStatus); failed as TF waits on it.
_STATUS: dict[str, PoolStatus] = {"active": "ready", "failed": "failed"}
SPOT_STRATEGIES = frozenset({"SpotWithPriceLimit", "SpotAsPriceGo"})
# ACK's codes (exceptions in sandbox/ack name their sources): not found per terraform-provider-
# alicloud; throttled per its NeedRetry (errors.go); the busy code is the sandbox's, UNCONFIRMED
# against ACK; auth: the SDK's own client-side code and Alibaba Cloud's common signature codes.
_CODES = ErrorCodes(
    busy=frozenset({"ErrorNodePoolStatusInvalid"}),
    throttled=frozenset({"Throttling", "Throttling.User", "Throttling.Api", "Rejected.Throttling"}),
    not_found=frozenset({"ErrorClusterNotFound", "ErrorNodePoolNotFound"}),
    auth=frozenset(
        {"InvalidCredentials", "InvalidAccessKeyId.NotFound", "SignatureDoesNotMatch", "Forbidden.RAM"}
    ),
)
_TASK_FAILED = ("fail", "failed")


class AckDriver:
    def __init__(self, endpoint: str | None = None, operation_timeout: float = OPERATION_TIMEOUT):
        self._endpoint = endpoint  # a sandbox's http://host:port; None: cs.<region>.aliyuncs.com
        self._operation_timeout = operation_timeout
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self._polling = hardware.load().clouds["ack"].polling
        self._times = OperationTimes()  # how long this cloud's tasks took, by type
        # As many kept connections as listings go out at once (darabonba keeps 40 by default).
        self._connections = requests_at_once("ack")
        # The credential chain logs each provider it tried, with a traceback; the typed error
        # (AuthenticationFailed) says it once, as azure-identity's is quieted in the AKS driver.
        logging.getLogger("alibabacloud_credentials").setLevel(logging.CRITICAL)
        import_sdk(
            "alibabacloud_cs20151215.client",
            "alibabacloud_cs20151215.models",
            "alibabacloud_tea_openapi.models",
            "alibabacloud_tea_openapi.exceptions",
            "alibabacloud_credentials.client",
            "alibabacloud_credentials.models",
            "alibabacloud_credentials.exceptions",
            "darabonba.runtime",
            "darabonba.exceptions",
        )

    # Driver protocol

    def prepare(self, clusters: Sequence[ClusterRef]) -> None:
        for one in {c.location: c for c in clusters}.values():  # a client a region
            self._client(one)

    def list_pools(self, cluster: ClusterRef) -> list[PoolState]:
        from alibabacloud_cs20151215 import models as cs

        body = self._call(
            cluster,
            "describe_cluster_node_pools_with_options",
            cluster.name,
            cs.DescribeClusterNodePoolsRequest(),
        )
        return [_observed(pool) for pool in body.get("nodepools") or []]

    def create_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        body = self._call(
            cluster, "create_cluster_node_pool_with_options", cluster.name, _create_request(cluster, desired)
        )
        what = f"creating node pool {desired.name}"
        self._wait_task(cluster, body.get("task_id"), "nodepool_create", what)
        return _observed(self._wait_settled(cluster, body["nodepool_id"], what))

    def update_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        raw = self._find(cluster, desired.name)
        current = _observed(raw)
        if not current.owned:
            raise NotOwned(f"node pool {desired.name} was not created by provisioner; not updating it")
        nodepool_id = raw["nodepool_info"]["nodepool_id"]
        request = _modify_request(current, desired, _ecs_tags(raw), _markers(raw))
        body = self._call(
            cluster, "modify_cluster_node_pool_with_options", cluster.name, nodepool_id, request
        )
        what = f"updating node pool {desired.name}"
        self._wait_task(cluster, body.get("task_id"), "nodepool_update", what)
        return _observed(self._wait_settled(cluster, nodepool_id, what))

    def adopt_pool(self, cluster: ClusterRef, name: str) -> PoolState:
        raw = self._find(cluster, name)
        current = _observed(raw)
        if current.owned:
            return current
        nodepool_id = raw["nodepool_info"]["nodepool_id"]
        body = self._call(
            cluster, "modify_cluster_node_pool_with_options", cluster.name, nodepool_id, _adopt_request(raw)
        )
        what = f"adopting node pool {name}"
        self._wait_task(cluster, body.get("task_id"), "nodepool_adopt", what)
        return _observed(self._wait_settled(cluster, nodepool_id, what))

    def delete_pool(self, cluster: ClusterRef, name: str) -> None:
        from alibabacloud_cs20151215 import models as cs

        raw = self._find(cluster, name)
        if not _observed(raw).owned:
            raise NotOwned(f"node pool {name} was not created by provisioner; not deleting it")
        nodepool_id = raw["nodepool_info"]["nodepool_id"]
        request = cs.DeleteClusterNodepoolRequest(force=True)  # its nodes go with it
        body = self._call(cluster, "delete_cluster_nodepool_with_options", cluster.name, nodepool_id, request)
        what = f"deleting node pool {name}"
        self._wait_task(cluster, body.get("task_id"), "nodepool_delete", what)

        def gone() -> bool | None:
            try:
                pool = self._pool(cluster, nodepool_id)
            except NotFound:
                return True
            _raise_if_failed(pool, what)
            return None

        wait_until(gone, self._operation_timeout, what, schedule=self._polling)

    def discover(self, scope: ClusterRef) -> list[ClusterRef]:
        from alibabacloud_cs20151215 import models as cs

        found: list[ClusterRef] = []
        for page_number in range(1, 10_000):
            request = cs.DescribeClustersV1Request(
                region_id=scope.location, page_size=DESCRIBE_CLUSTERS_PAGE, page_number=page_number
            )
            body = self._call(scope, "describe_clusters_v1with_options", request)
            clusters = body.get("clusters") or []
            found += [
                ClusterRef("ack", scope.account, c.get("region_id") or scope.location, c["cluster_id"])
                for c in clusters
            ]
            total = (body.get("page_info") or {}).get("total_count") or 0
            if not clusters or len(found) >= total:
                break
        return found

    def kubernetes_version(self, cluster: ClusterRef) -> KubernetesVersion:
        body = self._call(cluster, "describe_cluster_detail_with_options", cluster.name)
        # DescribeClusterDetail's current_version (SDK DescribeClusterDetailResponseBody; ACK API
        # reference, DescribeClusterDetail): the version the cluster runs, as 1.32.1-aliyun.1.
        return reported_version(body.get("current_version"), cluster, "current_version")

    # The SDK

    def _client(self, cluster: ClusterRef) -> Any:
        with self._clients_lock:
            if cluster.location not in self._clients:
                self._clients[cluster.location] = self._make_client(cluster.location)
            return self._clients[cluster.location]

    def _make_client(self, region: str) -> Any:
        from alibabacloud_credentials.client import Client as Credentials
        from alibabacloud_credentials.models import Config as CredentialsConfig
        from alibabacloud_cs20151215.client import Client
        from alibabacloud_tea_openapi import models as openapi

        # retry_options stays unset: the SDK then sends each call once, and callers retry.
        if self._endpoint is None:
            config = openapi.Config(
                credential=Credentials(), region_id=region, endpoint=f"cs.{region}.aliyuncs.com"
            )
        else:
            sandbox = CredentialsConfig(
                type="access_key", access_key_id="sandbox", access_key_secret="sandbox"
            )
            config = openapi.Config(
                credential=Credentials(sandbox),
                region_id=region,
                endpoint=self._endpoint.removeprefix("http://"),
                protocol="http",
            )
        config.connect_timeout, config.read_timeout = CONNECT_TIMEOUT_MS, READ_TIMEOUT_MS
        with _sdk_errors():
            return Client(config)

    def _call(self, cluster: ClusterRef, method: str, *args: Any) -> dict[str, Any]:
        """One API call; its response body as the API's own JSON (snake_case) dict."""
        from darabonba.runtime import RuntimeOptions

        client = self._client(cluster)
        action = method.removesuffix("_with_options")  # describe_cluster_node_pools ...
        scope, kind = quota_scope(cluster), action_kind(action)
        PACER.pace(scope, kind, action)
        try:
            with _sdk_errors():
                runtime = RuntimeOptions(max_idle_conns=self._connections)
                response = getattr(client, method)(*args, {}, runtime)
        except Throttled as error:
            PACER.throttled(scope, kind, action, error.retry_after)
            raise
        return response.body.to_map() if response.body is not None else {}

    def _find(self, cluster: ClusterRef, name: str) -> dict[str, Any]:
        """The pool named `name`: ACK keys pools by ID, the tool by name."""
        from alibabacloud_cs20151215 import models as cs

        request = cs.DescribeClusterNodePoolsRequest(nodepool_name=name)
        body = self._call(cluster, "describe_cluster_node_pools_with_options", cluster.name, request)
        for pool in body.get("nodepools") or []:
            if pool["nodepool_info"]["name"] == name:
                return pool
        raise NotFound(f"node pool {name} not found in ACK cluster {cluster.name}")

    def _pool(self, cluster: ClusterRef, nodepool_id: str) -> dict[str, Any]:
        return self._call(
            cluster, "describe_cluster_node_pool_detail_with_options", cluster.name, nodepool_id
        )

    def _wait_task(self, cluster: ClusterRef, task_id: str | None, kind: str, what: str) -> None:
        """Poll the task the change started (DescribeTaskInfo), first when earlier tasks of its type
        took to end, by their own created and updated times (whole seconds)."""
        if not task_id:
            return  # no task returned: the pool's own state is waited on next

        def finished() -> dict[str, Any] | None:
            task = self._call(cluster, "describe_task_info_with_options", task_id)
            return task if task.get("state") not in (None, "running") else None

        first = self._times.first_poll(kind, self._polling)
        task = wait_until(finished, self._operation_timeout, what, schedule=self._polling, first_poll=first)
        if task["state"] in _TASK_FAILED:
            error = task.get("error") or {}
            raise OperationFailed(
                f"{what}: task {task_id} failed: {error.get('message') or error.get('code', '')}"
            )
        self._times.record(kind, seconds_between(task.get("created"), task.get("updated")))

    def _wait_settled(self, cluster: ClusterRef, nodepool_id: str, what: str) -> dict[str, Any]:
        """Poll the pool until it is active, on ACK's own schedule (clouds.yaml polling), as its
        task was."""

        def settled() -> dict[str, Any] | None:
            pool = self._pool(cluster, nodepool_id)
            _raise_if_failed(pool, what)
            return pool if pool["status"]["state"] == "active" else None

        return wait_until(settled, self._operation_timeout, what, schedule=self._polling)


def _raise_if_failed(pool: dict[str, Any], what: str) -> None:
    """A pool that failed ends the wait at once."""
    if (pool.get("status") or {}).get("state") == "failed":
        raise OperationFailed(f"{what}: node pool {pool['nodepool_info'].get('nodepool_id')} is failed")


def _labels(desired: PoolState, held: dict[str, str] | None = None) -> list[Any]:
    """The pool's whole label list: the desired labels, the owner label and a replacement's
    generation label; `held`, the markers the pool has now, where desired names no generation
    (an update never strips them)."""
    from alibabacloud_cs20151215 import models as cs

    generation = {GENERATION_LABEL_KEY: str(desired.generation)} if desired.generation > 1 else {}
    labels = {**desired.label_map, **(held or {}), **generation, OWNER_LABEL_KEY: OWNER_LABEL_VALUE}
    return [cs.Tag(key=key, value=value) for key, value in sorted(labels.items())]


def _markers(raw: dict[str, Any]) -> dict[str, str]:
    """The generation label the pool holds now, as it holds it."""
    labels = (raw.get("kubernetes_config") or {}).get("labels") or []
    return {
        label["key"]: label.get("value") or "" for label in labels if label["key"] == GENERATION_LABEL_KEY
    }


def _taints(desired: PoolState) -> list[Any]:
    from alibabacloud_cs20151215 import models as cs

    return [cs.Taint(key=t.key, value=t.value, effect=t.effect) for t in desired.taints]


def _scaling_type(desired: PoolState) -> str:
    """auto_scaling.type, fixed at creation: gpu for GPU instance types (SDK AutoScaling.type)."""
    return "gpu" if desired.gpus_per_node else "cpu"


def _create_request(cluster: ClusterRef, desired: PoolState) -> Any:
    from alibabacloud_cs20151215 import models as cs

    request = cs.CreateClusterNodePoolRequest(
        nodepool_info=cs.CreateClusterNodePoolRequestNodepoolInfo(
            name=desired.name, type="edge" if desired.edge else "ess"
        ),
        kubernetes_config=cs.CreateClusterNodePoolRequestKubernetesConfig(
            labels=_labels(desired), taints=_taints(desired), runtime="containerd"
        ),
    )
    if desired.edge:  # the user's machines join an edge pool: no instance types, no sizes
        return request
    scaling = desired.scaling
    request.scaling_group = cs.CreateClusterNodePoolRequestScalingGroup(
        instance_types=[desired.instance_type],
        vswitch_ids=list(cluster.extras.get("vswitches", ())),
        desired_size=_desired_size(desired),
        system_disk_category="cloud_essd",
        system_disk_size=desired.disk_size_gb,
        spot_strategy="SpotAsPriceGo" if desired.spot else "NoSpot",
        instance_charge_type="PostPaid",
        tags=[
            cs.CreateClusterNodePoolRequestScalingGroupTags(key=k, value=v) for k, v in _tags(desired).items()
        ],
    )
    request.auto_scaling = cs.CreateClusterNodePoolRequestAutoScaling(
        enable=scaling.autoscaling,
        min_instances=scaling.min if scaling.autoscaling else None,
        max_instances=scaling.max if scaling.autoscaling else None,
        type=_scaling_type(desired),
    )
    return request


def _desired_size(desired: PoolState) -> int | None:
    """scaling_group.desired_size at creation: a fixed pool's size; an autoscaled pool's only where
    it starts above its minimum (a replacement's first nodes: the SDK's ScalingGroup.desired_size,
    "the total number of nodes that the node pool should maintain", beside auto_scaling's bounds),
    else unset as before, the scaling group starting at min_instances."""
    if not desired.scaling.autoscaling:
        return desired.scaling.min
    return starting_nodes(desired) if desired.nodes is not None else None


def _ecs_tags(raw: dict[str, Any]) -> dict[str, str]:
    return {tag["key"]: tag.get("value") or "" for tag in (raw.get("scaling_group") or {}).get("tags") or []}


def _modify_request(
    current: PoolState, desired: PoolState, tags_now: dict[str, str], markers: dict[str, str]
) -> Any:
    """The complete labels (the generation marker the pool holds kept) and taints (the SDK always
    sends both lists), and the ECS fields that changed; nothing of scaling for edge pools."""
    from alibabacloud_cs20151215 import models as cs

    request = cs.ModifyClusterNodePoolRequest(
        kubernetes_config=cs.ModifyClusterNodePoolRequestKubernetesConfig(
            labels=_labels(desired, markers), taints=_taints(desired)
        ),
        update_nodes=True,  # existing nodes get the new labels and taints too
    )
    if desired.edge:
        return request
    group: dict[str, Any] = {}
    if current.instance_type != desired.instance_type:
        group["instance_types"] = [desired.instance_type]
    if current.spot != desired.spot:
        group["spot_strategy"] = "SpotAsPriceGo" if desired.spot else "NoSpot"
    if desired.disk_size_gb is not None and current.disk_size_gb != desired.disk_size_gb:
        group["system_disk_size"] = desired.disk_size_gb
    scaling = desired.scaling
    if current.scaling != scaling:
        if scaling.autoscaling:
            request.auto_scaling = cs.ModifyClusterNodePoolRequestAutoScaling(
                enable=True, min_instances=scaling.min, max_instances=scaling.max
            )
        else:
            if current.scaling.autoscaling:
                request.auto_scaling = cs.ModifyClusterNodePoolRequestAutoScaling(enable=False)
            group["desired_size"] = scaling.min
    if group or current.autoscaler_hints != desired.autoscaler_hints:
        # The SDK sends scaling_group.tags as [] when unset, and the list replaces the pool's: give
        # the user's own tags back with the owner tag and the desired hints.
        _, others = read_hint_tags(_hints(), tags_now)
        tags = [cs.Tag(key=key, value=value) for key, value in {**others, **_tags(desired)}.items()]
        request.scaling_group = cs.ModifyClusterNodePoolRequestScalingGroup(tags=tags, **group)
    return request


def _tags(desired: PoolState) -> dict[str, str]:
    """The ECS tags: the owner tag, and the hints ACK's autoscaler reads from them (clouds.yaml)."""
    return {OWNER_TAG_KEY: OWNER_TAG_VALUE, **hint_tags(_hints(), desired.autoscaler_hints)}


def _hints() -> AutoscalerHints | None:
    return hardware.load().clouds["ack"].autoscaler_hints


def _adopt_request(raw: dict[str, Any]) -> Any:
    """The pool's labels and taints exactly as they are, plus the owner label (the request always
    carries both whole lists), and on ECS pools its ECS tags plus the owner tag. Existing nodes
    are left alone (update_nodes off): the label marks the pool, and adopting touches no node."""
    from alibabacloud_cs20151215 import models as cs

    config = raw.get("kubernetes_config") or {}
    labels = {label["key"]: label.get("value") or "" for label in config.get("labels") or []}
    labels[OWNER_LABEL_KEY] = OWNER_LABEL_VALUE
    request = cs.ModifyClusterNodePoolRequest(
        kubernetes_config=cs.ModifyClusterNodePoolRequestKubernetesConfig(
            labels=[cs.Tag(key=key, value=value) for key, value in labels.items()],
            taints=[
                cs.Taint(key=t["key"], value=t.get("value") or "", effect=t.get("effect") or "NoSchedule")
                for t in config.get("taints") or []
            ],
        ),
        update_nodes=False,
    )
    if (raw.get("nodepool_info") or {}).get("type") != "edge":
        tags = {**_ecs_tags(raw), OWNER_TAG_KEY: OWNER_TAG_VALUE}
        request.scaling_group = cs.ModifyClusterNodePoolRequestScalingGroup(
            tags=[cs.Tag(key=key, value=value) for key, value in tags.items()]
        )
    return request


def _gpus_per_node(edge: bool, instance_type: str, labels: dict[str, str]) -> int:
    """An ECS pool's from the tool's hardware data; an edge pool's from the tool's own count label."""
    if edge:
        try:
            return int(labels.get(EDGE_GPU_COUNT_LABEL, "0"))
        except ValueError:
            return 0
    machine = hardware.load().instance_type("ack", instance_type)
    return (machine.gpus or 0) if machine is not None else 0


def _observed(pool: dict[str, Any]) -> PoolState:
    info = pool.get("nodepool_info") or {}
    group = pool.get("scaling_group") or {}
    config = pool.get("kubernetes_config") or {}
    auto = pool.get("auto_scaling") or {}
    status = pool.get("status") or {}
    edge = info.get("type") == "edge"
    labels = {label["key"]: label.get("value") or "" for label in config.get("labels") or []}
    owned = labels.pop(OWNER_LABEL_KEY, None) == OWNER_LABEL_VALUE
    generation_text = labels.pop(GENERATION_LABEL_KEY, None)
    fleet_name = labels.get(POOL_NODE_LABEL) if generation_text is not None else None
    fleet_name, generation = read_generation(fleet_name, generation_text)
    instance_type = "" if edge else (group.get("instance_types") or [""])[0]
    if edge:
        scaling = Scaling.fixed(0)  # the tool neither scales nor counts an edge pool's nodes
    elif auto.get("enable"):
        scaling = Scaling(auto.get("min_instances") or 0, auto.get("max_instances") or 0, autoscaling=True)
    else:
        scaling = Scaling.fixed(group.get("desired_size") or 0)
    return PoolState(
        name=info.get("name", ""),
        instance_type=instance_type,
        gpus_per_node=_gpus_per_node(edge, instance_type, labels),
        mig_setting=None,
        sharing=None,  # ACK shares GPUs through the ack.node.gpu.schedule label, kept in labels
        spot=not edge and group.get("spot_strategy") in SPOT_STRATEGIES,
        disk_size_gb=None if edge else group.get("system_disk_size"),
        scaling=scaling,
        labels=tuple(labels.items()),
        taints=tuple(
            Taint(t["key"], t.get("value") or "", t.get("effect") or "NoSchedule")  # type: ignore[arg-type]
            for t in config.get("taints") or []
        ),
        owned=owned,
        edge=edge,
        status=_STATUS.get(status.get("state", ""), "changing"),
        nodes=status.get("total_nodes"),
        cloud_id=info.get("nodepool_id"),
        autoscaler_hints=read_hint_tags(_hints(), _ecs_tags(pool))[0],
        fleet_name=fleet_name,
        generation=generation,
    )


@contextlib.contextmanager
def _sdk_errors() -> Iterator[None]:
    from alibabacloud_credentials.exceptions import CredentialException
    from alibabacloud_tea_openapi.exceptions import AlibabaCloudException, ThrottlingException
    from darabonba.exceptions import DaraException, UnretryableException, ValidateException

    try:
        yield
    except CredentialException as exc:  # its message names the providers tried, never a secret
        raise AuthenticationFailed(f"Alibaba Cloud credentials: {exc}") from None
    except ThrottlingException as exc:
        retry_after = exc.retry_after / 1000 if exc.retry_after else None  # the SDK's milliseconds
        raise cloud_error(
            exc.status_code or 429, exc.code or "", _message(exc), _CODES, retry_after
        ) from None
    except AlibabaCloudException as exc:
        raise cloud_error(exc.status_code, exc.code or "", _message(exc), _CODES) from None
    except UnretryableException as exc:  # no answer at all: refused, reset, timed out
        inner = exc.inner_exception
        if isinstance(inner, CredentialException):  # the chain found no credentials: not "later"
            raise AuthenticationFailed(f"Alibaba Cloud credentials: {inner}") from None
        raise Unavailable(f"ACK API unreachable: {type(inner).__name__}") from None
    except ValidateException as exc:  # the SDK's own check of a request model
        raise InvalidRequest(str(exc)) from None
    except DaraException as exc:
        raise CloudError(f"ACK: {exc.code}: {exc.message}") from None


def _message(exc: Any) -> str:
    """`code: message`, where the SDK's message reads "code: <status>, <message> request id: <id>"."""
    return f"{exc.code}: {exc.message}" if exc.code else str(exc.message)
