"""What the NVIDIA DRA driver's kubelet plugin checks of a claim's opaque config when it prepares
the claim's devices (NodePrepareResources), and how the kubelet reports a failure.

Sources (kubernetes-sigs/dra-driver-nvidia-gpu at 95932046):
- cmd/gpu-kubelet-plugin/device_state.go: getDeviceConfigsWithDefaults / GetOpaqueDeviceConfigs
  (class configs first, then the claim's; other drivers' configs skipped; StrictDecoder), then
  getConfigResultsMap (per allocated device, the last config naming its request, else the last
  config for all requests that fits its type; a named config of the wrong type is an error), then
  prepareDevices (Normalize, Validate: "error validating GPU config: %w"), Prepare ("prepare
  devices failed: %w"); driver.go nodePrepareResource ("error preparing devices for claim
  <ns>/<name>:<uid>: %w").
- api/nvidia.com/resource/v1beta1: api.go (group resource.nvidia.com, version v1beta1, kinds),
  gpuconfig.go / migconfig.go (Normalize, Validate), sharing.go, validate.go (the messages).
The kubelet wraps it: pkg/kubelet/cm/dra/manager.go "NodePrepareResources failed for ResourceClaim
%s: %s", and the pod gets a FailedPrepareDynamicResources event "Failed to prepare dynamic resources:
prepare dynamic resources: ..." (as seen on a real cluster's `kubectl describe pod`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

DRIVER = "gpu.nvidia.com"
API_VERSION = "resource.nvidia.com/v1beta1"
TIME_SLICING, MPS = "TimeSlicing", "MPS"
GATE_FOR = {TIME_SLICING: "TimeSlicingSettings", MPS: "MPSSupport"}  # validate.go
INTERVALS = ("Default", "Short", "Medium", "Long")
# The fields each kind decodes (StrictDecoder rejects any other); VfioDeviceConfig has none.
FIELDS: dict[str, dict[str, Any]] = {
    "GpuConfig": {"sharing": {"strategy": None, "timeSlicingConfig": {"interval": None}, "mpsConfig": None}},
    "MigDeviceConfig": {"sharing": {"strategy": None, "mpsConfig": None}},
    "VfioDeviceConfig": {},
}
MPS_FIELDS = ("defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit")
MPS_FIELDS += ("defaultPerDevicePinnedMemoryLimit", "multiUser")
APPLIES_TO = {"GpuConfig": "gpu", "MigDeviceConfig": "mig", "VfioDeviceConfig": "vfio"}
FAILED_PREPARE = "FailedPrepareDynamicResources"


class PrepareError(Exception):
    """The plugin's error preparing one claim's devices."""


def prepare_error(
    claim: Mapping[str, Any], device_type: Callable[[Mapping[str, Any]], str], gates: Collection[str]
) -> str | None:
    """Why the plugin refuses to prepare `claim` (already allocated), or None. `device_type`
    gives an allocation result's device's `type` attribute; `gates` the driver's enabled
    feature gates."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    devices = allocation.get("devices") or {}
    try:
        configs = _decoded(devices.get("config") or [])
        for config in _applied(configs, devices.get("results") or [], device_type):
            _validate(config, gates)
    except PrepareError as error:
        metadata = claim.get("metadata") or {}
        where = f"{metadata.get('namespace')}/{metadata.get('name')}:{metadata.get('uid')}"
        return f"error preparing devices for claim {where}: prepare devices failed: {error}"
    return None


def kubelet_message(claim: Mapping[str, Any], plugin_error: str) -> str:
    """The FailedPrepareDynamicResources event's message."""
    name = (claim.get("metadata") or {}).get("name")
    return (
        "Failed to prepare dynamic resources: prepare dynamic resources: "
        f"NodePrepareResources failed for ResourceClaim {name}: {plugin_error}"
    )


def _decoded(raw: list[Mapping[str, Any]]) -> list[tuple[list[str], dict[str, Any]]]:
    """GetOpaqueDeviceConfigs, with the defaults (a GpuConfig and a MigDeviceConfig for every
    request) first: (requests, parameters) in rising precedence."""
    ordered = [c for c in raw if c.get("source") == "FromClass"] + [
        c for c in raw if c.get("source") == "FromClaim"
    ]
    out: list[tuple[list[str], dict[str, Any]]] = [
        ([], {"kind": "GpuConfig"}),
        ([], {"kind": "MigDeviceConfig"}),
    ]
    for config in raw:
        if config.get("source") not in ("FromClass", "FromClaim"):
            raise PrepareError(
                f"error getting opaque device configs: invalid config source: {config.get('source')}"
            )
    for config in ordered:
        opaque = config.get("opaque")
        if opaque is None:
            raise PrepareError(
                "error getting opaque device configs: only opaque parameters are supported by this driver"
            )
        if opaque.get("driver") != DRIVER:
            continue
        out.append((list(config.get("requests") or []), _decode(opaque.get("parameters"))))
    return out


