"""resource.k8s.io/v1 defaulting and validation, as the API server applies them before it stores a
DeviceClass, ResourceClaim or ResourceClaimTemplate.

Written from kubernetes/kubernetes pkg/apis/resource/validation/validation.go (validateDeviceClaim,
validateDeviceRequest: "exactly one of `exactly` or `firstAvailable` is required",
validateExactDeviceRequest, validateDeviceAllocationMode, validateSelector / validateCELSelector,
validateDeviceClaimConfiguration with validateRequestNameRef, validateOpaqueConfiguration with
validateRawExtension, validateDeviceClassSpec), pkg/apis/resource/types.go (the size limits), the
v1 defaults (allocationMode ExactCount, count 1) and k8s.io/apimachinery pkg/util/validation
(DNS labels and subdomains) and field/errors.go (how each error is worded: ErrorBody).

A cause is (field path, reason, message without the path), as `Invalid.of` takes it. CEL
expressions are checked for presence and length only; compiling them is cel.py's.
"""

from __future__ import annotations

import json
import re
from typing import Any

Cause = tuple[str, str, str]

DEVICE_REQUESTS_MAX = 32  # resource.DeviceRequestsMaxSize
FIRST_AVAILABLE_MAX = 8  # resource.FirstAvailableDeviceRequestMaxSize
DEVICE_SELECTORS_MAX = 32  # resource.DeviceSelectorsMaxSize
DEVICE_CONFIG_MAX = 32  # resource.DeviceConfigMaxSize
CEL_EXPRESSION_MAX = 10 * 1024  # resource.CELSelectorExpressionMaxLength
OPAQUE_PARAMETERS_MAX = 10 * 1024  # resource.OpaqueParametersMaxLength
DRIVER_NAME_MAX = 63  # corevalidation.ValidateCSIDriverName
ALLOCATION_MODES = ("All", "ExactCount")

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    f"validation is '{_LABEL}')"
)
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    f"validation is '{_SUBDOMAIN}')"
)
_REQUEST_REF = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)
# cel-go's parse error for an empty expression, prefixed as CompileCELExpression does.
_EMPTY_CEL = (
    "compilation failed: ERROR: <input>:1:1: Syntax error: mismatched input '<EOF>' expecting "
    "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
    "BYTES, IDENTIFIER}"
)


def _shown(value: Any) -> str:
    """A bad value as field.Error.ErrorBody prints it: strings quoted, nil as null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict | list):  # json.Marshal of a compound value: compact, keys sorted
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return json.dumps(str(value))


def required(path: str, detail: str = "") -> Cause:
    return (path, "FieldValueRequired", "Required value" + (f": {detail}" if detail else ""))


def invalid(path: str, value: Any, detail: str) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {_shown(value)}: {detail}")


def duplicate(path: str, value: Any) -> Cause:
    return (path, "FieldValueDuplicate", f"Duplicate value: {_shown(value)}")


def not_supported(path: str, value: Any, supported: tuple[str, ...]) -> Cause:
    values = ", ".join(json.dumps(v) for v in supported)
    return (path, "FieldValueNotSupported", f"Unsupported value: {_shown(value)}: supported values: {values}")


def too_long(path: str, limit: int) -> Cause:
    return (path, "FieldValueTooLong", f"Too long: must have at most {limit} bytes")


def too_many(path: str, count: int, limit: int) -> Cause:
    return (path, "FieldValueTooMany", f"Too many: {count}: must have at most {limit} items")


def _label_errors(value: str) -> list[str]:
    """IsDNS1123Label's messages."""
    errors = ["must be no more than 63 characters"] if len(value) > 63 else []
    return errors + ([] if re.fullmatch(_LABEL, value) else [_LABEL_MESSAGE])


def _subdomain_errors(value: str) -> list[str]:
    """IsDNS1123Subdomain's messages."""
    errors = ["must be no more than 253 characters"] if len(value) > 253 else []
    return errors + ([] if re.fullmatch(_SUBDOMAIN, value) else [_SUBDOMAIN_MESSAGE])


