"""EKS managed node groups through boto3; credentials from boto3's default session chain."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from provisioner import hardware
from provisioner.autoscaler import hint_tags, read_hint_tags
from provisioner.clusters import ClusterRef, KubernetesVersion
from provisioner.drivers import (
    OPERATION_TIMEOUT,
    TAINT_EFFECT_CONSTANTS,
    TAINT_EFFECTS_BY_CONSTANT,
    reported_version,
    requests_at_once,
    wait_until,
)
from provisioner.drivers.generation import generation_tags, read_generation_tags, starting_nodes
from provisioner.errors import (
    AuthenticationFailed,
    CloudError,
    ErrorCodes,
    NotFound,
    NotOwned,
    OperationFailed,
    PartialListing,
    Unavailable,
    cloud_error,
    retry_after_seconds,
)
from provisioner.hardware import AutoscalerHints
from provisioner.pools import (
    OWNER_TAG_KEY,
    OWNER_TAG_VALUE,
    NodeTemplate,
    PoolState,
    PoolStatus,
    Scaling,
    Taint,
)
from provisioner.quotas import PACER, action_kind, quota_scope
from provisioner.retry import RetryPolicy
from provisioner.sdks import import_sdk

# The NVIDIA AL2023 image: driver and container toolkit included; AL2 GPU images end with 1.32 (FACTS.md).
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"
TAGS_PER_CALL = 25
# EKS lists names only; descriptions are fetched side by side, up to this many of one cluster's
# at once, on threads the driver keeps: a pool of threads made per listing would start thousands
# of threads in a large fleet's plan, each start waiting under concurrent.futures' global lock.
DESCRIBE_CONCURRENCY = 16

_STATUS: dict[str, PoolStatus] = {
    "ACTIVE": "ready",
    "DEGRADED": "ready",  # running, with health issues the console shows; not a reason to replace
    "CREATE_FAILED": "failed",
    "DELETE_FAILED": "failed",
}
# botocore's EKS model and AWS's common errors: ResourceInUseException while a node group changes.
_CODES = ErrorCodes(
    busy=frozenset({"ResourceInUseException"}),
    throttled=frozenset(
        {"ThrottlingException", "TooManyRequestsException", "Throttling", "RequestLimitExceeded"}
    ),
    not_found=frozenset({"ResourceNotFoundException"}),
    auth=frozenset(
        {
            "UnrecognizedClientException",
            "AccessDeniedException",
            "InvalidSignatureException",
            "ExpiredTokenException",
        }
    ),
)
_FAILED = ("CREATE_FAILED", "DELETE_FAILED")


class EksDriver:
    def __init__(self, endpoint: str | None = None, operation_timeout: float = OPERATION_TIMEOUT):
        self._endpoint = endpoint  # a sandbox's endpoint_url; None: the region's EKS endpoint
        self._operation_timeout = operation_timeout
        self._clients: dict[tuple[str, str], Any] = {}  # by (service, region)
        self._clients_lock = threading.Lock()
        # As many describes at once as listings (requestsAtOnce), whatever the clusters they are for.
        self._describing = ThreadPoolExecutor(
            max_workers=requests_at_once("eks"), thread_name_prefix="eks-describe"
        )
        # EKS reports no operation's end time (a node group's modifiedAt is any change's): no
        # durations to learn from, so every wait starts on the schedule.
        self._polling = hardware.load().clouds["eks"].polling
        import_sdk("boto3", "botocore.config", "botocore.exceptions")

    # Driver protocol

    def prepare(self, clusters: Sequence[ClusterRef]) -> None:
        for one in {c.location: c for c in clusters}.values():  # a client a region
            self._client(one)

    def list_pools(self, cluster: ClusterRef) -> list[PoolState]:
        client = self._client(cluster)
        with _sdk_errors():
            names = [
                name
                for page in client.get_paginator("list_nodegroups").paginate(clusterName=cluster.name)
                for name in page["nodegroups"]
            ]
        # A listing is 1 + N calls here, so each describe is retried on its own (the smallest unit
        # that failed); one still failing makes the listing partial, reported and not retried whole.
        policy = RetryPolicy()

        def read(name: str) -> PoolState | CloudError:
            try:
                return policy.call(lambda: self._read(cluster, name))
            except CloudError as error:
                return error

        read_back: list[PoolState | CloudError] = []
        for start in range(0, len(names), DESCRIBE_CONCURRENCY):
            read_back += self._describing.map(read, names[start : start + DESCRIBE_CONCURRENCY])
        failed = [r for r in read_back if isinstance(r, CloudError)]
        if failed:
            raise PartialListing(
                f"{len(failed)} of {len(names)} node groups of {cluster.name} could not be read: {failed[0]}"
            )
        return read_back  # type: ignore[return-value]

    def create_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        scaling = desired.scaling
        request: dict[str, Any] = {
            "clusterName": cluster.name,
            "nodegroupName": desired.name,
            "nodeRole": cluster.extras["node_role"],
            "subnets": list(cluster.extras["subnets"]),
            "instanceTypes": [desired.instance_type],
            "amiType": GPU_AMI_TYPE,
            "capacityType": "SPOT" if desired.spot else "ON_DEMAND",
            "scalingConfig": {
                "minSize": scaling.min,
                "maxSize": max(scaling.max, 1),
                "desiredSize": starting_nodes(desired),
            },
            "labels": desired.label_map,
            "taints": [_taint(t) for t in desired.taints],
            # The hints follow once its Auto Scaling group is tagged (_retag): the node group's are
            # what plan reads, so they are written last. _retag touches hint tags only: the
            # generation markers stay for the node group's life.
            "tags": {OWNER_TAG_KEY: OWNER_TAG_VALUE, **generation_tags(desired)},
        }
        if desired.disk_size_gb is not None:
            request["diskSize"] = desired.disk_size_gb
        with _sdk_errors():
            self._client(cluster).create_nodegroup(**request)
        described = self._wait_active(cluster, desired.name, f"creating node group {desired.name}")
        self._retag(cluster, described, desired.autoscaler_hints)
        return self._read(cluster, desired.name)

    def update_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        described = self._describe(cluster, desired.name)
        current = _observed(described)
        if not current.owned:
            raise NotOwned(f"node group {desired.name} was not created by provisioner; not updating it")
        changes: dict[str, Any] = {}
        if current.labels != desired.labels:
            removed = sorted(set(current.label_map) - set(desired.label_map))
            changes["labels"] = _non_empty(addOrUpdateLabels=desired.label_map, removeLabels=removed)
        if current.taints != desired.taints:
            wanted = {(t.key, t.effect) for t in desired.taints}
            removed_taints = [_taint(t) for t in current.taints if (t.key, t.effect) not in wanted]
            changes["taints"] = _non_empty(
                addOrUpdateTaints=[_taint(t) for t in desired.taints], removeTaints=removed_taints
            )
        if current.scaling != desired.scaling:
            scaling = desired.scaling
            size = described["scalingConfig"].get("desiredSize", scaling.min)
            changes["scalingConfig"] = {
                "minSize": scaling.min,
                "maxSize": max(scaling.max, 1),
                "desiredSize": min(max(size, scaling.min), max(scaling.max, 1)),
            }
        if changes:
            client = self._client(cluster)
            with _sdk_errors():
                update = client.update_nodegroup_config(
                    clusterName=cluster.name, nodegroupName=desired.name, **changes
                )["update"]
            self._wait_update(cluster, desired.name, update, f"updating node group {desired.name}")
        if current.autoscaler_hints != desired.autoscaler_hints:
            self._retag(cluster, described, desired.autoscaler_hints)
        return self._read(cluster, desired.name)

    def adopt_pool(self, cluster: ClusterRef, name: str) -> PoolState:
        described = self._describe(cluster, name)
        if _observed(described).owned:
            return _observed(described)
        # TagResource adds tags to the node group (its other tags stay) and starts no update.
        with _sdk_errors():
            self._client(cluster).tag_resource(
                resourceArn=described["nodegroupArn"], tags={OWNER_TAG_KEY: OWNER_TAG_VALUE}
            )
        return self._read(cluster, name)

    def delete_pool(self, cluster: ClusterRef, name: str) -> None:
        if not self._read(cluster, name).owned:
            raise NotOwned(f"node group {name} was not created by provisioner; not deleting it")
        client = self._client(cluster)
        with _sdk_errors():
            client.delete_nodegroup(clusterName=cluster.name, nodegroupName=name)

        def gone() -> bool | None:
            try:
                described = self._describe(cluster, name)
            except NotFound:
                return True
            _raise_if_failed(described, f"deleting node group {name}")
            return None

        wait_until(gone, self._operation_timeout, f"deleting node group {name}", **self._schedule)

    def discover(self, scope: ClusterRef) -> list[ClusterRef]:
        client = self._client(scope)
        with _sdk_errors():
            names = [n for page in client.get_paginator("list_clusters").paginate() for n in page["clusters"]]
        # No extras: only creating a node group needs a role and subnets, and discovery never does.
        return [ClusterRef("eks", scope.account, scope.location, name) for name in names]

    def kubernetes_version(self, cluster: ClusterRef) -> KubernetesVersion:
        client = self._client(cluster)
        with _sdk_errors():
            described = client.describe_cluster(name=cluster.name)["cluster"]
        # Cluster.version (botocore's EKS model; EKS API reference, DescribeCluster): "The
        # Kubernetes server version for the cluster", major.minor ("1.35").
        return reported_version(described.get("version"), cluster, "cluster.version")

    # The SDK

    def _client(self, cluster: ClusterRef, service: str = "eks") -> Any:
        with self._clients_lock:  # boto3 sessions and client creation are not thread-safe
            return self._make_client(cluster, service)

    def _make_client(self, cluster: ClusterRef, service: str) -> Any:
        if (service, cluster.location) not in self._clients:
            import boto3
            from botocore.config import Config

            # Callers retry with backoff and Retry-After; the SDK's own retries would multiply them.
            config = Config(
                retries={"mode": "standard", "total_max_attempts": 1},
                max_pool_connections=requests_at_once("eks"),
            )
            if self._endpoint is None:
                session = boto3.session.Session(region_name=cluster.location)
            else:
                session = boto3.session.Session(
                    aws_access_key_id="sandbox", aws_secret_access_key="sandbox", region_name=cluster.location
                )
            client = session.client(service, endpoint_url=self._endpoint, config=config)
            _pace(client, quota_scope(cluster))  # one client a region: the scope is the region's
            # botocore reads its paginators' model on a client's first get_paginator, without a
            # lock: read here, once, rather than by every listing thread that comes first.
            client.can_paginate("list_nodegroups" if service == "eks" else "describe_auto_scaling_groups")
            self._clients[service, cluster.location] = client
        return self._clients[service, cluster.location]

    @property
    def _schedule(self) -> dict[str, Any]:
        """How each wait polls: its first poll one interval in, since the call that started the
        change has just said it runs (CREATING, UPDATING, DELETING)."""
        return {"schedule": self._polling, "first_poll": self._polling.first}

    def _describe(self, cluster: ClusterRef, name: str) -> dict[str, Any]:
        with _sdk_errors():
            return self._client(cluster).describe_nodegroup(clusterName=cluster.name, nodegroupName=name)[
                "nodegroup"
            ]

    def _read(self, cluster: ClusterRef, name: str) -> PoolState:
        return _observed(self._describe(cluster, name))

    def _retag(self, cluster: ClusterRef, described: dict[str, Any], template: NodeTemplate | None) -> None:
        """Make the node group's hint tags, and its Auto Scaling group's, spell `template`: TagResource
        and UntagResource change tags only and start no node-group update."""
        wanted = hint_tags(_hints(), template)
        old, _ = read_hint_tags(_hints(), described.get("tags") or {})
        stale = [key for key in hint_tags(_hints(), old) if key not in wanted]
        # The Auto Scaling group first: should that fail, the node group still reads as unhinted,
        # so the next plan writes both again.
        self._tag_groups(cluster, described, wanted, stale)
        client = self._client(cluster)
        with _sdk_errors():
            if wanted:
                client.tag_resource(resourceArn=described["nodegroupArn"], tags=wanted)
            if stale:
                client.untag_resource(resourceArn=described["nodegroupArn"], tagKeys=stale)

    def _tag_groups(
        self, cluster: ClusterRef, described: dict[str, Any], tags: dict[str, str], stale: list[str]
    ) -> None:
        """The same hints on the node group's Auto Scaling groups, which EKS does not copy them to
        and older autoscalers read alone (clouds.yaml autoscaler)."""
        hints = _hints()
        if hints is None or not hints.auto_scaling_group or not (tags or stale):
            return
        groups = [g["name"] for g in (described.get("resources") or {}).get("autoScalingGroups") or []]
        client = self._client(cluster, "autoscaling")

        def entries(keys: dict[str, str]) -> list[dict[str, Any]]:
            return [
                {
                    "ResourceId": group,
                    "ResourceType": "auto-scaling-group",
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": False,
                }
                for group in groups
                for key, value in keys.items()
            ]

        with _sdk_errors():
            for batch in _batches(entries(tags)):
                client.create_or_update_tags(Tags=batch)
            for batch in _batches(entries(dict.fromkeys(stale, ""))):
                client.delete_tags(Tags=batch)

    def _wait_active(self, cluster: ClusterRef, name: str, what: str) -> dict[str, Any]:
        def active() -> dict[str, Any] | None:
            described = self._describe(cluster, name)
            return described if described["status"] not in ("CREATING", "UPDATING") else None

        described = wait_until(active, self._operation_timeout, what, **self._schedule)
        _raise_if_failed(described, what)
        if described["status"] != "ACTIVE":
            raise OperationFailed(f"{what}: node group is {described['status']}")
        return described

    def _wait_update(self, cluster: ClusterRef, name: str, update: dict[str, Any], what: str) -> None:
        client = self._client(cluster)

        def finished() -> dict[str, Any] | None:
            with _sdk_errors():
                current = client.describe_update(name=cluster.name, nodegroupName=name, updateId=update["id"])
            return current["update"] if current["update"]["status"] != "InProgress" else None

        done = update  # the answer that started it says how it stands
        if update["status"] == "InProgress":
            done = wait_until(finished, self._operation_timeout, what, **self._schedule)
        if done["status"] != "Successful":
            errors = "; ".join(e.get("errorMessage", "") for e in done.get("errors", []))
            raise OperationFailed(f"{what}: update {done['status']}{': ' + errors if errors else ''}")


def _raise_if_failed(described: dict[str, Any], what: str) -> None:
    """A node group that failed ends the wait at once, with the health issues EKS gives."""
    if described["status"] in _FAILED:
        issues = "; ".join(i.get("message", "") for i in described.get("health", {}).get("issues", []))
        raise OperationFailed(f"{what}: node group is {described['status']}{': ' + issues if issues else ''}")


def _hints() -> AutoscalerHints | None:
    return hardware.load().clouds["eks"].autoscaler_hints


def _batches(entries: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """CreateOrUpdateTags and DeleteTags take at most 25 tags a call (eksctl's
    MaximumCreatedTagNumberPerCall, from the Auto Scaling API reference)."""
    for start in range(0, len(entries), TAGS_PER_CALL):
        yield entries[start : start + TAGS_PER_CALL]


def _non_empty(**parts: Any) -> dict[str, Any]:
    """UpdateNodegroupConfig's label and taint changes, with no empty lists in them."""
    return {key: value for key, value in parts.items() if value}


