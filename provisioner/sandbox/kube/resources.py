"""The cluster's resource.k8s.io/v1 objects users write: DeviceClasses (cluster-scoped),
ResourceClaims and ResourceClaimTemplates (namespaced), stored whole with their field ownership
(fields.py), defaulted and validated as the API server does (validation.py).

What the API server's registry strategies add (kubernetes pkg/registry/resource/*/strategy.go):
a DeviceClass gets generation 1 and a bump on each spec change, and drops
spec.extendedResourceName where the DRAExtendedResource gate is off, unless the stored class
already uses it (dropDisabledDRAExtendedResourceFields); a ResourceClaim's and a template's spec
are immutable; a claim's status is written only through its /status subresource (the scheduler
writes the allocation there), and a write to the claim itself keeps the stored status.

ResourceSlices are not stored here: what the DRA kubelet plugins publish is computed per read
(dra.py), as nodes are.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provisioner.sandbox.kube import fields, validation, versions
from provisioner.sandbox.kube.exceptions import AlreadyExists, BadRequest, Conflict, Invalid, NotFound
from provisioner.sandbox.kube.objects import generate_name, merge_patch, stamp
from provisioner.sandbox.kube.selectors import field_selector, label_selector

GROUP, VERSION = "resource.k8s.io", "v1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
ATOMIC = ("spec",)  # a spec is one field to server-side apply here (owned whole, not per leaf)
Key = tuple[str, str, str]  # resource, namespace ("" when cluster-scoped), name


@dataclass(frozen=True)
class Kind:
    """One stored resource.k8s.io kind, as the API serves it."""

    resource: str  # the plural the URL names
    kind: str
    namespaced: bool
    validate: Callable[[dict[str, Any]], list[validation.Cause]]
    default: Callable[[dict[str, Any]], None] = lambda obj: None
    immutable_spec: bool = False
    has_status: bool = False


KINDS: dict[str, Kind] = {
    "deviceclasses": Kind("deviceclasses", "DeviceClass", False, validation.device_class),
    "resourceclaims": Kind(
        "resourceclaims",
        "ResourceClaim",
        True,
        validation.claim,
        lambda obj: validation.default_claim_spec(obj.setdefault("spec", {})),
        immutable_spec=True,
        has_status=True,
    ),
    "resourceclaimtemplates": Kind(
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        True,
        validation.claim_template,
        lambda obj: validation.default_claim_spec(obj.setdefault("spec", {}).setdefault("spec", {})),
        immutable_spec=True,
    ),
}
SELECTABLE = ("metadata.name", "metadata.namespace")
# The fields a ResourceSlice list selects on (pkg/registry/resource/resourceslice/strategy.go,
# toSelectableFields: spec.nodeName and spec.driver, with metadata.name).
SLICE_SELECTABLE = ("metadata.name", "spec.nodeName", "spec.driver")


def slices_matching(
    slices: list[dict[str, Any]], label_selector_text: str = "", field_selector_text: str = ""
) -> list[dict[str, Any]]:
    """The ResourceSlices a list with these selectors returns."""
    labels = label_selector(label_selector_text)
    selected = field_selector(field_selector_text, "resourceslices", SLICE_SELECTABLE, _slice_fields)
    return [s for s in slices if labels(s["metadata"].get("labels") or {}) and selected(s)]


def _slice_fields(obj: dict[str, Any]) -> dict[str, str]:
    spec = obj.get("spec") or {}
    return {
        "metadata.name": obj["metadata"]["name"],
        "spec.nodeName": spec.get("nodeName") or "",
        "spec.driver": spec.get("driver") or "",
    }


class ResourceObjects:
    """Create, read, replace, patch, apply and delete the stored resource.k8s.io kinds; the caller
    holds the cluster's lock. `revisions` is the cluster's counter; `version` the cluster's
    Kubernetes version (for the DRAExtendedResource default)."""

    def __init__(self, revisions: Any, version: str) -> None:
        self.revisions = revisions
        self.version = version
        self.stored: dict[Key, dict[str, Any]] = {}
        self.managed: dict[Key, list[fields.Entry]] = {}

    def saved(self) -> tuple[dict[Key, dict[str, Any]], dict[Key, list[fields.Entry]]]:
        return copy.deepcopy(self.stored), copy.deepcopy(self.managed)

    def restore(self, saved: tuple[dict[Key, dict[str, Any]], dict[Key, list[fields.Entry]]]) -> None:
        self.stored, self.managed = saved

    def namespaces(self) -> set[str]:
        return {ns for _, ns, _ in self.stored if ns}

    # Reading

    def exists(self, resource: str, namespace: str, name: str) -> bool:
        return (resource, namespace, name) in self.stored

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        key = (resource, namespace, name)
        if key not in self.stored:
            raise NotFound.of(f"{resource}.{GROUP}", name)
        return self._rendered(key)

    def matching(
        self,
        resource: str,
        namespace: str | None,
        label_selector_text: str = "",
        field_selector_text: str = "",
    ) -> list[dict[str, Any]]:
        """Objects of `resource` (in `namespace`, or every one for None), sorted by namespace and name."""
        labels = label_selector(label_selector_text)
        selected = field_selector(field_selector_text, resource, SELECTABLE, _meta_fields)
        return [
            self._rendered(key)
            for key, obj in sorted(self.stored.items())
            if key[0] == resource
            and (namespace is None or key[1] == namespace)
            and labels(obj["metadata"].get("labels") or {})
            and selected(obj)
        ]

    # Writing the object

    def create(self, resource: str, namespace: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
        kind = KINDS[resource]
        obj = self._incoming(kind, namespace, None, body)
        key = (resource, namespace, obj["metadata"]["name"])
        if key in self.stored:
            raise AlreadyExists.of(f"{resource}.{GROUP}", key[2])
        obj = self._admitted(kind, obj, None)
        entries = self.managed.setdefault(key, [])
        fields.update(entries, {}, _leaves(obj), manager, api_version=GROUP_VERSION)
        return self._store(key, obj, None)

    def replace(
        self, resource: str, namespace: str, name: str, body: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        kind, key = KINDS[resource], (resource, namespace, name)
        current = self.stored.get(key)
        if current is None:
            raise NotFound.of(f"{resource}.{GROUP}", name)
        obj = self._incoming(kind, namespace, name, body)
        wanted = obj["metadata"].get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on {resource}.{GROUP} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": name, "group": GROUP, "kind": resource},
            )
        obj = self._admitted(kind, obj, current)
        entries = self.managed.setdefault(key, [])
        fields.update(entries, _leaves(current), _leaves(obj), manager, api_version=GROUP_VERSION)
        return self._store(key, obj, current)

    def merge_patch(
        self, resource: str, namespace: str, name: str, patch: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); kubectl sends one for kinds it has no Go type of."""
        current = self.stored.get((resource, namespace, name))
        if current is None:
            raise NotFound.of(f"{resource}.{GROUP}", name)
        merged = merge_patch(copy.deepcopy(current), patch)
        merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self.replace(resource, namespace, name, merged, manager)

    def apply(
        self, resource: str, namespace: str, name: str, body: dict[str, Any], manager: str, *, force: bool
    ) -> dict[str, Any]:
        """Server-side apply: creates the object where it is missing (fields.apply: ownership,
        conflicts, forcing, removal; the spec is one field)."""
        kind, key = KINDS[resource], (resource, namespace, name)
        if body.get("apiVersion") != GROUP_VERSION or body.get("kind") != kind.kind:
            raise BadRequest(
                f"apiVersion {GROUP_VERSION} and kind {kind.kind} must be set in an apply request"
            )
        current = self.stored.get(key)
        obj = self._incoming(kind, namespace, name, body)
        entries = self.managed.setdefault(key, [])
        before, wanted = _leaves(current), _leaves(obj)
        applied = fields.apply(entries, before, wanted, manager, force, api_version=GROUP_VERSION)
        base = current or {"apiVersion": GROUP_VERSION, "kind": kind.kind, "metadata": dict(obj["metadata"])}
        merged = fields.with_leaves(base, applied, (), ATOMIC)
        merged = self._admitted(kind, merged, current)
        return self._store(key, merged, current)

    def delete(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        """The deleted object, as the API server answers a DELETE of a kind without finalizers."""
        key = (resource, namespace, name)
        if key not in self.stored:
            raise NotFound.of(f"{resource}.{GROUP}", name)
        gone = self._rendered(key)
        del self.stored[key]
        self.managed.pop(key, None)
        self.revisions.next()
        return gone

    # A claim's status (the scheduler's, through /status)

    def update_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Replace the claim's status (what the scheduler writes when it allocates or reserves)."""
        key = ("resourceclaims", namespace, name)
        current = self.stored.get(key)
        if current is None:
            raise NotFound.of(f"resourceclaims.{GROUP}", name)
        causes = _status_causes(status)
        if causes:
            raise Invalid.of("ResourceClaim", name, causes, GROUP)
        obj = copy.deepcopy(current)
        if status:
            obj["status"] = copy.deepcopy(status)
        else:
            obj.pop("status", None)
        obj["metadata"]["resourceVersion"] = self.revisions.next()
        self.stored[key] = obj
        return self._rendered(key)

    def replace_status(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT .../status: only the body's status is taken."""
        current = self.get("resourceclaims", namespace, name)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on resourceclaims.{GROUP} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": name, "group": GROUP, "kind": "resourceclaims"},
            )
        return self.update_status(namespace, name, body.get("status") or {})

    def merge_patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """PATCH .../status: a merge patch of which only status is taken."""
        current = self.get("resourceclaims", namespace, name)
        merged = merge_patch(copy.deepcopy(current), patch)
        return self.update_status(namespace, name, merged.get("status") or {})

    # Internals

    def _incoming(self, kind: Kind, namespace: str, name: str | None, body: dict[str, Any]) -> dict[str, Any]:
        """`body` as addressed: named (from the URL, or from generateName on create), in the
        URL's namespace (none for a cluster-scoped kind)."""
        obj = copy.deepcopy(body)
        metadata = obj.get("metadata") or {}
        obj["metadata"] = metadata
        if kind.namespaced and metadata.get("namespace") not in (None, "", namespace):
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if name is not None:
            if metadata.get("name") not in (None, "", name):
                raise BadRequest("the name of the object does not match the name on the URL")
            metadata["name"] = name
        elif not metadata.get("name"):
            prefix = metadata.get("generateName")
            if not prefix:
                raise Invalid.of(
                    kind.kind,
                    "",
                    [validation.required("metadata.name", "name or generateName is required")],
                    GROUP,
                )
            metadata["name"] = generate_name(prefix)
        if kind.namespaced:
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        obj["apiVersion"], obj["kind"] = GROUP_VERSION, kind.kind
        return obj

    def _admitted(self, kind: Kind, obj: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
        """What the registry stores of `obj`: defaulted, disabled fields dropped, validated, the
        status kept from `current` (written only through /status)."""
        obj = copy.deepcopy(obj)
        obj.pop("status", None)
        if current is not None and "status" in current:
            obj["status"] = copy.deepcopy(current["status"])
        kind.default(obj)
        if kind.kind == "DeviceClass":
            self._drop_disabled_fields(obj, current)
        name = obj["metadata"]["name"]
        causes = kind.validate(obj)
        if kind.immutable_spec and current is not None and obj.get("spec") != current.get("spec"):
            causes.append(
                validation.invalid("spec", json.dumps(obj.get("spec"), sort_keys=True), "field is immutable")
            )
        if causes:
            raise Invalid.of(kind.kind, name, causes, GROUP)
        if kind.kind == "DeviceClass":
            previous = (current or {}).get("metadata", {}).get("generation", 0)
            changed = current is None or obj.get("spec") != current.get("spec")
            obj["metadata"]["generation"] = previous + 1 if changed else previous
        return obj

    def _drop_disabled_fields(self, obj: dict[str, Any], current: dict[str, Any] | None) -> None:
        """deviceclass strategy dropDisabledDRAExtendedResourceFields: with the gate off the field
        goes, unless the stored class already has it (a field in use is kept)."""
        if versions.extended_resource_enabled(self.version):
            return
        if (current or {}).get("spec", {}).get("extendedResourceName") is not None:
            return
        (obj.get("spec") or {}).pop("extendedResourceName", None)

    def _rendered(self, key: Key) -> dict[str, Any]:
        obj = copy.deepcopy(self.stored[key])
        entries = [e.render() for e in self.managed.get(key, []) if e.fields]
        if entries:
            obj["metadata"]["managedFields"] = entries
        return obj

    def _store(self, key: Key, obj: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        stamp(obj.setdefault("metadata", {}), current, self.revisions.next())
        self.stored[key] = obj
        self.managed.setdefault(key, [])
        self.managed[key][:] = [e for e in self.managed[key] if e.fields]
        return self._rendered(key)


def _leaves(obj: dict[str, Any] | None) -> dict[fields.Path, Any]:
    return fields.leaves(obj, (), ATOMIC)


def _meta_fields(obj: dict[str, Any]) -> dict[str, str]:
    metadata = obj["metadata"]
    return {"metadata.name": metadata["name"], "metadata.namespace": metadata.get("namespace", "")}


def _status_causes(status: dict[str, Any]) -> list[validation.Cause]:
    """validateResourceClaimStatusUpdate's invariant: reservedFor only once allocated."""
    if status.get("reservedFor") and not status.get("allocation"):
        return [
            (
                "status.reservedFor",
                "FieldValueForbidden",
                "Forbidden: may not be specified when `allocated` is not set",
            )
        ]
    return []