def dns_label(value: str, path: str) -> list[Cause]:
    """ValidateDNS1123Label: each message an Invalid on `path`."""
    return [invalid(path, value, message) for message in _label_errors(value)]


def dns_subdomain(value: str, path: str) -> list[Cause]:
    """ValidateDNS1123Subdomain: each message an Invalid on `path`."""
    return [invalid(path, value, message) for message in _subdomain_errors(value)]


def driver_name(value: Any, path: str) -> list[Cause]:
    """corevalidation.ValidateCSIDriverName: required, at most 63, a DNS subdomain (lowercased)."""
    text = value if isinstance(value, str) else ""
    if not text:
        return [required(path)]
    causes = [too_long(path, DRIVER_NAME_MAX)] if len(text) > DRIVER_NAME_MAX else []
    return causes + [invalid(path, text, message) for message in _subdomain_errors(text.lower())]


def object_name(obj: dict[str, Any]) -> list[Cause]:
    """metadata.name: a DNS subdomain (NameIsDNSSubdomain; DeviceClass's LongName is the same rule)."""
    name = (obj.get("metadata") or {}).get("name") or ""
    return dns_subdomain(name, "metadata.name") if name else []


# --- Defaulting (k8s.io/api resource/v1 defaults: SetDefaults_ExactDeviceRequest, _DeviceSubRequest)


def default_claim_spec(spec: dict[str, Any]) -> None:
    """allocationMode ExactCount where unset, and count 1 for ExactCount where unset (0)."""
    for request in ((spec.get("devices") or {}).get("requests")) or []:
        if not isinstance(request, dict):
            continue
        for exact in [request.get("exactly"), *(request.get("firstAvailable") or [])]:
            if isinstance(exact, dict):
                exact.setdefault("allocationMode", "ExactCount")
                if exact["allocationMode"] == "ExactCount" and not exact.get("count"):
                    exact["count"] = 1


# --- Validation


def claim(obj: dict[str, Any]) -> list[Cause]:
    """ValidateResourceClaim."""
    return object_name(obj) + claim_spec(obj.get("spec") or {}, "spec")


def claim_template(obj: dict[str, Any]) -> list[Cause]:
    """ValidateResourceClaimTemplate: the claim spec lives at spec.spec."""
    inner = (obj.get("spec") or {}).get("spec") or {}
    return object_name(obj) + claim_spec(inner, "spec.spec")


def device_class(obj: dict[str, Any]) -> list[Cause]:
    """ValidateDeviceClass: its selectors, config and extendedResourceName."""
    spec = obj.get("spec") or {}
    causes = object_name(obj)
    causes += _each(spec.get("selectors"), DEVICE_SELECTORS_MAX, "spec.selectors", _selector)
    causes += _each(spec.get("config"), DEVICE_CONFIG_MAX, "spec.config", _configuration)
    name = spec.get("extendedResourceName")
    if name is not None and not _is_extended_resource_name(name):
        causes.append(invalid("spec.extendedResourceName", name, "must be a valid extended resource name"))
    return causes


def claim_spec(spec: dict[str, Any], path: str) -> list[Cause]:
    """validateResourceClaimSpec / validateDeviceClaim."""
    devices = spec.get("devices") or {}
    requests = devices.get("requests") or []
    names = _request_names(requests)
    causes = _set(requests, DEVICE_REQUESTS_MAX, f"{path}.devices.requests", _request, _name_of)
    causes += _each(
        devices.get("constraints"),
        DEVICE_REQUESTS_MAX,
        f"{path}.devices.constraints",
        lambda c, p: _constraint(c, p, names),
    )
    causes += _each(
        devices.get("config"),
        DEVICE_CONFIG_MAX,
        f"{path}.devices.config",
        lambda c, p: _claim_configuration(c, p, names),
    )
    return causes