def _taint(taint: Taint) -> dict[str, str]:
    return {"key": taint.key, "value": taint.value, "effect": TAINT_EFFECT_CONSTANTS[taint.effect]}


def _observed(group: dict[str, Any]) -> PoolState:
    instance_type = (group.get("instanceTypes") or [""])[0]
    machine = hardware.load().instance_type("eks", instance_type)
    scaling = group.get("scalingConfig", {})
    low, high = scaling.get("minSize", 0), scaling.get("maxSize", 0)
    tags = group.get("tags") or {}
    fleet_name, generation = read_generation_tags(tags)
    return PoolState(
        name=group["nodegroupName"],
        instance_type=instance_type,
        gpus_per_node=(machine.gpus or 0) if machine is not None else 0,  # the instance type has the count
        mig_setting=None,  # the GPU Operator partitions on EKS, from a node label
        sharing=None,
        spot=group.get("capacityType") == "SPOT",
        disk_size_gb=group.get("diskSize"),
        scaling=Scaling(low, high, autoscaling=True),
        labels=tuple((group.get("labels") or {}).items()),
        taints=tuple(
            Taint(t["key"], t.get("value", ""), TAINT_EFFECTS_BY_CONSTANT.get(t["effect"], t["effect"]))
            for t in group.get("taints") or []
        ),
        owned=tags.get(OWNER_TAG_KEY) == OWNER_TAG_VALUE,
        status=_STATUS.get(group.get("status", ""), "changing"),
        nodes=scaling.get("desiredSize"),
        autoscaler_hints=read_hint_tags(_hints(), tags)[0],
        fleet_name=fleet_name,
        generation=generation,
    )


