"""AKS agent pools through azure-mgmt-containerservice; credentials from DefaultAzureCredential."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from provisioner import hardware
from provisioner.autoscaler import hint_tags, read_hint_tags
from provisioner.clusters import ClusterRef, KubernetesVersion
from provisioner.drivers import (
    OPERATION_TIMEOUT,
    OperationTimes,
    Pending,
    reported_version,
    requests_at_once,
    seconds_between,
    size_connection_pool,
    wait_until,
)
from provisioner.drivers.generation import generation_tags, read_generation_tags, starting_nodes
from provisioner.errors import (
    AuthenticationFailed,
    CloudError,
    ErrorCodes,
    NotOwned,
    OperationFailed,
    Unavailable,
    cloud_error,
    retry_after_seconds,
)
from provisioner.hardware import AutoscalerHints
from provisioner.pools import OWNER_TAG_KEY, OWNER_TAG_VALUE, PoolState, PoolStatus, Scaling, Taint
from provisioner.quotas import PACER, method_kind, scope_of
from provisioner.sdks import import_sdk

_TAINT = re.compile(r"^(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(?P<effect>\w+)$")
_STATUS: dict[str, PoolStatus] = {"Succeeded": "ready", "Failed": "failed", "Canceled": "failed"}
# An async operation's terminal statuses (ARM "Track asynchronous Azure operations"); any other
# status (InProgress, or a resource provider's own) means it still runs.
_SUCCEEDED, _FAILED = "Succeeded", ("Failed", "Canceled")
# ARM's codes (azure-rest-api-specs, AKS troubleshooting): 409 OperationNotAllowed while another
# agent pool operation runs.
_CODES = ErrorCodes(busy=frozenset({"OperationNotAllowed"}), busy_status=409)


class AksDriver:
    def __init__(self, endpoint: str | None = None, operation_timeout: float = OPERATION_TIMEOUT):
        self._endpoint = endpoint  # a sandbox's ARM base URL; None: management.azure.com
        self._operation_timeout = operation_timeout
        self._clients: dict[str, Any] = {}
        # The sandbox speaks plain HTTP on loopback; azure-core refuses bearer tokens over it unless told.
        self._options: dict[str, Any] = {"enforce_https": False} if endpoint else {}
        self._clients_lock = threading.Lock()
        self._polling = hardware.load().clouds["aks"].polling
        self._times = OperationTimes()  # how long this cloud's operations took, by kind
        # azure-identity logs each credential it tried at WARNING; the typed error says it once.
        logging.getLogger("azure.identity").setLevel(logging.ERROR)
        import_sdk(
            "azure.core.credentials",
            "azure.core.exceptions",
            "azure.core.pipeline.transport",
            "azure.identity",
            "azure.mgmt.containerservice",
            "azure.mgmt.containerservice.models",
            "requests",
        )

    # Driver protocol

    def prepare(self, clusters: Sequence[ClusterRef]) -> None:
        with self._clients_lock:
            for subscription in dict.fromkeys(c.account for c in clusters):
                self._client(subscription)

    def list_pools(self, cluster: ClusterRef) -> list[PoolState]:
        with _sdk_errors():
            pages = self._pools(cluster).list(cluster.location, cluster.name, **self._options)
            return [_observed(pool) for pool in pages]

    def create_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        self._put(cluster, desired.name, _properties(desired), f"creating agent pool {desired.name}")
        return self._read(cluster, desired.name)

    def update_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        with _sdk_errors():
            current = self._pools(cluster).get(cluster.location, cluster.name, desired.name, **self._options)
        if not _observed(current).owned:
            raise NotOwned(f"agent pool {desired.name} was not created by provisioner; not updating it")
        # ARM's PUT replaces the whole pool: keep what is set, change only the in-place fields.
        properties = current.properties.as_dict()
        properties.pop("provisioningState", None)
        properties.update(
            {key: value for key, value in _properties(desired).items() if key in _IN_PLACE_PROPERTIES}
        )
        if desired.spot:  # keep what AKS added to the Spot pool, as its GET showed it
            aks = hardware.load().clouds["aks"]
            properties["nodeLabels"] = {**properties["nodeLabels"], **aks.spot_labels}
            spot_taints = [str(t) for t in aks.spot_taints if str(t) not in properties["nodeTaints"]]
            properties["nodeTaints"] = [*properties["nodeTaints"], *spot_taints]
        # The pool's other tags stay; the autoscaler's hints are the desired pool's.
        _, others = read_hint_tags(_hints(), current.tags or {})
        properties["tags"] = {**others, **_tags(desired)}
        scaling = desired.scaling
        if scaling.autoscaling:
            # The autoscaler owns the node count: keep it, inside the new bounds, rather than
            # shrink the pool to its minimum on every label change.
            properties["count"] = min(max(current.count or 0, scaling.min), scaling.max)
        else:
            properties.pop("minCount", None)
            properties.pop("maxCount", None)
        self._put(cluster, desired.name, properties, f"updating agent pool {desired.name}")
        return self._read(cluster, desired.name)

    def adopt_pool(self, cluster: ClusterRef, name: str) -> PoolState:
        with _sdk_errors():
            current = self._pools(cluster).get(cluster.location, cluster.name, name, **self._options)
        if _observed(current).owned:
            return _observed(current)
        # agentPools has no tags-only call (PUT, GET and DELETE only): PUT the pool exactly as its
        # GET shows it, plus the tag. Spot labels and taints go back as AKS wrote them.
        properties = current.properties.as_dict()
        properties.pop("provisioningState", None)
        properties["tags"] = {**(properties.get("tags") or {}), OWNER_TAG_KEY: OWNER_TAG_VALUE}
        self._put(cluster, name, properties, f"adopting agent pool {name}")
        return self._read(cluster, name)

    def delete_pool(self, cluster: ClusterRef, name: str) -> None:
        if not self._read(cluster, name).owned:
            raise NotOwned(f"agent pool {name} was not created by provisioner; not deleting it")
        with _sdk_errors():
            started = self._pools(cluster).begin_delete(
                cluster.location, cluster.name, name, polling=False, cls=_initial_response, **self._options
            )
            response = started.result().http_response
        if response.status_code != 204:  # 204: gone already
            self._follow(cluster, response, "delete", f"deleting agent pool {name}")

    def discover(self, scope: ClusterRef) -> list[ClusterRef]:
        with _sdk_errors():
            with self._clients_lock:
                client = self._client(scope.account)
            found = list(client.managed_clusters.list(**self._options))
        # An ID reads /subscriptions/{s}/resourceGroups/{group}/providers/...
        return [ClusterRef("aks", scope.account, m.id.split("/")[4].lower(), m.name) for m in found]

    def kubernetes_version(self, cluster: ClusterRef) -> KubernetesVersion:
        with _sdk_errors():
            with self._clients_lock:
                client = self._client(cluster.account)
            found = client.managed_clusters.get(cluster.location, cluster.name, **self._options)
        # ManagedClusterProperties (azure-mgmt-containerservice models; AKS REST reference, Managed
        # Clusters - Get): currentKubernetesVersion is the major.minor.patch the cluster runs;
        # kubernetesVersion the one asked for, which may be 1.X, where the former is missing.
        version = found.current_kubernetes_version or found.kubernetes_version
        return reported_version(version, cluster, "currentKubernetesVersion")

    # The SDK

    def _pools(self, cluster: ClusterRef) -> Any:
        """The agent_pools operations of a client for the cluster's subscription (one client each)."""
        with self._clients_lock:
            return self._client(cluster.account).agent_pools

    def _client(self, subscription: str) -> Any:
        if subscription not in self._clients:
            from azure.core.pipeline.transport import RequestsTransport
            from azure.mgmt.containerservice import ContainerServiceClient

            transport = RequestsTransport()
            transport.open()  # its session, made as azure-core makes it, then sized for wide listings
            size_connection_pool(transport.session, requests_at_once("aks"))
            # callers retry with backoff; never twice over
            options: dict[str, Any] = {"retry_total": 0, "transport": transport}
            if self._endpoint is None:
                from azure.identity import DefaultAzureCredential

                credential: Any = DefaultAzureCredential()
            else:
                credential = _SandboxCredential()
                options["base_url"] = self._endpoint
            self._clients[subscription] = ContainerServiceClient(
                credential, subscription, per_retry_policies=[_paced(subscription)], **options
            )
        return self._clients[subscription]

    def _read(self, cluster: ClusterRef, name: str) -> PoolState:
        with _sdk_errors():
            return _observed(self._pools(cluster).get(cluster.location, cluster.name, name, **self._options))

    def _put(self, cluster: ClusterRef, name: str, properties: dict[str, Any], what: str) -> None:
        from azure.mgmt.containerservice import models

        body = models.AgentPool(properties=models.ManagedClusterAgentPoolProfileProperties(properties))
        with _sdk_errors():
            # No SDK poller (its interval is a fixed 30 s without Retry-After): the one wait loop follows it.
            started = self._pools(cluster).begin_create_or_update(
                cluster.location,
                cluster.name,
                name,
                body,
                polling=False,
                cls=_initial_response,
                **self._options,
            )
            response = started.result().http_response
        state = (response.json().get("properties") or {}).get("provisioningState")
        if state == _SUCCEEDED or state is None:  # none: ARM's word that it finished and succeeded
            return
        if state in _FAILED:
            raise OperationFailed(f"{what}: the agent pool's provisioning {state.lower()}")
        self._follow(cluster, response, "create" if response.status_code == 201 else "update", what)

    def _follow(self, cluster: ClusterRef, response: Any, kind: str, what: str) -> None:
        """Poll the operation ARM started through its own status URL (Azure-AsyncOperation), first
        after its Retry-After or when earlier operations of its kind took to end, by their startTime
        and endTime, then as each answer's Retry-After or the schedule says."""
        from azure.core.exceptions import HttpResponseError
        from azure.core.rest import HttpRequest
        from azure.mgmt.core.exceptions import ARMErrorFormat

        url = response.headers.get("Azure-AsyncOperation")
        if not url:
            raise CloudError(
                f"{what}: ARM answered {response.status_code} without an Azure-AsyncOperation URL"
            )
        with self._clients_lock:
            client = self._client(cluster.account)

        def finished() -> dict[str, Any] | Pending:
            with _sdk_errors():
                answer = client.send_request(HttpRequest("GET", url), **self._options)
                if answer.status_code >= 400:
                    raise HttpResponseError(response=answer, error_format=ARMErrorFormat)
            status = answer.json()
            if status.get("status") in _FAILED:
                error = status.get("error") or {}
                raise OperationFailed(
                    f"{what}: {status['status']}: {error.get('message') or error.get('code', '')}"
                )
            if status.get("status") == _SUCCEEDED:
                return status
            return Pending(retry_after_seconds(answer.headers.get("Retry-After")))

        retry_after = retry_after_seconds(response.headers.get("Retry-After"))
        first = self._times.first_poll(kind, self._polling, retry_after)
        done = wait_until(finished, self._operation_timeout, what, schedule=self._polling, first_poll=first)
        self._times.record(kind, seconds_between(done.get("startTime"), done.get("endTime")))