def _decode(parameters: Any) -> dict[str, Any]:
    def fail(why: str) -> PrepareError:
        return PrepareError(f"error getting opaque device configs: error decoding config parameters: {why}")

    if not isinstance(parameters, Mapping):
        raise fail("parameters are not a JSON object")
    kind, version = parameters.get("kind"), parameters.get("apiVersion")
    if not kind:
        raise fail("Object 'Kind' is missing in the parameters")
    # apimachinery's NotRegisteredError text (the scheme's own name left out here).
    if version != API_VERSION or kind not in FIELDS:
        raise fail(f'no kind "{kind}" is registered for version "{version}"')
    unknown = _unknown_fields(
        {k: v for k, v in parameters.items() if k not in ("kind", "apiVersion")}, FIELDS[kind]
    )
    if unknown:
        raise fail(f'strict decoding error: unknown field "{unknown}"')
    return dict(parameters)


def _unknown_fields(value: Mapping[str, Any], known: Mapping[str, Any], prefix: str = "") -> str | None:
    for key, item in value.items():
        if key not in known:
            return prefix + key
        inner = known[key]
        if key == "mpsConfig" and isinstance(item, Mapping):
            inner = dict.fromkeys(MPS_FIELDS)
        if isinstance(inner, Mapping) and isinstance(item, Mapping):
            found = _unknown_fields(item, inner, f"{prefix}{key}.")
            if found:
                return found
    return None


def _applied(
    configs: list[tuple[list[str], dict[str, Any]]],
    results: list[Mapping[str, Any]],
    device_type: Callable[[Mapping[str, Any]], str],
) -> list[dict[str, Any]]:
    """getConfigResultsMap: the configs that apply to at least one of the driver's devices."""
    applied: list[dict[str, Any]] = []
    for result in results:
        if result.get("driver") != DRIVER:
            continue
        kind_of_device = device_type(result)
        for requests, config in reversed(configs):
            fits = APPLIES_TO.get(config["kind"]) == kind_of_device
            if result.get("request") in requests:
                if not fits:
                    raise PrepareError(
                        f'cannot apply {config["kind"]} to device "{result.get("device")}" of type '
                        f'"{kind_of_device}" (request: {result.get("request")})'
                    )
            elif requests or not fits:
                continue
            if all(config is not seen for seen in applied):
                applied.append(config)
            break
    return applied


def _validate(config: Mapping[str, Any], gates: Collection[str]) -> None:
    """Normalize then Validate (gpuconfig.go, migconfig.go, validate.go)."""
    sharing = config.get("sharing")
    if config["kind"] == "VfioDeviceConfig" or sharing is None:
        return
    strategy = sharing.get("strategy")
    if strategy not in GATE_FOR:
        raise PrepareError(
            f"error validating GPU config: unknown GPU sharing strategy: {strategy}, "
            f"supported GPU sharing strategies: {TIME_SLICING}, {MPS}"
        )
    if GATE_FOR[strategy] not in gates:
        raise PrepareError(
            f'error validating GPU config: "{strategy}" is selected as the GPU sharing strategy, '
            f'but the "{GATE_FOR[strategy]}" feature gate is not enabled'
        )
    if strategy == TIME_SLICING and config["kind"] == "GpuConfig":
        interval = (sharing.get("timeSlicingConfig") or {"interval": "Default"}).get("interval") or "Default"
        if interval not in INTERVALS:
            raise PrepareError(
                f"error validating GPU config: unknown time-slice interval: {interval}, "
                f"supported time-slice intervals: {', '.join(INTERVALS)}"
            )
    if strategy == MPS:
        percentage = (sharing.get("mpsConfig") or {}).get("defaultActiveThreadPercentage")
        if isinstance(percentage, int) and percentage < 0:
            raise PrepareError("error validating GPU config: active thread percentage must not be negative")
        if isinstance(percentage, int) and percentage > 100:
            raise PrepareError(
                "error validating GPU config: active thread percentage must not be greater than 100"
            )
