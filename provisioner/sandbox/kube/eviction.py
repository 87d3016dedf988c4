"""The Eviction subresource, POST /api/v1/namespaces/{ns}/pods/{name}/eviction (policy/v1
Eviction), as kubernetes pkg/registry/core/pod/storage/eviction.go decides it (EvictionREST.Create):

1. A name in the body must be the URL's: 400 "name in URL does not match name in Eviction object".
2. The pod: 404 where it does not exist.
3. canIgnorePDB: a pod Succeeded, Failed or Pending, or already terminating, is deleted with no
   budget asked.
4. The budgets of the pod's namespace whose selector, not empty, matches its labels: none, the pod
   is deleted; more than one, a Status of failure with code 500 "This pod has more than one
   PodDisruptionBudget, which the eviction subresource does not support."
5. A pod not Ready: deleted without taking from the budget under unhealthyPodEvictionPolicy
   AlwaysAllow, or under IfHealthyBudget (the default) while currentHealthy >= desiredHealthy > 0.
6. checkAndDecrement: a budget its controller has not seen at this generation gives 429 with
   Retry-After 10 ("... is still being processed by the server."); disruptionsAllowed < 0 and more
   than MaxDisruptedPodSize (2000) disruptedPods give 403; 0 gives 429 "Cannot evict pod as it
   would violate the pod's disruption budget." with the cause DisruptionBudget "The disruption
   budget <pdb> needs <desiredHealthy> healthy pods and has <currentHealthy> currently" and no
   Retry-After; else disruptionsAllowed - 1 and disruptedPods[pod] = now are written to the budget.
7. The pod gets the condition DisruptionTarget (reason EvictionByEvictionAPI) and is deleted with
   the request's deleteOptions (gracePeriodSeconds: graceful, Terminating until its kubelet stops it).
A dry run (deleteOptions.dryRun [All], or ?dryRun=All) decides the same and writes nothing. The
answer to a success is Status Success, 201 (the create handler's code: apiserver
pkg/endpoints/handlers/create.go; the docs say 200).
"""

from __future__ import annotations

from typing import Any

from provisioner.sandbox.kube.disruption import Disruption
from provisioner.sandbox.kube.exceptions import BadRequest, FailureStatus, Forbidden, TooManyRequests
from provisioner.sandbox.kube.objects import now
from provisioner.sandbox.kube.pods import Pods
from provisioner.sandbox.kube.selectors import selector_is_empty, selector_matches
from provisioner.sandbox.kube.workloads import is_ready

MAX_DISRUPTED_PODS = 2000
BUDGET_CAUSE = "DisruptionBudget"  # policy/v1 DisruptionBudgetCause
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MANY_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
DISRUPTION_TARGET = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "EvictionByEvictionAPI",
    "message": "Eviction API: evicting",
}


def too_many_requests(cause: str, retry_after: int) -> TooManyRequests:
    details: dict[str, Any] = {"causes": [{"reason": BUDGET_CAUSE, "message": cause}]}
    if retry_after:
        details = {"retryAfterSeconds": retry_after, **details}
    return TooManyRequests(VIOLATION, details, retry_after=retry_after or None)


class Evictions:
    """Evict pods; the caller holds the cluster's lock and runs the controllers after."""

    def __init__(self, pods: Pods, disruption: Disruption) -> None:
        self.pods, self.disruption = pods, disruption

    def evict(self, namespace: str, name: str, body: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        named = (body.get("metadata") or {}).get("name")
        if named and named != name:
            raise BadRequest("name in URL does not match name in Eviction object")
        options = body.get("deleteOptions") or {}
        dry_run = dry_run or "All" in (options.get("dryRun") or [])
        pod = self.pods.get(namespace, name)
        if pod["status"].get("phase") in ("Succeeded", "Failed", "Pending") or pod["metadata"].get(
            "deletionTimestamp"
        ):
            done = pod["status"].get("phase") in ("Succeeded", "Failed")
            return self._delete(pod, options, dry_run, condition=not done)
        budgets = self.budgets_of(pod)
        if len(budgets) > 1:
            raise FailureStatus(MANY_BUDGETS)
        if not budgets:
            return self._delete(pod, options, dry_run)
        budget = budgets[0]
        status = budget.get("status") or {}
        if not is_ready(pod):
            policy = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            desired = int(status.get("desiredHealthy", 0))
            if policy == "AlwaysAllow" or (int(status.get("currentHealthy", 0)) >= desired > 0):
                return self._delete(pod, options, dry_run)
        self._check_and_decrement(budget, name, dry_run)
        return self._delete(pod, options, dry_run)

    def budgets_of(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """getPodDisruptionBudgets: a nil or empty selector matches nothing here."""
        labels = pod["metadata"].get("labels") or {}
        return [
            b
            for b in self.disruption.budgets.all(pod["metadata"]["namespace"])
            if not selector_is_empty((b.get("spec") or {}).get("selector"))
            and selector_matches(b["spec"]["selector"], labels)
        ]

    def _check_and_decrement(self, budget: dict[str, Any], pod_name: str, dry_run: bool) -> None:
        metadata, status = budget["metadata"], dict(budget.get("status") or {})
        name = metadata["name"]
        if int(status.get("observedGeneration", 0)) < int(metadata.get("generation", 1)):
            raise too_many_requests(
                f"The disruption budget {name} is still being processed by the server.", 10
            )
        allowed = int(status.get("disruptionsAllowed", 0))
        if allowed < 0:
            raise Forbidden(
                f'poddisruptionbudget.policy "{name}" is forbidden: pdb disruptions allowed is negative',
                {"name": name, "group": "policy", "kind": "poddisruptionbudget"},
            )
        disrupted = dict(status.get("disruptedPods") or {})
        if len(disrupted) > MAX_DISRUPTED_PODS:
            raise Forbidden(
                f'poddisruptionbudget.policy "{name}" is forbidden: DisruptedPods map too big - too many '
                "evictions not confirmed by PDB controller",
                {"name": name, "group": "policy", "kind": "poddisruptionbudget"},
            )
        if allowed == 0:
            needs, has = status.get("desiredHealthy", 0), status.get("currentHealthy", 0)
            raise too_many_requests(
                f"The disruption budget {name} needs {needs} healthy pods and has {has} currently", 0
            )
        if dry_run:
            return
        disrupted[pod_name] = now()
        status.update(disruptionsAllowed=allowed - 1, disruptedPods=disrupted)
        self.disruption.budgets.set_status(metadata["namespace"], name, status)

    def _delete(
        self, pod: dict[str, Any], options: dict[str, Any], dry_run: bool, *, condition: bool = True
    ) -> dict[str, Any]:
        if dry_run:
            return dict(SUCCESS)
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        if condition:
            self.pods.add_condition(namespace, name, DISRUPTION_TARGET)
        grace = options.get("gracePeriodSeconds")
        self.pods.terminate(namespace, name, None if grace is None else int(grace))
        return dict(SUCCESS)
