"""One stored, namespaced kind of a named group (apps/v1 Deployments and ReplicaSets, policy/v1
PodDisruptionBudgets): create, read, list, replace, patch and delete, with what the API server's
generic registry adds (kubernetes apiserver pkg/registry/generic/registry/store.go and each kind's
strategy.go): a uid, creationTimestamp and resourceVersion; metadata.generation 1 on create and
bumped on each spec change; the status not written through the object itself (its controller's,
through `set_status`), kept across writes.

Each kind gives its own defaulting and validation (`Kind`); the caller holds the cluster's lock.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provisioner.sandbox.kube.exceptions import AlreadyExists, BadRequest, Conflict, Invalid, NotFound
from provisioner.sandbox.kube.objects import Key, Revisions, generate_name, merge_patch, now
from provisioner.sandbox.kube.selectors import field_selector, label_selector
from provisioner.sandbox.kube.strategic import strategic_merge

Cause = tuple[str, str, str]  # field, reason, message (Invalid.of)
MERGE, STRATEGIC = "application/merge-patch+json", "application/strategic-merge-patch+json"
SELECTABLE = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class Kind:
    """A stored kind: its group version, kind, plural, and the strategy's default and validate
    (validate gets the new object and the stored one, None on create)."""

    group: str
    version: str
    kind: str
    resource: str
    default: Callable[[dict[str, Any]], None]
    validate: Callable[[dict[str, Any], dict[str, Any] | None], list[Cause]]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def qualified(self) -> str:
        """`<resource>.<group>`, as errors name the kind (schema.GroupResource.String)."""
        return f"{self.resource}.{self.group}"


class Store:
    def __init__(self, kind: Kind, revisions: Revisions) -> None:
        self.kind = kind
        self.revisions = revisions
        self.stored: dict[Key, dict[str, Any]] = {}

    def exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.stored

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return copy.deepcopy(self.stored[(namespace, name)])
        except KeyError:
            raise NotFound.of(self.kind.qualified, name) from None

    def all(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """The stored objects themselves (for the controllers: never modify them), by key."""
        return [obj for (ns, _), obj in sorted(self.stored.items()) if namespace in (None, ns)]

    def matching(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        labels = label_selector(label_selector_text)
        selected = field_selector(field_selector_text, self.kind.resource, SELECTABLE, _meta_fields)
        return [
            copy.deepcopy(obj)
            for obj in self.all(namespace)
            if labels(obj["metadata"].get("labels") or {}) and selected(obj)
        ]

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = self._incoming(namespace, None, body)
        key = (namespace, obj["metadata"]["name"])
        if key in self.stored:
            raise AlreadyExists.of(self.kind.qualified, key[1])
        obj.pop("status", None)
        self._admit(obj, None)
        metadata = obj["metadata"]
        metadata.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
        metadata["resourceVersion"] = self.revisions.next()
        self.stored[key] = obj
        return copy.deepcopy(obj)

    def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        current = self.get(namespace, name)
        obj = self._incoming(namespace, name, body)
        wanted = obj["metadata"].get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on {self.kind.qualified} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": name, "group": self.kind.group, "kind": self.kind.resource},
            )
        obj["status"] = current.get("status")
        if obj["status"] is None:
            obj.pop("status")
        self._admit(obj, current)
        metadata = obj["metadata"]
        for kept in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
            if kept in current["metadata"]:
                metadata[kept] = current["metadata"][kept]
        if obj.get("spec") != current.get("spec"):
            metadata["generation"] = current["metadata"].get("generation", 0) + 1
        if _unversioned(obj) == _unversioned(current):
            return current  # a no-op write stores nothing (the registry skips an unchanged object)
        metadata["resourceVersion"] = self.revisions.next()
        self.stored[(namespace, name)] = obj
        return copy.deepcopy(obj)

    def patch(self, namespace: str, name: str, patch: dict[str, Any], content_type: str) -> dict[str, Any]:
        """A JSON merge patch or a strategic merge patch of the object (the status is kept)."""
        current = self.get(namespace, name)
        merged = strategic_merge(current, patch) if content_type == STRATEGIC else merge_patch(current, patch)
        if not isinstance(merged, dict):
            raise BadRequest("the patch must be an object")
        merged.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self.replace(namespace, name, merged)

    def set_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """The controller's status write (…/status): a new resourceVersion where it changed."""
        current = self.stored[(namespace, name)]
        if current.get("status") == status:
            return
        self.stored[(namespace, name)] = {
            **current,
            "metadata": {**current["metadata"], "resourceVersion": self.revisions.next()},
            "status": copy.deepcopy(status),
        }

    def delete(self, namespace: str, name: str) -> dict[str, Any]:
        gone = self.get(namespace, name)
        del self.stored[(namespace, name)]
        self.revisions.next()
        return gone

    def _incoming(self, namespace: str, name: str | None, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        metadata = obj.get("metadata") or {}
        obj["metadata"] = metadata
        if metadata.get("namespace") not in (None, "", namespace):
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if name is not None:
            if metadata.get("name") not in (None, "", name):
                raise BadRequest("the name of the object does not match the name on the URL")
            metadata["name"] = name
        elif not metadata.get("name"):
            if not metadata.get("generateName"):
                raise Invalid.of(
                    self.kind.kind,
                    "",
                    [
                        (
                            "metadata.name",
                            "FieldValueRequired",
                            "Required value: name or generateName is required",
                        )
                    ],
                    self.kind.group,
                )
            metadata["name"] = generate_name(metadata["generateName"])
        metadata["namespace"] = namespace
        metadata.pop("managedFields", None)
        obj["apiVersion"], obj["kind"] = self.kind.api_version, self.kind.kind
        return obj

    def _admit(self, obj: dict[str, Any], current: dict[str, Any] | None) -> None:
        self.kind.default(obj)
        causes = self.kind.validate(obj, current)
        if causes:
            raise Invalid.of(self.kind.kind, obj["metadata"]["name"], causes, self.kind.group)


def _meta_fields(obj: dict[str, Any]) -> dict[str, str]:
    return {"metadata.name": obj["metadata"]["name"], "metadata.namespace": obj["metadata"]["namespace"]}


def _unversioned(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}
