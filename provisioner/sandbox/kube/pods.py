"""The cluster's pods: stored, and admitted or refused by their node's kubelet as they are bound.

A pod created with spec.nodeName is bound there at once; one without is bound by the scheduler
(scheduling.py) to a Ready node it fits, or left Pending and Unschedulable, with a FailedScheduling
event, and tried again when the nodes change (`retry`).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from provisioner.sandbox.kube.events import SCHEDULER, Events
from provisioner.sandbox.kube.exceptions import AlreadyExists, Invalid, NotFound
from provisioner.sandbox.kube.nodes import Nodes
from provisioner.sandbox.kube.objects import Key, Revisions, merge_patch, new_object, now
from provisioner.sandbox.kube.scheduling import failures, fit_error, is_ready, pod_requests
from provisioner.sandbox.kube.selectors import field_selector, label_selector

__all__ = ["FINISHED_PHASES", "Pods", "pod_requests"]

FINISHED_PHASES = ("Succeeded", "Failed")
POD_FIELDS = ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")


class Pods:
    """Create, read, list, finish and delete pods; the caller holds the cluster's lock. A stored pod
    is replaced whole, never changed, so a list handed out stays as it was read."""

    def __init__(self, nodes: Nodes, revisions: Revisions, events: Events) -> None:
        self.nodes = nodes
        self.revisions = revisions
        self.events = events
        self.stored: dict[Key, dict[str, Any]] = {}
        self._nodes_seen = ""  # the nodes' versions when pending pods were last tried
        self.created = 0  # pods ever created

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
        self.created += 1
        nodes = self.nodes.all()
        if not pod["spec"].get("nodeName"):
            pod["status"] = {"phase": "Pending"}
            self._bind(pod, nodes)
        pod["status"] = self._admit(pod, nodes) if pod["spec"].get("nodeName") else pod["status"]
        pod["metadata"]["resourceVersion"] = self.revisions.next()
        self.stored[(namespace, name)] = pod
        if not pod["spec"].get("nodeName"):
            self._failed_scheduling(pod)
        return copy.deepcopy(pod)

    def unschedulable(self) -> list[dict[str, Any]]:
        """Pods the scheduler could not bind, oldest first (the autoscaler reads them)."""
        return [
            p
            for p in sorted(self.stored.values(), key=lambda p: int(p["metadata"]["resourceVersion"]))
            if not p["spec"].get("nodeName") and p["status"].get("phase") == "Pending"
        ]

    def retry(self) -> None:
        """Try the unschedulable pods again where the nodes changed since the last try (a node
        joined, left, or changed what it offers), as the scheduler requeues them on node events."""
        nodes = self.nodes.all()
        seen = ",".join(f"{n}={node['metadata']['resourceVersion']}" for n, node in sorted(nodes.items()))
        if seen == self._nodes_seen:
            return
        self._nodes_seen = seen
        for pod in self.unschedulable():
            bound = copy.deepcopy(pod)
            if not self._bind(bound, nodes):
                continue
            bound["status"] = self._admit(bound, nodes)
            bound["metadata"]["resourceVersion"] = self.revisions.next()
            self.stored[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = bound

    def held(self, node_name: str) -> tuple[dict[str, int], int]:
        """What the active pods bound to `node_name` hold of its extended resources, and how many."""
        active = [
            p
            for p in self.stored.values()
            if p["spec"].get("nodeName") == node_name and p["status"].get("phase") not in FINISHED_PHASES
        ]
        total: dict[str, int] = {}
        for p in active:
            for resource, quantity in pod_requests(p).items():
                total[resource] = total.get(resource, 0) + quantity
        return total, len(active)

    def _bind(self, pod: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> bool:
        """Bind `pod` to the first Ready node, by name, that it fits (the sandbox does not score
        nodes); else mark it Unschedulable with the scheduler's message."""
        per_node: dict[str, list[str]] = {}
        for name, node in sorted(nodes.items()):
            if not is_ready(node):
                per_node[name] = ["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"]
                continue
            reasons = failures(pod, node, *self.held(name))
            if not reasons:
                pod["spec"]["nodeName"] = name
                where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                self.events.record(
                    pod, "Normal", "Scheduled", f"Successfully assigned {where} to {name}", SCHEDULER
                )
                return True
            per_node[name] = reasons
        message = fit_error(per_node)
        pod["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": now(),
                }
            ],
        }
        return False

    def _failed_scheduling(self, pod: dict[str, Any]) -> None:
        message = pod["status"]["conditions"][0]["message"]
        self.events.record(pod, "Warning", "FailedScheduling", message, SCHEDULER)

    def finish(self, namespace: str, name: str, phase: str = "Succeeded") -> None:
        """The pod's containers ended: it holds nothing on its node any more (test helper)."""
        self.get(namespace, name)
        stored = self.stored[(namespace, name)]  # replaced, not changed: lists hand stored pods out
        self.stored[(namespace, name)] = {
            **stored,
            "metadata": {**stored["metadata"], "resourceVersion": self.revisions.next()},
            "status": {**stored["status"], "phase": phase},
        }

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A merge patch of the pod's labels and annotations; a running pod's spec does not change
        (ValidatePodUpdate: only images, activeDeadlineSeconds and added tolerations may, and the
        sandbox changes none of them)."""
        current = self.get(namespace, name)
        merged = merge_patch(copy.deepcopy(current), patch)
        if merged.get("spec") != current.get("spec"):
            raise Invalid.of(
                "Pod",
                name,
                [
                    (
                        "spec",
                        "FieldValueForbidden",
                        "Forbidden: pod updates may not change fields other than "
                        "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                        "`spec.activeDeadlineSeconds`, `spec.tolerations` "
                        "(only additions to existing tolerations)",
                    )
                ],
            )
        merged["status"] = current["status"]  # the status is the kubelet's, not the patch's
        merged["metadata"] = {
            **merged["metadata"],
            **{
                key: current["metadata"][key]
                for key in ("name", "namespace", "uid", "creationTimestamp")
                if key in current["metadata"]
            },
            "resourceVersion": self.revisions.next(),
        }
        self.stored[(namespace, name)] = merged
        return copy.deepcopy(merged)

    def delete(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.get(namespace, name)
        del self.stored[(namespace, name)]
        self.events.forget(namespace, pod["metadata"]["uid"])
        self.revisions.next()
        return pod

    def _admit(self, pod: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The kubelet's admission of a pod bound to its node (kubelet lifecycle predicate:
        `Node didn't have enough resource: <name>, requested: N, used: N, capacity: N`)."""
        node_name = pod["spec"].get("nodeName")
        node = nodes.get(node_name or "")
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
        started = now()
        return {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "startTime": started,
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            # Each container started at once and is ready (no probes run here): kubectl's READY.
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    # The kubelet reports the image's digest and the runtime's ID (required by the API).
                    "imageID": f"{c['image']}@sha256:{_digest(c['image'])}",
                    "containerID": f"containerd://{_digest(pod['metadata']['uid'] + c['name'])}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": started}},
                }
                for c in pod["spec"]["containers"]
            ],
        }


def _pod_fields(pod: dict[str, Any]) -> dict[str, str]:
    return {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "spec.nodeName": pod["spec"].get("nodeName") or "",
        "status.phase": pod["status"].get("phase", ""),
    }


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