def _paced(subscription: str) -> Any:
    """An azure-core policy that takes each request's token from its subscription's ARM bucket of
    its kind (provisioner.quotas), and slows that bucket where ARM answers 429 all the same."""
    from azure.core.pipeline.policies import SansIOHTTPPolicy

    scope = scope_of("aks", account=subscription)

    class Paced(SansIOHTTPPolicy):  # type: ignore[type-arg]
        def on_request(self, request: Any) -> None:
            PACER.pace(scope, method_kind(request.http_request.method))

        def on_response(self, request: Any, response: Any) -> None:
            answer = response.http_response
            if answer.status_code == 429:
                retry_after = retry_after_seconds(answer.headers.get("Retry-After"))
                PACER.throttled(scope, method_kind(request.http_request.method), "", retry_after)

    return Paced()


def _initial_response(pipeline_response: Any, deserialized: Any, headers: Any) -> Any:
    """The SDK's `cls` hook: the begin_* call's own HTTP answer, whose headers say how to follow it."""
    return pipeline_response


# nodeLabels, nodeTaints and the scaling settings change in place (FACTS.md). `count` is a fixed
# pool's size; an autoscaled pool's is kept (update_pool).
_IN_PLACE_PROPERTIES = ("nodeLabels", "nodeTaints", "enableAutoScaling", "minCount", "maxCount", "count")


