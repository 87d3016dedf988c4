"""The cluster's pods: stored, and admitted or refused by their node's kubelet as they are bound.

A pod created with spec.nodeName is bound there at once; one without is bound by the scheduler
(scheduling.py) to a Ready node it fits, or left Pending and Unschedulable, with a FailedScheduling
event, and tried again when the nodes change (`retry`).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from provisioner.sandbox.kube.claims import (
    KUBELET,
    NOTHING_TO_DEALLOCATE,
    STILL_NOT_SCHEDULABLE,
    Attempt,
    DynamicResources,
    SchedulingAborted,
    has_claims,
)
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

    def __init__(
        self, nodes: Nodes, revisions: Revisions, events: Events, dra: DynamicResources | None = None
    ) -> None:
        self.nodes = nodes
        self.revisions = revisions
        self.events = events
        self.dra = dra  # pods with ResourceClaims (claims.py); None where nothing serves resource.k8s.io
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

    def create(self, namespace: str, body: dict[str, Any], *, schedule: bool = True) -> dict[str, Any]:
        """Create a pod; one given spec.nodeName is bound there at once and admitted or refused
        as the kubelet does. `schedule` False: left Pending for the scheduler's next pass (`retry`),
        as a controller's pods are, seen by the scheduler only after they are stored."""
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
        pod["status"] = {"phase": "Pending"}
        if self.dra is not None:
            self.dra.sync_pod(pod)  # the resourceclaim controller makes the templates' claims
        if not pod["spec"].get("nodeName") and schedule:
            self._bind(pod, nodes)
        if pod["spec"].get("nodeName"):
            pod["status"] = self._admit(pod, nodes)
        pod["metadata"]["resourceVersion"] = self.revisions.next()
        self.stored[(namespace, name)] = pod
        if not pod["spec"].get("nodeName"):
            self._failed_scheduling(pod)
        return copy.deepcopy(pod)

    def unschedulable(self) -> list[dict[str, Any]]:
        """Pods the scheduler did not bind, oldest first (the autoscaler reads them)."""
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
        if self.dra is not None:  # claims, classes and slices requeue pods too
            seen += "|" + self.dra.fingerprint()
        waiting = self.unschedulable()
        if seen == self._nodes_seen:  # only pods the scheduler has not tried yet
            waiting = [p for p in waiting if not p["status"].get("conditions")]
        for pod in waiting:
            bound = copy.deepcopy(pod)
            if self.dra is not None:
                self.dra.sync_pod(bound)
            if not self._bind(bound, nodes):
                if bound["status"] != pod["status"]:
                    bound["metadata"]["resourceVersion"] = self.revisions.next()
                    self.stored[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = bound
                    self._failed_scheduling(bound)
                continue
            bound["status"] = self._admit(bound, nodes)
            bound["metadata"]["resourceVersion"] = self.revisions.next()
            self.stored[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = bound
        self._nodes_seen = ",".join(
            f"{n}={node['metadata']['resourceVersion']}" for n, node in sorted(nodes.items())
        ) + ("|" + self.dra.fingerprint() if self.dra is not None else "")

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
        nodes); else mark it Unschedulable with the scheduler's message. A pod with ResourceClaims
        also needs them allocated there (the DynamicResources plugin, after the other filters)."""
        attempt = self.dra.pre_filter(pod) if self.dra is not None and has_claims(pod) else None
        if attempt is not None and attempt.gated:
            self._pending(pod, None)  # PreEnqueue: not tried, no condition, no event
            return False
        per_node: dict[str, list[str]] = {}
        try:
            for name, node in sorted(nodes.items()):
                if not is_ready(node):
                    per_node[name] = ["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"]
                    continue
                if attempt is not None and attempt.unschedulable:
                    per_node[name] = [attempt.unschedulable]
                    continue
                reasons = failures(pod, node, *self.held(name))
                if not reasons and attempt is not None and self.dra is not None:
                    reasons = self.dra.filter(pod, node, attempt)
                if not reasons:
                    self._assign(pod, name, attempt)
                    return True
                per_node[name] = reasons
        except SchedulingAborted as error:
            self._pending(pod, {"reason": "SchedulerError", "message": str(error)})
            return False
        self._pending(pod, {"reason": "Unschedulable", "message": self._fit_error(per_node, attempt)})
        return False

    def _fit_error(self, per_node: dict[str, list[str]], attempt: Attempt | None) -> str:
        if attempt is None:
            return fit_error(per_node)
        if attempt.unschedulable:
            ready = {n: r for n, r in per_node.items() if r != [attempt.unschedulable]}
            if not ready:  # PreFilter failed: its reason is every node's
                return fit_error(per_node, attempt.unschedulable, NOTHING_TO_DEALLOCATE)
        return fit_error(per_node, post_filter=STILL_NOT_SCHEDULABLE)

    def _assign(self, pod: dict[str, Any], name: str, attempt: Attempt | None) -> None:
        if attempt is not None and self.dra is not None:
            self.dra.bind(pod, name, attempt)
        pod["spec"]["nodeName"] = name
        where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        self.events.record(pod, "Normal", "Scheduled", f"Successfully assigned {where} to {name}", SCHEDULER)

    def _pending(self, pod: dict[str, Any], condition: dict[str, str] | None) -> None:
        """Pending, with a PodScheduled=False condition where the scheduler tried."""
        status: dict[str, Any] = {"phase": "Pending"}
        if condition is not None:
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    **condition,
                    "lastProbeTime": None,
                    "lastTransitionTime": now(),
                }
            ]
        claimed = (pod.get("status") or {}).get("resourceClaimStatuses")
        if claimed:
            status["resourceClaimStatuses"] = claimed
        pod["status"] = status

    def _failed_scheduling(self, pod: dict[str, Any]) -> None:
        conditions = pod["status"].get("conditions")
        if conditions:  # a pod PreEnqueue holds back was not tried: no event
            self.events.record(pod, "Warning", "FailedScheduling", conditions[0]["message"], SCHEDULER)

    def finish(self, namespace: str, name: str, phase: str = "Succeeded") -> None:
        """The pod's containers ended: it holds nothing on its node any more (test helper)."""
        self.get(namespace, name)
        stored = self.stored[(namespace, name)]  # replaced, not changed: lists hand stored pods out
        self.stored[(namespace, name)] = {
            **stored,
            "metadata": {**stored["metadata"], "resourceVersion": self.revisions.next()},
            "status": {**stored["status"], "phase": phase},
        }
        if self.dra is not None:
            self.dra.release(stored)  # a done pod leaves its claims

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

    def terminate(self, namespace: str, name: str, grace_seconds: int | None = None) -> dict[str, Any]:
        """A graceful delete: the pod is Terminating (deletionTimestamp set) until its kubelet has
        stopped it (`reap`). The grace period is the request's, else the pod's
        terminationGracePeriodSeconds (30); a pod not bound or already done goes at once (pod
        strategy CheckGracefulDelete sets its period to 0), as does a period of 0."""
        pod = self.get(namespace, name)
        if pod["metadata"].get("deletionTimestamp"):
            return pod
        if grace_seconds is None:
            grace_seconds = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        if (
            grace_seconds <= 0
            or not pod["spec"].get("nodeName")
            or pod["status"].get("phase") in FINISHED_PHASES
        ):
            return self.delete(namespace, name)
        metadata = {
            **pod["metadata"],
            "deletionTimestamp": now(),
            "deletionGracePeriodSeconds": grace_seconds,
            "resourceVersion": self.revisions.next(),
        }
        self.stored[(namespace, name)] = {**self.stored[(namespace, name)], "metadata": metadata}
        return self.get(namespace, name)

    def reap(self) -> list[dict[str, Any]]:
        """The kubelets stop their Terminating pods (containers here exit on SIGTERM at once): the
        pods gone, returned."""
        terminating = [key for key, pod in self.stored.items() if pod["metadata"].get("deletionTimestamp")]
        return [self.delete(*key) for key in terminating]

    def add_condition(self, namespace: str, name: str, condition: dict[str, Any]) -> None:
        """Set a status condition on the pod (the API server's DisruptionTarget before an eviction)."""
        stored = self.stored[(namespace, name)]
        kept = [c for c in stored["status"].get("conditions") or [] if c.get("type") != condition["type"]]
        self.stored[(namespace, name)] = {
            **stored,
            "metadata": {**stored["metadata"], "resourceVersion": self.revisions.next()},
            "status": {**stored["status"], "conditions": [*kept, {**condition, "lastTransitionTime": now()}]},
        }

    def delete(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.get(namespace, name)
        del self.stored[(namespace, name)]
        if self.dra is not None:
            self.dra.release(pod)
        self.events.forget(namespace, pod["metadata"]["uid"])
        self.revisions.next()
        return pod

    def _not_prepared(self, pod: dict[str, Any], message: str) -> dict[str, Any]:
        """The kubelet could not prepare the pod's claims: no container starts (it retries)."""
        self.events.record(pod, "Warning", "FailedPrepareDynamicResources", message, KUBELET)
        return {
            **_claim_statuses(pod),
            "phase": "Pending",
            "hostIP": "10.0.0.1",
            "startTime": now(),
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in pod["spec"]["containers"]
            ],
        }

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
        prepared = self.dra.prepare(pod) if self.dra is not None and has_claims(pod) else None
        if prepared is not None:
            return self._not_prepared(pod, prepared)
        started = now()
        return {
            **_claim_statuses(pod),
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


def _claim_statuses(pod: dict[str, Any]) -> dict[str, Any]:
    claimed = (pod.get("status") or {}).get("resourceClaimStatuses")
    return {"resourceClaimStatuses": claimed} if claimed else {}


def _pod_fields(pod: dict[str, Any]) -> dict[str, str]:
    return {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "spec.nodeName": pod["spec"].get("nodeName") or "",
        "status.phase": pod["status"].get("phase", ""),
    }


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
