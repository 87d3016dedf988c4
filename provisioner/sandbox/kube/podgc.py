"""kube-controller-manager's pod garbage collector, its rule for orphans: a pod bound to a node that
no longer exists (its pool deleted, or scaled down under it) is deleted, so the ReplicaSet that
owns it makes it again and the scheduler binds it elsewhere.

Source: kubernetes/kubernetes pkg/controller/podgc/gc_controller.go, gcOrphaned ("deletes pods
that are bound to nodes that don't exist") through markFailedAndDeletePodWithCondition: a pod
not yet Succeeded or Failed is first patched to Failed with the condition DisruptionTarget=True,
reason DeletionByPodGC, message "PodGC: node no longer exists" (there is no kubelet left to end
it), then deleted with a grace period of 0. Left out: the 40 s quarantine (quarantineTime) in which
the controller waits for a node missing from its informer to show up before it asks the API
server; the sandbox's node list is the API server's own, never behind, and the controller's 20 s
period (gcCheckPeriod): it runs at each of the cluster's scans.
"""

from __future__ import annotations

from typing import Any

from provisioner.sandbox.kube.pods import FINISHED_PHASES, Pods

ORPHANED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByPodGC",
    "message": "PodGC: node no longer exists",
}


def collect_orphans(pods: Pods) -> list[dict[str, Any]]:
    """Delete every pod bound to a node the cluster no longer has; the pods deleted, as they were
    last stored (Failed, with the condition). The caller holds the cluster's lock."""
    nodes = pods.nodes.all()
    orphaned = [
        key
        for key, pod in sorted(pods.stored.items())
        if pod["spec"].get("nodeName") and pod["spec"]["nodeName"] not in nodes
    ]
    for key in orphaned:
        if pods.stored[key]["status"].get("phase") not in FINISHED_PHASES:
            pods.add_condition(*key, ORPHANED)  # replaced whole, with a new resourceVersion
            marked = pods.stored[key]
            pods.stored[key] = {**marked, "status": {**marked["status"], "phase": "Failed"}}
    return [pods.delete(*key) for key in orphaned]