def _name_of(item: Any) -> Any:
    return item.get("name") if isinstance(item, dict) else None


def _each(items: Any, limit: int, path: str, check: Any) -> list[Cause]:
    """validateSlice: at most `limit` items (then nothing else is checked), each checked."""
    items = items or []
    if len(items) > limit:
        return [too_many(path, len(items), limit)]
    causes: list[Cause] = []
    for i, item in enumerate(items):
        causes += check(item if isinstance(item, dict) else {}, f"{path}[{i}]")
    return causes


def _set(items: list[Any], limit: int, path: str, check: Any, key: Any) -> list[Cause]:
    """validateSet: validateSlice, then a Duplicate for each item whose key was seen before."""
    causes = _each(items, limit, path, check)
    if len(items) > limit:
        return causes
    seen: set[Any] = set()
    for i, item in enumerate(items):
        value = key(item)
        if value in seen:
            causes.append(duplicate(f"{path}[{i}]", value))
        seen.add(value)
    return causes


def _request_names(requests: list[Any]) -> dict[str, set[str] | None]:
    """gatherRequestNames: request -> its subrequests' names (None: no firstAvailable)."""
    names: dict[str, set[str] | None] = {}
    for request in requests:
        if not isinstance(request, dict):
            continue
        subs = request.get("firstAvailable") or []
        names[str(request.get("name") or "")] = (
            {str(s.get("name") or "") for s in subs if isinstance(s, dict)} if subs else None
        )
    return names


def _request(request: dict[str, Any], path: str) -> list[Cause]:
    """validateDeviceRequest: a DNS-label name, then exactly one of exactly / firstAvailable."""
    causes = dns_label(str(request.get("name") or ""), f"{path}.name")
    exactly, first = request.get("exactly"), request.get("firstAvailable") or []
    if exactly is None and not first:
        causes.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif exactly is not None and first:
        causes.append(
            invalid(
                path,
                None,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )
        )
    elif first:
        causes += _set(first, FIRST_AVAILABLE_MAX, f"{path}.firstAvailable", _subrequest, _name_of)
    else:
        causes += _exact(exactly if isinstance(exactly, dict) else {}, f"{path}.exactly")
    return causes


def _subrequest(sub: dict[str, Any], path: str) -> list[Cause]:
    """validateDeviceSubRequest: a DNS-label name, then the fields `exactly` has."""
    return dns_label(str(sub.get("name") or ""), f"{path}.name") + _exact(sub, path)


def _exact(exact: dict[str, Any], path: str) -> list[Cause]:
    """validateExactDeviceRequest (a firstAvailable subrequest has the same fields)."""
    causes: list[Cause] = []
    name = exact.get("deviceClassName") or ""
    if not name:
        causes.append(required(f"{path}.deviceClassName"))
    else:
        causes += dns_subdomain(str(name), f"{path}.deviceClassName")
    causes += _each(exact.get("selectors"), DEVICE_SELECTORS_MAX, f"{path}.selectors", _selector)
    causes += _allocation_mode(exact.get("allocationMode") or "", exact.get("count") or 0, path)
    return causes


def _allocation_mode(mode: str, count: Any, path: str) -> list[Cause]:
    """validateDeviceAllocationMode."""
    if mode == "All":
        return (
            [invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")]
            if count
            else []
        )
    if mode == "ExactCount":
        return [invalid(f"{path}.count", count, "must be greater than zero")] if int(count) <= 0 else []
    return [not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES)]


def _selector(selector: dict[str, Any], path: str) -> list[Cause]:
    """validateSelector / validateCELSelector: a cel selector whose expression fits the limit."""
    cel = selector.get("cel")
    if not isinstance(cel, dict):
        return [required(f"{path}.cel")]
    expression = cel.get("expression") or ""
    if len(expression.encode()) > CEL_EXPRESSION_MAX:
        return [too_long(f"{path}.cel.expression", CEL_EXPRESSION_MAX)]
    if not expression.strip():
        return [invalid(f"{path}.cel.expression", expression, _EMPTY_CEL)]
    return []