def _hints() -> AutoscalerHints | None:
    return hardware.load().clouds["aks"].autoscaler_hints


def _tags(desired: PoolState) -> dict[str, str]:
    """The owner tag, a replacement's generation markers and the autoscaler's hints: AKS applies a
    pool's tags to its scale set."""
    return {
        OWNER_TAG_KEY: OWNER_TAG_VALUE,
        **generation_tags(desired),
        **hint_tags(_hints(), desired.autoscaler_hints),
    }


def _properties(desired: PoolState) -> dict[str, Any]:
    scaling = desired.scaling
    properties: dict[str, Any] = {
        "vmSize": desired.instance_type,
        "osType": "Linux",
        "mode": "User",
        "count": starting_nodes(desired),
        "enableAutoScaling": scaling.autoscaling,
        "nodeLabels": desired.label_map,
        "nodeTaints": [str(t) for t in desired.taints],
        "tags": _tags(desired),
    }
    if scaling.autoscaling:
        properties.update(minCount=scaling.min, maxCount=scaling.max)
    if desired.mig_setting:
        properties["gpuInstanceProfile"] = desired.mig_setting
    if desired.spot:
        properties.update(scaleSetPriority="Spot", scaleSetEvictionPolicy="Delete", spotMaxPrice=-1)
    if desired.disk_size_gb is not None:
        properties["osDiskSizeGB"] = desired.disk_size_gb
    if desired.zones is not None:
        properties["availabilityZones"] = list(desired.zones)
    return properties


