"""The cluster's pods: stored, and admitted or refused by their node's kubelet as they are bound.

No scheduler runs yet: a pod created with spec.nodeName is bound there at once; one without stays
Pending.
"""

from __future__ import annotations

import copy
from typing import Any

from provisioner.sandbox.kube.exceptions import AlreadyExists, Invalid, NotFound
from provisioner.sandbox.kube.nodes import Nodes
from provisioner.sandbox.kube.objects import Key, Revisions, new_object, now
from provisioner.sandbox.kube.selectors import field_selector, label_selector

FINISHED_PHASES = ("Succeeded", "Failed")
POD_FIELDS = ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")


def pod_requests(pod: dict[str, Any]) -> dict[str, int]:
    """Extended resources a pod requests: per container, requests, or limits where requests are
    not given (extended resources may not be overcommitted: requests equal limits)."""
    total: dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in wanted.items():
            if "/" in name:
                total[name] = total.get(name, 0) + int(str(quantity))
    return total


class Pods:
    """Create, read, list, finish and delete pods; the caller holds the cluster's lock. A stored pod
    is replaced whole, never changed, so a list handed out stays as it was read."""

    def __init__(self, nodes: Nodes, revisions: Revisions) -> None:
        self.nodes = nodes
        self.revisions = revisions
        self.stored: dict[Key, dict[str, Any]] = {}

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return copy.deepcopy(self.stored[(namespace, name)])
        except KeyError:
            raise NotFound.of("pods", name) from None

    def matching(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        """The stored pods themselves, not copies, for the response to serialise: never modify them."""
        labels = label_selector(label_selector_text)
        selected = field_selector(field_selector_text, "pods", POD_FIELDS, _pod_fields)
        return [
            pod
            for (ns, _), pod in sorted(self.stored.items())
            if (namespace is None or ns == namespace)
            and labels(pod["metadata"].get("labels") or {})
            and selected(pod)
        ]

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a pod; one given spec.nodeName is bound there at once and admitted or refused
        as the kubelet does."""
        pod = new_object(namespace, body, "Pod")
        pod.setdefault("spec", {})
        name = pod["metadata"]["name"]
        containers = (pod.get("spec") or {}).get("containers")
        if not containers:
            raise Invalid.of("Pod", name, [("spec.containers", "FieldValueRequired", "Required value")])
        missing = [i for i, c in enumerate(containers) if not c.get("name") or not c.get("image")]
        if missing:
            i = missing[0]
            field_name = "name" if not containers[i].get("name") else "image"
            raise Invalid.of(
                "Pod",
                name,
                [(f"spec.containers[{i}].{field_name}", "FieldValueRequired", "Required value")],
            )
        if (namespace, name) in self.stored:
            raise AlreadyExists.of("pods", name)
        pod["status"] = self._admit(pod)
        pod["metadata"]["resourceVersion"] = self.revisions.next()
        self.stored[(namespace, name)] = pod
        return copy.deepcopy(pod)

    def finish(self, namespace: str, name: str, phase: str = "Succeeded") -> None:
        """The pod's containers ended: it holds nothing on its node any more (test helper)."""
        self.get(namespace, name)
        stored = self.stored[(namespace, name)]  # replaced, not changed: lists hand stored pods out
        self.stored[(namespace, name)] = {
            **stored,
            "metadata": {**stored["metadata"], "resourceVersion": self.revisions.next()},
            "status": {**stored["status"], "phase": phase},
        }

    def delete(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.get(namespace, name)
        del self.stored[(namespace, name)]
        self.revisions.next()
        return pod

    def _admit(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The kubelet's admission of a pod bound to its node (kubelet lifecycle predicate:
        `Node didn't have enough resource: <name>, requested: N, used: N, capacity: N`)."""
        node_name = pod["spec"].get("nodeName")
        node = self.nodes.all().get(node_name or "")
        if node is None:
            return {"phase": "Pending"}
        allocatable = node["status"]["allocatable"]
        active = [
            p
            for p in self.stored.values()
            if p["spec"].get("nodeName") == node_name and p["status"].get("phase") not in FINISHED_PHASES
        ]
        wanted = {**pod_requests(pod), "pods": 1}
        for resource, requested in sorted(wanted.items()):
            used = (
                len(active) if resource == "pods" else sum(pod_requests(p).get(resource, 0) for p in active)
            )
            capacity = int(allocatable.get(resource, "0"))
            if used + requested > capacity:
                return {
                    "phase": "Failed",
                    "reason": f"OutOf{resource}",
                    "message": (
                        f"Pod was rejected: Node didn't have enough resource: {resource}, "
                        f"requested: {requested}, used: {used}, capacity: {capacity}"
                    ),
                    "startTime": now(),
                }
        return {"phase": "Running", "hostIP": "10.0.0.1", "startTime": now()}


def _pod_fields(pod: dict[str, Any]) -> dict[str, str]:
    return {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "spec.nodeName": pod["spec"].get("nodeName") or "",
        "status.phase": pod["status"].get("phase", ""),
    }
