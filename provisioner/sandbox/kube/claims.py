"""Pods with ResourceClaims: the resourceclaim controller, kube-scheduler's DynamicResources plugin
and the kubelet's prepare step, over the stored resource.k8s.io objects (resources.py), the
ResourceSlices the DRA drivers publish, and the allocator (allocation.py).

Sources (kubernetes/kubernetes):
- pkg/controller/resourceclaim/controller.go: syncPod/handleClaim create one claim per pod claim
  entry that names a template, `generateName: <pod>-<entry>-` (both cut in proportion past 57
  characters), owned by the pod (controller, blockOwnerDeletion), annotated
  resource.kubernetes.io/pod-claim-name, the template's labels, annotations and spec; the pod's
  status.resourceClaimStatuses records it; a missing template is a FailedResourceClaimCreation
  event. syncClaim drops reservedFor entries of pods gone or done, clears the allocation when none
  is left, and deletes a generated claim whose pod is done (the garbage collector when deleted).
- pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go: PreEnqueue (a claim that
  does not exist keeps the pod out of the queue: no attempt, no event), PreFilter ("resourceclaim in
  use" past 256 consumers, "request %s: device class %s does not exist"), Filter ("cannot allocate
  all claims", "resourceclaim not available on the node" for an allocated claim pinned elsewhere;
  an allocator error aborts the attempt), PostFilter ("still not schedulable" / "no new claims to
  deallocate"), PreBind (the allocation and a reservedFor entry {resource: pods, name, uid}).
- kubelet: a bound pod's claims are prepared by their driver before its containers start; a
  failure leaves the pod ContainerCreating with a FailedPrepareDynamicResources event
  (nvidiaconfig.py has the NVIDIA driver's check).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from provisioner.sandbox.kube import nvidiaconfig
from provisioner.sandbox.kube.allocation import (
    RESERVED_FOR_MAX,
    AllocationError,
    allocate,
    allocated_devices,
    node_selector_matches,
)
from provisioner.sandbox.kube.events import Events
from provisioner.sandbox.kube.exceptions import KubeError

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
CLAIMS, TEMPLATES, CLASSES = "resourceclaims", "resourceclaimtemplates", "deviceclasses"
CONTROLLER = "resource_claim"  # the controller's event source (kube-controller-manager)
KUBELET = "kubelet"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
STILL_NOT_SCHEDULABLE = "still not schedulable"
NOTHING_TO_DEALLOCATE = "no new claims to deallocate"
FILTER_ERROR = 'running "DynamicResources" filter plugin: '


def has_claims(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims"))


@dataclass
class Attempt:
    """One scheduling attempt's DynamicResources state (PreFilter's stateData)."""

    claims: list[dict[str, Any]] = field(default_factory=list)
    gated: bool = False  # PreEnqueue refused: the pod waits, unseen by the scheduler
    unschedulable: str = ""  # PreFilter's reason, for every node
    allocations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # node -> results


class DynamicResources:
    """The DRA side of the cluster's pods; the caller holds the cluster's lock."""

    def __init__(
        self,
        resources: Any,
        slices: Callable[[], list[dict[str, Any]]],
        gates: Callable[[], Collection[str]],
        events: Events,
    ) -> None:
        self.resources = resources  # resources.ResourceObjects
        self.slices = slices
        self.gates = gates
        self.events = events

    def fingerprint(self) -> str:
        """What scheduling DRA pods depends on, as text that changes when any of it does (the
        scheduler requeues on claim, class and slice events)."""
        stored = [
            f"{k}={o['metadata'].get('resourceVersion')}"
            for k, o in sorted(self.resources.stored.items())
            if k[0] in (CLAIMS, CLASSES, TEMPLATES)
        ]
        return ",".join(stored) + "|" + ",".join(sorted(s["metadata"]["name"] for s in self.slices()))

    # ------------------------------------------------------------ the resourceclaim controller

    def sync_pod(self, pod: dict[str, Any]) -> None:
        """Create the claims the pod's templates ask for, recording them in its status."""
        if not has_claims(pod):
            return
        metadata = pod["metadata"]
        namespace = metadata["namespace"]
        statuses = {s["name"]: s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        for entry in pod["spec"]["resourceClaims"]:
            template = entry.get("resourceClaimTemplateName")
            if not template or entry.get("name") in statuses:
                continue
            if not self.resources.exists(TEMPLATES, namespace, template):
                message = (
                    f'PodResourceClaim {entry.get("name")}: resource claim template "{template}": '
                    f'resourceclaimtemplate.resource.k8s.io "{template}" not found'
                )
                self.events.record(pod, "Warning", "FailedResourceClaimCreation", message, CONTROLLER)
                return
            body = self.resources.get(TEMPLATES, namespace, template)["spec"]
            claim_meta = body.get("metadata") or {}
            claim = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "generateName": generate_name(metadata["name"], entry["name"]),
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": metadata["name"],
                            "uid": metadata["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                    "annotations": {
                        **(claim_meta.get("annotations") or {}),
                        POD_CLAIM_ANNOTATION: entry["name"],
                    },
                    **({"labels": claim_meta["labels"]} if claim_meta.get("labels") else {}),
                },
                "spec": body.get("spec") or {},
            }
            created = self.resources.create(CLAIMS, namespace, claim, "kube-controller-manager")
            statuses[entry["name"]] = {
                "name": entry["name"],
                "resourceClaimName": created["metadata"]["name"],
            }
        if statuses:
            pod.setdefault("status", {})["resourceClaimStatuses"] = list(statuses.values())

    def release(self, pod: dict[str, Any]) -> None:
        """The pod finished or was deleted: it leaves its claims' reservedFor, a claim nobody uses
        is deallocated, and a claim made for the pod goes with it."""
        if not has_claims(pod):
            return
        namespace, uid = pod["metadata"]["namespace"], pod["metadata"]["uid"]
        for name in self._claim_names(pod):
            if name is None or not self.resources.exists(CLAIMS, namespace, name):
                continue
            claim = self.resources.get(CLAIMS, namespace, name)
            status = dict(claim.get("status") or {})
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            if len(reserved) != len(status.get("reservedFor") or []):
                status["reservedFor"] = reserved
                if not reserved:
                    status.pop("reservedFor")
                    status.pop("allocation", None)
                self.resources.update_status(namespace, name, status)
            owners = claim["metadata"].get("ownerReferences") or []
            if not reserved and any(o.get("uid") == uid and o.get("controller") for o in owners):
                self.resources.delete(CLAIMS, namespace, name)

    # ------------------------------------------------------------ the scheduler's plugin

    def _claim_names(self, pod: dict[str, Any]) -> list[str | None]:
        """resourceclaim.Name: the claim each entry uses (None: a template's claim not made yet)."""
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        made = {s["name"]: s.get("resourceClaimName") for s in statuses}
        names: list[str | None] = []
        for entry in pod["spec"].get("resourceClaims") or []:
            if entry.get("resourceClaimName"):
                names.append(entry["resourceClaimName"])
            else:
                names.append(made.get(entry.get("name")))
        return names

    def pre_filter(self, pod: dict[str, Any]) -> Attempt:
        attempt = Attempt()
        namespace = pod["metadata"]["namespace"]
        for name in self._claim_names(pod):
            if name is None or not self.resources.exists(CLAIMS, namespace, name):
                attempt.gated = True  # PreEnqueue: the claim is missing
                return attempt
            attempt.claims.append(self.resources.get(CLAIMS, namespace, name))
        uid = pod["metadata"]["uid"]
        for claim in attempt.claims:
            status = claim.get("status") or {}
            reserved = status.get("reservedFor") or []
            mine = any(r.get("uid") == uid for r in reserved)
            if status.get("allocation") and len(reserved) >= RESERVED_FOR_MAX and not mine:
                attempt.unschedulable, attempt.claims = "resourceclaim in use", []
                return attempt
            if status.get("allocation"):
                continue
            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                for name, body in _alternatives(request):
                    class_name = body.get("deviceClassName") or ""
                    if class_name and not self.resources.exists(CLASSES, "", class_name):
                        attempt.unschedulable = f"request {name}: device class {class_name} does not exist"
                        attempt.claims = []
                        return attempt
        return attempt

    def filter(self, pod: dict[str, Any], node: dict[str, Any], attempt: Attempt) -> list[str]:
        """The node's reasons ([] where it fits); AllocationError aborts the attempt."""
        pending = [c for c in attempt.claims if not (c.get("status") or {}).get("allocation")]
        if pending:
            classes = {c["metadata"]["name"]: c for c in self.resources.matching(CLASSES, None)}
            held = allocated_devices(self.resources.matching(CLAIMS, None))
            try:
                found = allocate(pending, classes, self.slices(), node, held)
            except AllocationError as error:
                raise SchedulingAborted(FILTER_ERROR + str(error)) from None
            if found is None:
                return [CANNOT_ALLOCATE]
            attempt.allocations[node["metadata"]["name"]] = found
        for claim in attempt.claims:
            selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
            if selector and not node_selector_matches(selector, node):
                return [NOT_AVAILABLE]
        return []

    def bind(self, pod: dict[str, Any], node_name: str, attempt: Attempt) -> None:
        """PreBind: write each new allocation and reserve every claim for the pod."""
        found = iter(attempt.allocations.get(node_name, []))
        reference = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        for claim in attempt.claims:
            status = dict(claim.get("status") or {})
            if not status.get("allocation"):
                status["allocation"] = next(found)
            reserved = list(status.get("reservedFor") or [])
            if all(r.get("uid") != reference["uid"] for r in reserved):
                reserved.append(reference)
            status["reservedFor"] = reserved
            self.resources.update_status(claim["metadata"]["namespace"], claim["metadata"]["name"], status)

    # ------------------------------------------------------------ the kubelet

    def prepare(self, pod: dict[str, Any]) -> str | None:
        """Why the pod's drivers refuse to prepare its claims (the kubelet's event message), or None."""
        namespace = pod["metadata"]["namespace"]
        types = _device_types(self.slices())
        for name in self._claim_names(pod):
            if name is None or not self.resources.exists(CLAIMS, namespace, name):
                continue
            claim = self.resources.get(CLAIMS, namespace, name)
            error = nvidiaconfig.prepare_error(
                claim, lambda r: types.get((r.get("pool"), r.get("device")), ""), self.gates()
            )
            if error:
                return nvidiaconfig.kubelet_message(claim, error)
        return None


class SchedulingAborted(KubeError):
    """A filter's error: the attempt ends with reason SchedulerError and this message."""

    status, code = 500, "InternalError"


def generate_name(pod: str, entry: str) -> str:
    """The controller's generateName: <pod>-<entry>-, both cut in proportion past 57 characters."""
    base = f"{pod}-{entry}-"
    if len(base) > 57:
        base = pod[: len(pod) * 57 // len(base)] + "-" + entry[: len(entry) * 57 // len(base)]
    return base


def _alternatives(request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if request.get("firstAvailable"):
        return [(f"{request['name']}/{s.get('name')}", s) for s in request["firstAvailable"]]
    return [(str(request.get("name")), request.get("exactly") or {})]


def _device_types(slices: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(pool, device) -> the device's `type` attribute, for the NVIDIA driver's devices."""
    types = {}
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != nvidiaconfig.DRIVER:
            continue
        for device in spec.get("devices") or []:
            kind = ((device.get("attributes") or {}).get("type") or {}).get("string", "")
            types[((spec.get("pool") or {}).get("name"), device.get("name"))] = kind
    return types