def _observed(pool: Any) -> PoolState:
    machine = hardware.load().instance_type("aks", pool.vm_size or "")
    spot = _text(pool.scale_set_priority) == "Spot"
    labels = dict(pool.node_labels or {})
    taints = [_taint(t) for t in pool.node_taints or []]
    if spot:  # what AKS adds to every Spot pool is the cloud's, not the fleet's: leave it out
        aks = hardware.load().clouds["aks"]
        labels = {k: v for k, v in labels.items() if aks.spot_labels.get(k) != v}
        taints = [t for t in taints if t not in aks.spot_taints]
    scaling = (
        Scaling(pool.min_count or 0, pool.max_count or 0, autoscaling=True)
        if pool.enable_auto_scaling
        else Scaling.fixed(pool.count or 0)
    )
    template, _ = read_hint_tags(_hints(), pool.tags or {})
    fleet_name, generation = read_generation_tags(pool.tags or {})
    return PoolState(
        name=pool.name,
        instance_type=pool.vm_size or "",
        gpus_per_node=(machine.gpus or 0)
        if machine is not None
        else 0,  # AKS reports no count: the VM size has it
        mig_setting=_text(pool.gpu_instance_profile),
        sharing=None,  # the device plugin shares GPUs on AKS, from a node label
        spot=spot,
        disk_size_gb=pool.os_disk_size_gb,
        scaling=scaling,
        labels=tuple(labels.items()),
        taints=tuple(taints),
        owned=(pool.tags or {}).get(OWNER_TAG_KEY) == OWNER_TAG_VALUE,
        status=_STATUS.get(_text(pool.provisioning_state) or "", "changing"),
        nodes=pool.count,
        zones=tuple(pool.availability_zones) if pool.availability_zones else None,
        autoscaler_hints=template,
        fleet_name=fleet_name,
        generation=generation,
    )


def _text(value: Any) -> str | None:
    """The SDK gives known enum values as str enums and unknown ones as str: compare plain text."""
    return None if value is None else str(getattr(value, "value", value))


def _taint(text: str) -> Taint:
    match = _TAINT.match(text)
    if match is None:
        return Taint(text, "", "NoSchedule")  # AKS accepts no other form; keep it visible as drift
    return Taint(match["key"], match["value"] or "", match["effect"])  # type: ignore[arg-type]


class _SandboxCredential:
    """A fixed token for the local emulator, which checks only that one is sent."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken("sandbox", int(time.time()) + 3600)


@contextlib.contextmanager
def _sdk_errors() -> Iterator[None]:
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
    )

    try:
        yield
    except ClientAuthenticationError as exc:
        first_line = (exc.message or "").splitlines()[0] if exc.message else "authentication failed"
        raise AuthenticationFailed(
            f"Azure credentials: {first_line} (az login, or the AZURE_* environment variables)"
        ) from None
    except HttpResponseError as exc:
        raise _driver_error(exc) from None
    except (ServiceRequestError, ServiceResponseError) as exc:  # no answer: refused, reset, timed out
        raise Unavailable(f"ARM unreachable: {exc.message}") from None


def _driver_error(exc: Any) -> CloudError:
    code = exc.error.code if exc.error is not None else ""
    message = f"{code}: {exc.error.message}" if exc.error is not None else exc.message
    response = getattr(exc, "response", None)
    retry_after = retry_after_seconds(response.headers.get("Retry-After") if response is not None else None)
    return cloud_error(exc.status_code, code or "", message, _CODES, retry_after)
