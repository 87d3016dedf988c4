"""GKE node pools through google-cloud-container's REST transport; credentials from google.auth.default."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from provisioner import hardware
from provisioner.clusters import ClusterRef, KubernetesVersion
from provisioner.drivers import (
    OPERATION_TIMEOUT,
    TAINT_EFFECT_CONSTANTS,
    TAINT_EFFECTS_BY_CONSTANT,
    OperationTimes,
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
    InvalidRequest,
    NotOwned,
    OperationFailed,
    Unavailable,
    cloud_error,
    retry_after_seconds,
)
from provisioner.pools import (
    OWNER_TAG_KEY,
    OWNER_TAG_VALUE,
    NativeSharing,
    PoolState,
    PoolStatus,
    Scaling,
    Taint,
)
from provisioner.quotas import PACER, method_kind, scope_of
from provisioner.sdks import import_sdk

# Node labels GKE sets itself (FACTS.md): never the user's, never drift.
GKE_LABEL_PREFIX = "cloud.google.com/gke-"
REQUEST_TIMEOUT = 60.0  # seconds, per HTTP call
_STATUS: dict[str, PoolStatus] = {"RUNNING": "ready", "RUNNING_WITH_ERROR": "failed", "ERROR": "failed"}
# google.rpc codes in the error body: FAILED_PRECONDITION "cluster is running incompatible
# operation" while another runs; RESOURCE_EXHAUSTED when throttled (FACTS.md).
_CODES = ErrorCodes(busy=frozenset({"FAILED_PRECONDITION"}), throttled=frozenset({"RESOURCE_EXHAUSTED"}))


class GkeDriver:
    def __init__(self, endpoint: str | None = None, operation_timeout: float = OPERATION_TIMEOUT):
        self._endpoint = endpoint  # a sandbox's REST api_endpoint; None: container.googleapis.com
        self._operation_timeout = operation_timeout
        self._client_instance: Any = None
        self._client_lock = threading.Lock()
        self._polling = hardware.load().clouds["gke"].polling
        self._times = OperationTimes()  # how long this cloud's operations took, by type
        # Each cluster's get_cluster answer, read once per run (a driver lives for one command):
        # its zones and its version both come from it.
        self._clusters: dict[str, Any] = {}
        self._clusters_lock = threading.Lock()
        import_sdk(
            "google.cloud.container_v1",
            "google.api_core.exceptions",
            "google.auth.credentials",
            "google.auth.exceptions",
            "google.auth.transport.requests",
            "requests",
        )

    # Driver protocol

    def prepare(self, clusters: Sequence[ClusterRef]) -> None:
        if clusters:
            with contextlib.suppress(CloudError):  # the listings report it, cluster by cluster
                self._client  # noqa: B018  # made by being read

    def list_pools(self, cluster: ClusterRef) -> list[PoolState]:
        with _sdk_errors():
            body = self._list_node_pools_json(_path(cluster))
        return [_observed_json(pool) for pool in body.get("nodePools", ())]

    def create_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        zones = desired.zones or self._cluster_zones(cluster)
        operation = self._call(
            self._client.create_node_pool, parent=_path(cluster), node_pool=self._node_pool(desired, zones)
        )
        self._wait(cluster, operation, f"creating node pool {desired.name}")
        return self._read(cluster, desired.name)

    def update_pool(self, cluster: ClusterRef, desired: PoolState) -> PoolState:
        from google.cloud import container_v1 as gke

        current = self._read(cluster, desired.name)
        if not current.owned:
            raise NotOwned(f"node pool {desired.name} was not created by provisioner; not updating it")
        name = f"{_path(cluster)}/nodePools/{desired.name}"
        changed = set(current.differences(desired))
        # Only the changed fields, as cluster-api-provider-gcp sends them (no nodeVersion or imageType).
        update: dict[str, Any] = {}
        if "labels" in changed:
            update["labels"] = gke.NodeLabels(labels=desired.label_map)
        if "taints" in changed:
            update["taints"] = gke.NodeTaints(taints=[_taint(t) for t in desired.taints])
        if "disk_size_gb" in changed and desired.disk_size_gb is not None:
            update["disk_size_gb"] = desired.disk_size_gb
        if "zones" in changed and desired.zones is not None:
            update["locations"] = list(desired.zones)
        if update:
            operation = self._call(
                self._client.update_node_pool, request=gke.UpdateNodePoolRequest(name=name, **update)
            )
            self._wait(cluster, operation, f"updating node pool {desired.name}")
        if "scaling" in changed or ("zones" in changed and not desired.scaling.autoscaling):
            scaling = desired.scaling
            if scaling.autoscaling:
                request = gke.SetNodePoolAutoscalingRequest(name=name, autoscaling=_autoscaling(scaling))
                operation = self._call(self._client.set_node_pool_autoscaling, request=request)
            else:
                if current.scaling.autoscaling:
                    off = gke.SetNodePoolAutoscalingRequest(name=name, autoscaling=gke.NodePoolAutoscaling())
                    operation = self._call(self._client.set_node_pool_autoscaling, request=off)
                    self._wait(cluster, operation, f"turning off autoscaling of {desired.name}")
                zones = desired.zones or current.zones or self._cluster_zones(cluster)
                size = gke.SetNodePoolSizeRequest(name=name, node_count=_per_zone(scaling.min, zones))
                operation = self._call(self._client.set_node_pool_size, request=size)
            self._wait(cluster, operation, f"scaling node pool {desired.name}")
        return self._read(cluster, desired.name)

    def adopt_pool(self, cluster: ClusterRef, name: str) -> PoolState:
        from google.cloud import container_v1 as gke

        path = f"{_path(cluster)}/nodePools/{name}"
        current = self._call(self._client.get_node_pool, name=path)
        if _observed(current).owned:
            return _observed(current)
        # UpdateNodePoolRequest.resource_labels replaces the whole set: keep the pool's own.
        labels = {**dict(current.config.resource_labels), OWNER_TAG_KEY: OWNER_TAG_VALUE}
        request = gke.UpdateNodePoolRequest(name=path, resource_labels=gke.ResourceLabels(labels=labels))
        operation = self._call(self._client.update_node_pool, request=request)
        self._wait(cluster, operation, f"adopting node pool {name}")
        return self._read(cluster, name)

    def delete_pool(self, cluster: ClusterRef, name: str) -> None:
        if not self._read(cluster, name).owned:
            raise NotOwned(f"node pool {name} was not created by provisioner; not deleting it")
        operation = self._call(self._client.delete_node_pool, name=f"{_path(cluster)}/nodePools/{name}")
        self._wait(cluster, operation, f"deleting node pool {name}")

    def discover(self, scope: ClusterRef) -> list[ClusterRef]:
        response = self._call(self._client.list_clusters, parent=f"projects/{scope.account}/locations/-")
        return [ClusterRef("gke", scope.account, found.location, found.name) for found in response.clusters]

    def kubernetes_version(self, cluster: ClusterRef) -> KubernetesVersion:
        # Cluster.current_master_version (google-cloud-container types; container v1 reference,
        # projects.locations.clusters): "The current software version of the master endpoint",
        # as 1.35.1-gke.1234000.
        version = self._cluster(cluster).current_master_version
        return reported_version(version, cluster, "currentMasterVersion")

    # The SDK

    @property
    def _client(self) -> Any:
        with self._client_lock:
            return self._make_client()

    def _make_client(self) -> Any:
        if self._client_instance is None:
            from google.cloud import container_v1 as gke

            if self._endpoint is None:
                options, credentials = None, None  # google.auth.default() inside the client
            else:
                from google.auth.credentials import AnonymousCredentials

                options, credentials = {"api_endpoint": self._endpoint}, AnonymousCredentials()
            with _sdk_errors():
                self._client_instance = gke.ClusterManagerClient(
                    transport="rest", client_options=options, credentials=credentials
                )
            transport = self._client_instance._transport
            _read_environment_once(transport._session, transport._host)
            size_connection_pool(transport._session, requests_at_once("gke"))
            _pace(transport._session)
        return self._client_instance

    def _list_node_pools_json(self, parent: str) -> dict[str, Any]:
        """ListNodePools as the SDK's REST transport sends it (its session, host, route, headers
        and errors), its body read as JSON: the SDK's JSON-to-protobuf conversion cost more CPU
        than the rest of a listing, and plan lists every cluster at once."""
        from google.api_core import exceptions, gapic_v1, path_template
        from google.cloud.container_v1.services.cluster_manager.transports import rest

        transport = self._client._transport
        stub = transport.list_node_pools
        transcoded = path_template.transcode(stub._get_http_options(), parent=parent)
        metadata = (
            rest.DEFAULT_CLIENT_INFO.to_grpc_metadata(),
            gapic_v1.routing_header.to_grpc_metadata((("parent", parent),)),
        )
        query = {**transcoded["query_params"], "$alt": "json;enum-encoding=int"}
        response = stub._get_response(
            transport._host, metadata, query, transport._session, REQUEST_TIMEOUT, transcoded
        )
        if response.status_code >= 400:
            raise exceptions.from_http_response(response)
        return response.json()

    def _cluster_zones(self, cluster: ClusterRef) -> tuple[str, ...]:
        """The cluster's node locations: where a pool that names no zones runs (NodePool.locations)."""
        return tuple(self._cluster(cluster).locations)

    def _cluster(self, cluster: ClusterRef) -> Any:
        """The cluster's Cluster message, from one get_cluster per cluster per run; an error is
        not kept, so a retry asks again."""
        path = _path(cluster)
        with self._clusters_lock:
            found = self._clusters.get(path)
        if found is None:
            found = self._call(self._client.get_cluster, name=path)
            with self._clusters_lock:
                found = self._clusters.setdefault(path, found)
        return found

    def _call(self, method: Any, **kwargs: Any) -> Any:
        """One RPC without the SDK's own retries: callers retry TRANSIENT errors with their
        backoff, so retries are never multiplied."""
        with _sdk_errors():
            return method(retry=None, timeout=REQUEST_TIMEOUT, **kwargs)

    def _read(self, cluster: ClusterRef, name: str) -> PoolState:
        return _observed(self._call(self._client.get_node_pool, name=f"{_path(cluster)}/nodePools/{name}"))

    def _wait(self, cluster: ClusterRef, operation: Any, what: str) -> None:
        """Poll the operation itself (operations.get) until DONE. Its first poll comes when earlier
        operations of its type took to end, by their own startTime and endTime."""
        from google.cloud import container_v1 as gke

        name = f"projects/{cluster.account}/locations/{cluster.location}/operations/{operation.name}"
        # proto-plus hands back a bare int for a type newer than the SDK: still a kind of its own.
        kind = getattr(operation.operation_type, "name", str(operation.operation_type))

        def finished() -> Any:
            current = self._call(self._client.get_operation, name=name)
            return current if current.status == gke.Operation.Status.DONE else None

        done = operation  # the answer that started it says how it stands
        if operation.status != gke.Operation.Status.DONE:
            first = self._times.first_poll(kind, self._polling)
            done = wait_until(
                finished, self._operation_timeout, what, schedule=self._polling, first_poll=first
            )
        if done.error.message or done.status_message:
            raise OperationFailed(f"{what}: {done.error.message or done.status_message}")
        self._times.record(kind, seconds_between(done.start_time, done.end_time))

    def _node_pool(self, desired: PoolState, zones: tuple[str, ...]) -> Any:
        """The NodePool to create in `zones`: the fleet's counts are the whole pool's, GKE's
        initialNodeCount is per zone, so autoscaling goes by total limits and a fixed count is
        spread evenly (an autoscaled pool starts with the fewest nodes per zone that reach its
        starting count, min or the replaced generation's nodes, within max; the autoscaler takes
        it from there). A replacement's generation markers go with the owner's resource label."""
        from google.cloud import container_v1 as gke

        config = gke.NodeConfig(
            machine_type=desired.instance_type,
            spot=desired.spot,
            labels=desired.label_map,
            resource_labels={OWNER_TAG_KEY: OWNER_TAG_VALUE, **generation_tags(desired)},
            taints=[_taint(t) for t in desired.taints],
            accelerators=[self._accelerator(desired)] if desired.gpus_per_node else [],
        )
        if desired.disk_size_gb is not None:
            config.disk_size_gb = desired.disk_size_gb
        scaling = desired.scaling
        if scaling.autoscaling:  # the fewest per zone that reach the start, never more than max allows
            initial = min(-(-starting_nodes(desired) // len(zones)), scaling.max // len(zones))
        else:
            initial = _per_zone(scaling.min, zones)
        pool = gke.NodePool(
            name=desired.name, config=config, initial_node_count=initial, locations=list(desired.zones or ())
        )
        if scaling.autoscaling:
            pool.autoscaling = _autoscaling(scaling)
        return pool

    @staticmethod
    def _accelerator(desired: PoolState) -> Any:
        from google.cloud import container_v1 as gke

        machine = hardware.load().instance_type("gke", desired.instance_type)
        if machine is None or machine.accelerator is None:
            raise InvalidRequest(f"{desired.instance_type} is not a GKE GPU machine type")
        accelerator = gke.AcceleratorConfig(
            accelerator_type=machine.accelerator,
            accelerator_count=desired.gpus_per_node,
            gpu_partition_size=desired.mig_setting or "",
            # GKE installs the NVIDIA driver itself (no GPU Operator on GKE), except on a DRA pool,
            # whose driver the user installs (GKE "Set up DRA": gpu-driver-version=disabled).
            gpu_driver_installation_config=gke.GPUDriverInstallationConfig(
                gpu_driver_version=gke.GPUDriverInstallationConfig.GPUDriverVersion[
                    _DRIVER_VERSION[desired.cloud_installs_driver is not False]
                ]
            ),
        )
        if desired.sharing is not None:
            accelerator.gpu_sharing_config = gke.GPUSharingConfig(
                gpu_sharing_strategy=gke.GPUSharingConfig.GPUSharingStrategy[desired.sharing.strategy],
                max_shared_clients_per_gpu=desired.sharing.clients_per_gpu,
            )
        return accelerator


# Whether GKE installs the driver -> GPUDriverInstallationConfig.GPUDriverVersion (LATEST and an
# unset version also install one; only INSTALLATION_DISABLED does not).
_DRIVER_VERSION = {True: "DEFAULT", False: "INSTALLATION_DISABLED"}
_NO_DRIVER = _DRIVER_VERSION[False]


def _autoscaling(scaling: Scaling) -> Any:
    """Autoscaling by the whole pool's bounds (NodePoolAutoscaling total limits, GKE 1.24.1+)."""
    from google.cloud import container_v1 as gke

    return gke.NodePoolAutoscaling(
        enabled=True, total_min_node_count=scaling.min, total_max_node_count=scaling.max
    )


def _per_zone(count: int, zones: tuple[str, ...]) -> int:
    """A fixed pool's count in each zone; InvalidRequest where the zones cannot share it evenly."""
    spread, left = divmod(count, len(zones))
    if left:
        raise InvalidRequest(
            f"{count} nodes cannot be spread evenly over the pool's {len(zones)} zones "
            f"({', '.join(zones)}): GKE runs the same number in each zone; give a multiple of {len(zones)}"
        )
    return spread


def _scaling(enabled: bool, limits: tuple[int, int, int, int], initial: int, zones: int) -> Scaling:
    """The whole pool's scaling from a NodePool's fields: total limits as they are, per-zone limits
    (a pool made with gcloud's --min-nodes) and a fixed size times its zones. `limits` is
    (minNodeCount, maxNodeCount, totalMinNodeCount, totalMaxNodeCount)."""
    zones = max(zones, 1)
    if not enabled:
        return Scaling.fixed(initial * zones)
    per_zone_min, per_zone_max, total_min, total_max = limits
    if total_min or total_max:
        return Scaling(total_min, total_max, autoscaling=True)
    return Scaling(per_zone_min * zones, per_zone_max * zones, autoscaling=True)


def _path(cluster: ClusterRef) -> str:
    return f"projects/{cluster.account}/locations/{cluster.location}/clusters/{cluster.name}"


def _taint(taint: Taint) -> Any:
    from google.cloud import container_v1 as gke

    effect = gke.NodeTaint.Effect[TAINT_EFFECT_CONSTANTS[taint.effect]]
    return gke.NodeTaint(key=taint.key, value=taint.value, effect=effect)


def _observed(pool: Any) -> PoolState:
    """The PoolState of a node pool, read from its raw protobuf message: proto-plus attribute
    access costs more CPU than the rest of a listing, and plan reads thousands of pools."""
    from google.cloud import container_v1 as gke

    message = type(pool).pb(pool)
    config = message.config
    accelerator = config.accelerators[0] if config.accelerators else None
    sharing = None
    if accelerator is not None and accelerator.gpu_sharing_config.gpu_sharing_strategy:
        shared = accelerator.gpu_sharing_config
        strategy = gke.GPUSharingConfig.GPUSharingStrategy(shared.gpu_sharing_strategy).name
        sharing = NativeSharing(strategy, shared.max_shared_clients_per_gpu)
    installs = None
    if accelerator is not None:
        version = accelerator.gpu_driver_installation_config.gpu_driver_version
        installs = gke.GPUDriverInstallationConfig.GPUDriverVersion(version).name != _NO_DRIVER
    autoscaling = message.autoscaling
    zones = tuple(message.locations)
    limits = (
        autoscaling.min_node_count,
        autoscaling.max_node_count,
        autoscaling.total_min_node_count,
        autoscaling.total_max_node_count,
    )
    scaling = _scaling(autoscaling.enabled, limits, message.initial_node_count, len(zones))
    effects = gke.NodeTaint.Effect
    fleet_name, generation = read_generation_tags(dict(config.resource_labels))
    return PoolState(
        name=message.name,
        instance_type=config.machine_type,
        gpus_per_node=accelerator.accelerator_count if accelerator is not None else 0,
        mig_setting=(accelerator.gpu_partition_size or None) if accelerator is not None else None,
        sharing=sharing,
        spot=config.spot,
        disk_size_gb=config.disk_size_gb or None,
        scaling=scaling,
        labels=tuple((k, v) for k, v in config.labels.items() if not k.startswith(GKE_LABEL_PREFIX)),
        taints=tuple(
            Taint(t.key, t.value, TAINT_EFFECTS_BY_CONSTANT[effects(t.effect).name])  # type: ignore[arg-type]
            for t in config.taints
        ),
        owned=config.resource_labels.get(OWNER_TAG_KEY) == OWNER_TAG_VALUE,
        status=_STATUS.get(gke.NodePool.Status(message.status).name, "changing"),
        nodes=None,  # a GKE NodePool carries no current size: its instance groups do
        zones=zones or None,
        cloud_installs_driver=installs,
        fleet_name=fleet_name,
        generation=generation,
    )


_PROJECT = re.compile(r"/projects/([^/]+)/")


def _pace(session: Any) -> None:
    """Every request of the SDK's session (its RPCs and the listing sent through it) takes its
    token from its project's Kubernetes Engine API quota (provisioner.quotas) first."""
    send = session.request

    def paced(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        project = _PROJECT.search(url)
        if project is None:  # no project's quota counts it (there is none such in this API)
            return send(method, url, *args, **kwargs)
        scope = scope_of("gke", account=project.group(1))
        PACER.pace(scope, method_kind(method))
        response = send(method, url, *args, **kwargs)
        if response.status_code == 429:
            retry_after = retry_after_seconds(response.headers.get("Retry-After"))
            PACER.throttled(scope, method_kind(method), "", retry_after)
        return response

    session.request = paced


def _read_environment_once(session: Any, url: str) -> None:
    """requests looks up proxy and CA bundle variables on every request, a good part of its CPU
    per call; the endpoint is fixed, so take what it would find for it once, then stop looking."""
    import os

    import requests.utils

    session.proxies.update(requests.utils.get_environ_proxies(url))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle and session.verify is True:
        session.verify = bundle
    session.trust_env = False


_AUTOSCALING_FIELDS = ("minNodeCount", "maxNodeCount", "totalMinNodeCount", "totalMaxNodeCount")


def _observed_json(pool: dict[str, Any]) -> PoolState:
    """The PoolState of a node pool from its proto3 JSON (camelCase names, 64-bit integers as
    strings, enums as numbers or names, defaults omitted), equal to `_observed` of its message."""
    from google.cloud import container_v1 as gke

    def enum(kind: Any, value: Any) -> str:
        return kind(value).name if isinstance(value, int) else kind[value].name

    config = pool.get("config", {})
    accelerators = config.get("accelerators") or ()
    accelerator = accelerators[0] if accelerators else None
    sharing = None
    shared = (accelerator or {}).get("gpuSharingConfig", {})
    strategy = shared.get("gpuSharingStrategy", 0)
    if accelerator is not None and strategy not in (0, "GPU_SHARING_STRATEGY_UNSPECIFIED"):
        sharing = NativeSharing(
            enum(gke.GPUSharingConfig.GPUSharingStrategy, strategy),
            int(shared.get("maxSharedClientsPerGpu", 0)),
        )
    installs = None
    if accelerator is not None:
        version = accelerator.get("gpuDriverInstallationConfig", {}).get("gpuDriverVersion", 0)
        installs = enum(gke.GPUDriverInstallationConfig.GPUDriverVersion, version) != _NO_DRIVER
    autoscaling = pool.get("autoscaling", {})
    zones = tuple(pool.get("locations", ()))
    limits = tuple(int(autoscaling.get(f, 0)) for f in _AUTOSCALING_FIELDS)
    scaling = _scaling(
        autoscaling.get("enabled", False), limits, int(pool.get("initialNodeCount", 0)), len(zones)
    )
    resource_labels = config.get("resourceLabels", {})
    fleet_name, generation = read_generation_tags(resource_labels)
    return PoolState(
        name=pool.get("name", ""),
        instance_type=config.get("machineType", ""),
        gpus_per_node=int(accelerator.get("acceleratorCount", 0)) if accelerator is not None else 0,
        mig_setting=(accelerator.get("gpuPartitionSize") or None) if accelerator is not None else None,
        sharing=sharing,
        spot=config.get("spot", False),
        disk_size_gb=int(config.get("diskSizeGb", 0)) or None,
        scaling=scaling,
        labels=tuple(
            (k, v) for k, v in config.get("labels", {}).items() if not k.startswith(GKE_LABEL_PREFIX)
        ),
        taints=tuple(
            Taint(
                t.get("key", ""),
                t.get("value", ""),
                TAINT_EFFECTS_BY_CONSTANT[enum(gke.NodeTaint.Effect, t.get("effect", 0))],  # type: ignore[arg-type]
            )
            for t in config.get("taints", ())
        ),
        owned=resource_labels.get(OWNER_TAG_KEY) == OWNER_TAG_VALUE,
        status=_STATUS.get(enum(gke.NodePool.Status, pool.get("status", 0)), "changing"),
        nodes=None,  # a GKE NodePool carries no current size: its instance groups do
        zones=zones or None,
        cloud_installs_driver=installs,
        fleet_name=fleet_name,
        generation=generation,
    )


@contextlib.contextmanager
def _sdk_errors() -> Iterator[None]:
    import requests
    from google.api_core import exceptions
    from google.auth import exceptions as auth_exceptions

    try:
        yield
    except auth_exceptions.GoogleAuthError as exc:
        raise AuthenticationFailed(f"Google Cloud credentials: {exc}") from None
    except exceptions.GoogleAPICallError as exc:
        raise _driver_error(exc) from None
    except requests.RequestException as exc:  # no answer at all: refused, reset, timed out
        raise Unavailable(f"GKE API unreachable: {type(exc).__name__}") from None


def _driver_error(exc: Any) -> CloudError:
    """google.api_core maps HTTP codes to exceptions; the body's status names the google.rpc code."""
    response = getattr(exc, "response", None)
    code, retry_after = "", None
    if response is not None:
        with contextlib.suppress(ValueError, AttributeError):
            code = response.json().get("error", {}).get("status", "")
        retry_after = retry_after_seconds(response.headers.get("Retry-After"))
    return cloud_error(getattr(exc, "code", None), code, exc.message or str(exc), _CODES, retry_after)
