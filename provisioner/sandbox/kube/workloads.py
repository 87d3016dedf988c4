"""The deployment and replicaset controllers of kube-controller-manager, over the stored apps/v1
objects (apps.py) and the cluster's pods, run after each write that concerns them and at each scan.

Sources (kubernetes/kubernetes pkg/controller):
- deployment/sync.go getNewReplicaSet: the new ReplicaSet is `<deployment>-<pod-template-hash>`,
  labelled and selected with pod-template-hash, owned by the Deployment (controller,
  blockOwnerDeletion), annotated deployment.kubernetes.io/revision; controller.ComputeHash is an
  FNV-32a of the template, written with rand.SafeEncodeString (here of the template's canonical
  JSON rather than Go's struct dump, so the same form, not the same digits). On a template change
  the new ReplicaSet takes every replica and the old ones go to 0 at once (no surge pacing here).
- replicaset/replica_set.go manageReplicas: creates the missing pods with generateName `<rs>-`
  (controller_utils.go getPodsPrefix), owned by the ReplicaSet, or deletes the extra ones, the
  least useful first (controller.ActivePods: unassigned, pending, not ready, then the newest);
  pods that are terminating or done do not count (FilterActivePods). calculateStatus: replicas,
  fullyLabeledReplicas, readyReplicas, availableReplicas (minReadySeconds 0), observedGeneration.
- deployment/sync.go syncDeploymentStatus: the ReplicaSets' counts summed, updatedReplicas the new
  one's, unavailableReplicas the rest; conditions Available (MinimumReplicasAvailable when at least
  replicas - maxUnavailable are available) and Progressing (NewReplicaSetAvailable once complete).
- The garbage collector deletes what a deleted Deployment or ReplicaSet owned (kubectl deletes with
  propagationPolicy Background).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from provisioner.sandbox.kube.objects import NAME_ALPHABET, now
from provisioner.sandbox.kube.pods import FINISHED_PHASES, Pods
from provisioner.sandbox.kube.stored import Store

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"


def template_hash(template: dict[str, Any]) -> str:
    """controller.ComputeHash's form: FNV-32a, its decimal text safe-encoded (rand.SafeEncodeString)."""
    digest = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True, separators=(",", ":")).encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(NAME_ALPHABET[ord(c) % len(NAME_ALPHABET)] for c in str(digest))


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """metav1.GetControllerOf: the ownerReference marked controller."""
    return next((o for o in obj["metadata"].get("ownerReferences") or [] if o.get("controller")), None)


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    metadata = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_active(pod: dict[str, Any]) -> bool:
    """controller.IsPodActive: not done and not terminating."""
    return pod["status"].get("phase") not in FINISHED_PHASES and not pod["metadata"].get("deletionTimestamp")


