"""The cluster's ConfigMaps: stored whole, with who manages which of their fields (fields.py)."""

from __future__ import annotations

import copy
from typing import Any

from provisioner.sandbox.kube import fields
from provisioner.sandbox.kube.exceptions import AlreadyExists, BadRequest, Conflict, Invalid, NotFound
from provisioner.sandbox.kube.objects import Key, Revisions, merge_patch, new_object, same_object, stamp
from provisioner.sandbox.kube.selectors import field_selector, label_selector

CONFIG_MAP_FIELDS = ("metadata.name", "metadata.namespace")
Saved = tuple[dict[Key, dict[str, Any]], dict[Key, list[fields.Entry]]]


class ConfigMaps:
    """Create, read, replace, patch, apply and delete ConfigMaps; the caller holds the cluster's lock."""

    def __init__(self, revisions: Revisions) -> None:
        self.revisions = revisions
        self.stored: dict[Key, dict[str, Any]] = {}
        self.managed: dict[Key, list[fields.Entry]] = {}

    def saved(self) -> Saved:
        """Everything stored, as it is now, for `restore` to put back (a dry run keeps nothing)."""
        return copy.deepcopy(self.stored), copy.deepcopy(self.managed)

    def restore(self, saved: Saved) -> None:
        self.stored, self.managed = saved

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self._rendered(namespace, name)
        except KeyError:
            raise NotFound.of("configmaps", name) from None

    def matching(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        labels = label_selector(label_selector_text)
        selected = field_selector(field_selector_text, "configmaps", CONFIG_MAP_FIELDS, _meta_fields)
        return [
            self._rendered(ns, name)
            for (ns, name), obj in sorted(self.stored.items())
            if (namespace is None or ns == namespace)
            and labels(obj["metadata"].get("labels") or {})
            and selected(obj)
        ]

    def create(self, namespace: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
        obj = new_object(namespace, body, "ConfigMap")
        key = (namespace, obj["metadata"]["name"])
        if key in self.stored:
            raise AlreadyExists.of("configmaps", key[1])
        _check(obj)
        fields.update(self.managed.setdefault(key, []), {}, fields.leaves(obj), manager)
        return self._store(key, obj)

    def replace(self, namespace: str, name: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
        key = (namespace, name)
        if key not in self.stored:
            raise NotFound.of("configmaps", name)
        current = self.stored[key]
        obj = same_object(namespace, name, body)
        wanted = obj["metadata"].get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on configmaps "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
                {"name": name, "kind": "configmaps"},
            )
        _check(obj)
        fields.update(self.managed.setdefault(key, []), fields.leaves(current), fields.leaves(obj), manager)
        return self._store(key, obj, current)

    def merge_patch(self, namespace: str, name: str, patch: dict[str, Any], manager: str) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); on a ConfigMap a strategic merge patch means the same."""
        current = self.stored.get((namespace, name))
        if current is None:
            raise NotFound.of("configmaps", name)
        merged = merge_patch(copy.deepcopy(current), patch)
        merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self.replace(namespace, name, merged, manager)

    def apply(
        self, namespace: str, name: str, body: dict[str, Any], manager: str, force: bool
    ) -> dict[str, Any]:
        """Server-side apply (fields.apply: what the manager owns, conflicts, forcing, removal)."""
        if body.get("apiVersion") != "v1" or body.get("kind") != "ConfigMap":
            raise BadRequest("apiVersion v1 and kind ConfigMap must be set in an apply request")
        obj = same_object(namespace, name, body)
        _check(obj)
        key = (namespace, name)
        current = self.stored.get(key)
        entries = self.managed.setdefault(key, [])
        result = fields.apply(entries, fields.leaves(current), fields.leaves(obj), manager, force)
        base = current or {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
        }
        return self._store(key, fields.with_leaves(base, result), current)

    def delete(self, namespace: str, name: str) -> dict[str, Any]:
        if (namespace, name) not in self.stored:
            raise NotFound.of("configmaps", name)
        obj = self.stored.pop((namespace, name))
        self.managed.pop((namespace, name), None)
        self.revisions.next()
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "kind": "configmaps", "uid": obj["metadata"]["uid"]},
        }

    def _rendered(self, namespace: str, name: str) -> dict[str, Any]:
        obj = copy.deepcopy(self.stored[(namespace, name)])
        entries = [e.render() for e in self.managed.get((namespace, name), []) if e.fields]
        if entries:
            obj["metadata"]["managedFields"] = entries
        return obj

    def _store(self, key: Key, obj: dict[str, Any], current: dict[str, Any] | None = None) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj["apiVersion"], obj["kind"] = "v1", "ConfigMap"
        metadata = obj.setdefault("metadata", {})
        metadata["namespace"], metadata["name"] = key
        stamp(metadata, current, self.revisions.next())
        self.stored[key] = obj
        self.managed.setdefault(key, [])
        self.managed[key][:] = [e for e in self.managed[key] if e.fields]
        return self._rendered(*key)


def _check(obj: dict[str, Any]) -> None:
    name = obj["metadata"]["name"]
    for section in ("data", "binaryData"):
        values = obj.get(section)
        if values is not None and not isinstance(values, dict):
            raise BadRequest(
                f'ConfigMap in version "v1" cannot be handled as a ConfigMap: {section} must be an object'
            )
        bad = [k for k, v in (values or {}).items() if not isinstance(v, str)]
        if bad:
            raise Invalid.of(
                "ConfigMap", name, [(f"{section}[{bad[0]}]", "FieldValueInvalid", "must be a string")]
            )


def _meta_fields(obj: dict[str, Any]) -> dict[str, str]:
    return {"metadata.name": obj["metadata"]["name"], "metadata.namespace": obj["metadata"]["namespace"]}