def _constraint(constraint: dict[str, Any], path: str, names: dict[str, set[str] | None]) -> list[Cause]:
    """validateDeviceConstraint: its requests name requests of the claim; matchAttribute set."""
    causes = _set(
        constraint.get("requests") or [],
        DEVICE_REQUESTS_MAX,
        f"{path}.requests",
        lambda _, p: [],
        lambda name: name,
    )
    for i, name in enumerate(constraint.get("requests") or []):
        causes += _request_ref(name, f"{path}.requests[{i}]", names)
    attribute = constraint.get("matchAttribute")
    if attribute is None and constraint.get("distinctAttribute") is None:
        causes.append(required(f"{path}.matchAttribute"))
    elif isinstance(attribute, str) and "/" not in attribute:
        causes.append(
            invalid(
                f"{path}.matchAttribute",
                attribute,
                "a fully qualified name must be a domain and a name separated by a slash",
            )
        )
    return causes


def _claim_configuration(config: dict[str, Any], path: str, names: dict[str, set[str] | None]) -> list[Cause]:
    """validateDeviceClaimConfiguration: each of config.requests names a request, then the config."""
    causes: list[Cause] = []
    for i, name in enumerate(config.get("requests") or []):
        causes += _request_ref(name, f"{path}.requests[{i}]", names)
    seen: set[Any] = set()
    for i, name in enumerate(config.get("requests") or []):
        if name in seen:
            causes.append(duplicate(f"{path}.requests[{i}]", name))
        seen.add(name)
    return causes + _configuration(config, path)


def _request_ref(name: Any, path: str, names: dict[str, set[str] | None]) -> list[Cause]:
    """validateRequestNameRef: "<request>" or "<request>/<subrequest>" of this claim."""
    text = str(name or "")
    segments = text.split("/")
    if len(segments) > 2:
        return [invalid(path, text, _REQUEST_REF)]
    causes: list[Cause] = []
    for segment in segments:
        causes += dns_label(segment, path)
    subs = names.get(segments[0], ...)
    known = subs is not ... and (len(segments) == 1 or (subs is not None and segments[1] in subs))
    if not known:
        causes.append(invalid(path, text, _REQUEST_REF))
    return causes


def _configuration(config: dict[str, Any], path: str) -> list[Cause]:
    """validateDeviceConfiguration / validateOpaqueConfiguration / validateRawExtension."""
    opaque = config.get("opaque")
    if not isinstance(opaque, dict):
        return [required(f"{path}.opaque")]
    causes = driver_name(opaque.get("driver"), f"{path}.opaque.driver")
    parameters = opaque.get("parameters")
    where = f"{path}.opaque.parameters"
    if "parameters" not in opaque or parameters is None:
        causes.append(required(where))
    elif len(json.dumps(parameters, separators=(",", ":")).encode()) > OPAQUE_PARAMETERS_MAX:
        causes.append(too_long(where, OPAQUE_PARAMETERS_MAX))
    elif not isinstance(parameters, dict):
        causes.append(invalid(where, "<value omitted>", "must be a valid JSON object"))
    return causes


def _is_extended_resource_name(name: Any) -> bool:
    """v1helper.IsExtendedResourceName: a qualified name with a domain outside kubernetes.io,
    not prefixed requests., and valid as requests.<name> (a qualified name)."""
    if not isinstance(name, str) or "/" not in name:
        return False
    if "kubernetes.io/" in name or name.startswith("requests."):  # IsNativeResource, the quota prefix
        return False
    prefix, _, local = name.partition("/")
    return (
        bool(re.fullmatch(_SUBDOMAIN, prefix))
        and bool(re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", local))
        and len(local) <= 63
    )