class Workloads:
    """Both controllers over one cluster's stores; the caller holds the cluster's lock."""

    def __init__(self, deployments: Store, replica_sets: Store, pods: Pods) -> None:
        self.deployments, self.replica_sets, self.pods = deployments, replica_sets, pods

    def sync(self) -> None:
        for deployment in list(self.deployments.all()):
            self._sync_deployment(deployment)
        for replica_set in list(self.replica_sets.all()):
            self._sync_replica_set(replica_set)
        for deployment in list(self.deployments.all()):
            self._deployment_status(deployment)

    # What other controllers read

    def owned(self, owner: dict[str, Any], candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        uid = owner["metadata"]["uid"]
        return [c for c in candidates if (controller_of(c) or {}).get("uid") == uid]

    def pods_of(self, replica_set: dict[str, Any]) -> list[dict[str, Any]]:
        namespace = replica_set["metadata"]["namespace"]
        return self.owned(
            replica_set, [p for p in self.pods.stored.values() if p["metadata"]["namespace"] == namespace]
        )

    def scale_of(self, pod: dict[str, Any]) -> tuple[str, int] | None:
        """The pod's controller's uid and replicas, as the disruption controller's finders read them
        (a ReplicaSet a Deployment owns answers for its Deployment); None: no controller found."""
        reference = controller_of(pod)
        if reference is None or reference.get("kind") != "ReplicaSet":
            return None
        namespace = pod["metadata"]["namespace"]
        replica_set = next(
            (r for r in self.replica_sets.all(namespace) if r["metadata"]["uid"] == reference.get("uid")),
            None,
        )
        if replica_set is None:
            return None
        owner = controller_of(replica_set)
        if owner is not None and owner.get("kind") == "Deployment":
            deployment = next(
                (d for d in self.deployments.all(namespace) if d["metadata"]["uid"] == owner.get("uid")), None
            )
            if deployment is None:
                return None
            return deployment["metadata"]["uid"], int(deployment["spec"]["replicas"])
        return replica_set["metadata"]["uid"], int(replica_set["spec"]["replicas"])

    # Deletion, with what the garbage collector then removes

    def delete_deployment(self, namespace: str, name: str) -> dict[str, Any]:
        gone = self.deployments.delete(namespace, name)
        for replica_set in self.owned(gone, self.replica_sets.all(namespace)):
            self.delete_replica_set(namespace, replica_set["metadata"]["name"])
        return gone

    def delete_replica_set(self, namespace: str, name: str) -> dict[str, Any]:
        gone = self.replica_sets.delete(namespace, name)
        for pod in self.pods_of(gone):
            self.pods.terminate(namespace, pod["metadata"]["name"])
        return gone

    # The deployment controller

    def _sync_deployment(self, deployment: dict[str, Any]) -> None:
        metadata, spec = deployment["metadata"], deployment["spec"]
        namespace = metadata["namespace"]
        hashed = template_hash(spec["template"])
        owned = self.owned(deployment, self.replica_sets.all(namespace))
        new = next((r for r in owned if r["metadata"].get("labels", {}).get(HASH_LABEL) == hashed), None)
        replicas = int(spec["replicas"])
        if new is None:
            revision = 1 + max(
                (int(r["metadata"].get("annotations", {}).get(REVISION, 0)) for r in owned), default=0
            )
            self.replica_sets.create(namespace, self._new_replica_set(deployment, hashed, replicas, revision))
        elif new["spec"]["replicas"] != replicas:
            self._scale(new, replicas)
        for old in owned:
            if old is not new and old["spec"]["replicas"] != 0:
                self._scale(old, 0)

    def _new_replica_set(
        self, deployment: dict[str, Any], hashed: str, replicas: int, revision: int
    ) -> dict[str, Any]:
        spec = deployment["spec"]
        template = copy.deepcopy(spec["template"])
        labels = {**(template.get("metadata") or {}).get("labels", {}), HASH_LABEL: hashed}
        template.setdefault("metadata", {})["labels"] = labels
        selector = copy.deepcopy(spec["selector"])
        selector.setdefault("matchLabels", {})[HASH_LABEL] = hashed
        return {
            "metadata": {
                "name": f"{deployment['metadata']['name']}-{hashed}",
                "labels": labels,
                "annotations": {REVISION: str(revision)},
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": template},
        }

    def _scale(self, replica_set: dict[str, Any], replicas: int) -> None:
        metadata = replica_set["metadata"]
        self.replica_sets.patch(
            metadata["namespace"],
            metadata["name"],
            {"spec": {"replicas": replicas}},
            "application/merge-patch+json",
        )

    def _deployment_status(self, deployment: dict[str, Any]) -> None:
        metadata, spec = deployment["metadata"], deployment["spec"]
        owned = self.owned(deployment, self.replica_sets.all(metadata["namespace"]))
        hashed = template_hash(spec["template"])
        new = next((r for r in owned if r["metadata"].get("labels", {}).get(HASH_LABEL) == hashed), None)

        def total(field: str, among: list[dict[str, Any]]) -> int:
            return sum(int((r.get("status") or {}).get(field, 0)) for r in among)

        replicas, available = total("replicas", owned), total("availableReplicas", owned)
        updated = total("replicas", [new] if new else [])
        wanted = int(spec["replicas"])
        status: dict[str, Any] = {"observedGeneration": metadata.get("generation", 1)}
        for field, value in (
            ("replicas", replicas),
            ("updatedReplicas", updated),
            ("readyReplicas", total("readyReplicas", owned)),
            ("availableReplicas", available),
            ("unavailableReplicas", max(0, sum(int(r["spec"]["replicas"]) for r in owned) - available)),
        ):
            if value:
                status[field] = value
        minimum = wanted - _max_unavailable(spec, wanted)
        complete = new is not None and updated == wanted == replicas and available >= wanted
        name = new["metadata"]["name"] if new else ""
        status["conditions"] = self._conditions(
            deployment,
            [
                (
                    "Available",
                    available >= minimum,
                    "MinimumReplicasAvailable",
                    "MinimumReplicasUnavailable",
                    "Deployment has minimum availability.",
                    "Deployment does not have minimum availability.",
                ),
                (
                    "Progressing",
                    True,
                    "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                    "",
                    f'ReplicaSet "{name}" has successfully progressed.'
                    if complete
                    else f'ReplicaSet "{name}" is progressing.',
                    "",
                ),
            ],
        )
        self.deployments.set_status(metadata["namespace"], metadata["name"], status)

    @staticmethod
    def _conditions(
        obj: dict[str, Any], wanted: list[tuple[str, bool, str, str, str, str]]
    ) -> list[dict[str, Any]]:
        """Each condition, keeping its times while it reads the same (lastTransitionTime on a
        change of status, lastUpdateTime on a change of reason or message)."""
        before = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        out = []
        for kind, true, reason_true, reason_false, message_true, message_false in wanted:
            status, reason, message = (
                ("True", reason_true, message_true) if true else ("False", reason_false, message_false)
            )
            old = before.get(kind) or {}
            stamp = now()
            transition = old.get("lastTransitionTime") if old.get("status") == status else stamp
            updated = (
                old.get("lastUpdateTime")
                if (old.get("reason"), old.get("message")) == (reason, message)
                else stamp
            )
            out.append(
                {
                    "type": kind,
                    "status": status,
                    "lastUpdateTime": updated or stamp,
                    "lastTransitionTime": transition or stamp,
                    "reason": reason,
                    "message": message,
                }
            )
        return out

    # The replicaset controller

    def _sync_replica_set(self, replica_set: dict[str, Any]) -> None:
        metadata, spec = replica_set["metadata"], replica_set["spec"]
        namespace = metadata["namespace"]
        active = [p for p in self.pods_of(replica_set) if is_active(p)]
        missing = int(spec["replicas"]) - len(active)
        for _ in range(missing):
            self.pods.create(namespace, self._new_pod(replica_set), schedule=False)
        for pod in _deletion_order(active)[: max(0, -missing)]:
            self.pods.terminate(namespace, pod["metadata"]["name"])
        self._replica_set_status(self.replica_sets.all(namespace), metadata["name"])

    def _new_pod(self, replica_set: dict[str, Any]) -> dict[str, Any]:
        template = copy.deepcopy(replica_set["spec"]["template"])
        metadata = template.get("metadata") or {}
        return {
            "metadata": {
                "generateName": f"{replica_set['metadata']['name']}-",
                "labels": metadata.get("labels") or {},
                **({"annotations": metadata["annotations"]} if metadata.get("annotations") else {}),
                "ownerReferences": [owner_reference(replica_set)],
            },
            "spec": template.get("spec") or {},
        }

    def _replica_set_status(self, in_namespace: list[dict[str, Any]], name: str) -> None:
        replica_set = next(r for r in in_namespace if r["metadata"]["name"] == name)
        metadata = replica_set["metadata"]
        active = [p for p in self.pods_of(replica_set) if is_active(p)]
        labels = (replica_set["spec"]["template"].get("metadata") or {}).get("labels") or {}
        status: dict[str, Any] = {
            "replicas": len(active),
            "observedGeneration": metadata.get("generation", 1),
        }
        for field, value in (
            (
                "fullyLabeledReplicas",
                sum(1 for p in active if labels.items() <= (p["metadata"].get("labels") or {}).items()),
            ),
            ("readyReplicas", sum(1 for p in active if is_ready(p))),
            ("availableReplicas", sum(1 for p in active if is_ready(p))),
        ):
            if value:
                status[field] = value
        self.replica_sets.set_status(metadata["namespace"], metadata["name"], status)


def _deletion_order(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """controller.ActivePods order, the first deleted first: not yet bound, pending, not ready,
    then the youngest."""
    youngest = sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True)

    def rank(pod: dict[str, Any]) -> tuple[bool, int, bool]:
        phase = {"Pending": 0, "Unknown": 1, "Running": 2}.get(pod["status"].get("phase", ""), 0)
        return bool(pod["spec"].get("nodeName")), phase, is_ready(pod)

    return sorted(youngest, key=rank)


def _max_unavailable(spec: dict[str, Any], replicas: int) -> int:
    """The rolling update's maxUnavailable as a count (a percent rounds down: deploymentutil
    MaxUnavailable, ResolveFenceposts), 0 for Recreate."""
    rolling = (spec.get("strategy") or {}).get("rollingUpdate")
    if not rolling:
        return 0
    value = rolling.get("maxUnavailable", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return math.floor(int(value[:-1]) * replicas / 100)
    return int(value)