def _pace(client: Any, scope: tuple[str, ...]) -> None:
    """Every call of the client takes its token from its action's bucket in the account and region
    (provisioner.quotas) first, and a throttled answer slows that bucket (botocore's events)."""

    def before(model: Any, **_: Any) -> None:
        PACER.pace(scope, action_kind(model.name), model.name)

    def after(http_response: Any, parsed: Any, model: Any, **_: Any) -> None:
        code = (parsed or {}).get("Error", {}).get("Code", "")
        if http_response.status_code == 429 or code in _CODES.throttled:
            retry_after = retry_after_seconds(http_response.headers.get("retry-after"))
            PACER.throttled(scope, action_kind(model.name), model.name, retry_after)

    client.meta.events.register("before-call", before)
    client.meta.events.register("after-call", after)


@contextlib.contextmanager
def _sdk_errors() -> Iterator[None]:
    from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, NoCredentialsError
    from botocore.exceptions import ConnectionError as NoConnection

    try:
        yield
    except ClientError as exc:
        raise _driver_error(exc) from None
    except NoCredentialsError as exc:
        raise AuthenticationFailed(f"AWS credentials: {exc}") from None
    except (NoConnection, HTTPClientError) as exc:  # no answer: refused, reset, timed out
        raise Unavailable(str(exc)) from None
    except BotoCoreError as exc:
        raise CloudError(str(exc)) from None


def _driver_error(exc: Any) -> CloudError:
    error = exc.response.get("Error", {})
    code = error.get("Code", "")
    metadata = exc.response.get("ResponseMetadata", {})
    retry_after = retry_after_seconds(metadata.get("HTTPHeaders", {}).get("retry-after"))
    message = f"{code}: {error.get('Message', '')}"
    return cloud_error(metadata.get("HTTPStatusCode"), code, message, _CODES, retry_after)
