"""policy/v1 PodDisruptionBudgets: their validation, and the disruption controller that writes
their status, run when a budget is written and at each scan (its pod events, batched).

Sources (kubernetes/kubernetes): pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec
("minAvailable and maxUnavailable cannot be both set"; each an int >= 0 or a percent <= 100%;
unhealthyPodEvictionPolicy IfHealthyBudget | AlwaysAllow); pkg/controller/disruption/disruption.go:
- getExpectedPodCount: maxUnavailable: expected = the replicas of the pods' distinct controllers,
  desiredHealthy = max(0, expected - maxUnavailable scaled up); minAvailable int: desiredHealthy =
  it, expected = the pods selected; minAvailable percent: expected the controllers' replicas,
  desiredHealthy = ceil(pct x expected). A pod without a controller adds nothing to the
  controllers' count (an UnmanagedPods warning); one whose controller is gone fails the sync
  (failSafe: disruptionsAllowed 0, condition SyncFailed, observedGeneration left as it was).
- countHealthyPods: Ready pods not deleting and not in disruptedPods (an entry young enough);
  buildDisruptedPodMap drops entries of pods gone or deleting and those past DeletionTimeout (2 min).
- updatePdbStatus: disruptionsAllowed = currentHealthy - desiredHealthy, 0 when negative or
  expected <= 0; observedGeneration; the DisruptionAllowed condition (SufficientPods /
  InsufficientPods). A null selector selects no pod, `{}` every pod of the namespace.
(apimachinery pkg/util/intstr GetScaledValueFromIntOrPercent: math.Ceil when rounding up.)
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

from provisioner.sandbox.kube.events import Events
from provisioner.sandbox.kube.objects import now
from provisioner.sandbox.kube.pods import Pods
from provisioner.sandbox.kube.selectors import selector_matches, selector_text
from provisioner.sandbox.kube.stored import Cause, Kind, Store
from provisioner.sandbox.kube.validation import invalid
from provisioner.sandbox.kube.workloads import Workloads, is_ready

DELETION_TIMEOUT = datetime.timedelta(minutes=2)
CONTROLLER = "controllermanager"  # the disruption controller's event source
POLICIES = ("IfHealthyBudget", "AlwaysAllow")
_PERCENT = re.compile(r"^[0-9]+%$")
_PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
    "regex used for validation is '[0-9]+%')"
)
UNMANAGED = (
    "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. As a result, "
    "the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To "
    'account for these pods please set ".spec.minAvailable" field of the PDB to an integer value.'
)


def _int_or_percent(value: Any, path: str) -> list[Cause]:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return [invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    if isinstance(value, int):
        return [invalid(path, value, "must be greater than or equal to 0")] if value < 0 else []
    if not _PERCENT.match(value):
        return [invalid(path, value, _PERCENT_MESSAGE)]
    return [invalid(path, value, "must not be greater than 100%")] if int(value[:-1]) > 100 else []


def validate(obj: dict[str, Any], current: dict[str, Any] | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    for field in ("minAvailable", "maxUnavailable"):
        if spec.get(field) is not None:
            causes += _int_or_percent(spec[field], f"spec.{field}")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in POLICIES:
        message = f'Unsupported value: "{policy}": supported values: "{POLICIES[0]}", "{POLICIES[1]}"'
        causes.append(("spec.unhealthyPodEvictionPolicy", "FieldValueNotSupported", message))
    return causes


BUDGETS = Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", lambda obj: None, validate)


def scaled(value: Any, total: int) -> int:
    """GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
    if isinstance(value, str):
        return math.ceil(int(value.rstrip("%")) * total / 100)
    return int(value)


class SyncFailed(Exception):
    pass


class Disruption:
    """The disruption controller over one cluster's budgets; the caller holds the cluster's lock."""

    def __init__(self, budgets: Store, pods: Pods, workloads: Workloads, events: Events) -> None:
        self.budgets, self.pods, self.workloads, self.events = budgets, pods, workloads, events
        self._warned: set[tuple[str, int]] = set()  # (uid, generation) already warned of unmanaged pods

    def sync(self) -> None:
        for budget in list(self.budgets.all()):
            metadata = budget["metadata"]
            self.budgets.set_status(metadata["namespace"], metadata["name"], self.status(budget))

    def selected(self, budget: dict[str, Any]) -> list[dict[str, Any]]:
        namespace, selector = budget["metadata"]["namespace"], (budget.get("spec") or {}).get("selector")
        return [
            p
            for (ns, _), p in sorted(self.pods.stored.items())
            if ns == namespace and selector_matches(selector, p["metadata"].get("labels") or {})
        ]

    def status(self, budget: dict[str, Any]) -> dict[str, Any]:
        """What the controller writes now (trySync, else failSafe)."""
        previous = budget.get("status") or {}
        pods = self.selected(budget)
        try:
            expected, desired = self._expected(budget, pods)
        except SyncFailed as error:
            status = {**previous, "disruptionsAllowed": 0}
            status.setdefault("currentHealthy", 0)
            status.setdefault("desiredHealthy", 0)
            status.setdefault("expectedPods", 0)
            status["conditions"] = _condition(
                previous, False, "SyncFailed", str(error), previous.get("observedGeneration", 0)
            )
            return status
        disrupted = self._still_disrupted(budget, previous.get("disruptedPods") or {}, pods)
        healthy = sum(
            1
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"] not in disrupted
            and is_ready(p)
        )
        allowed = max(0, healthy - desired) if expected > 0 else 0
        generation = budget["metadata"].get("generation", 1)
        status = {
            "observedGeneration": generation,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
        status["conditions"] = _condition(previous, allowed > 0, reason, "", generation)
        return status

    def _expected(self, budget: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[int, int]:
        spec = budget.get("spec") or {}
        if spec.get("maxUnavailable") is not None:
            expected = self._controllers_scale(budget, pods)
            return expected, max(0, expected - scaled(spec["maxUnavailable"], expected))
        minimum = spec.get("minAvailable")
        if isinstance(minimum, int):
            return len(pods), minimum
        if isinstance(minimum, str):
            expected = self._controllers_scale(budget, pods)
            return expected, scaled(minimum, expected)
        return 0, 0

    def _controllers_scale(self, budget: dict[str, Any], pods: list[dict[str, Any]]) -> int:
        """getExpectedScale: the sum of the distinct controllers' replicas."""
        scales: dict[str, int] = {}
        unmanaged = False
        for pod in pods:
            if not (pod["metadata"].get("ownerReferences") or []) or not any(
                o.get("controller") for o in pod["metadata"]["ownerReferences"]
            ):
                unmanaged = True
                continue
            found = self.workloads.scale_of(pod)
            if found is None:
                raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            scales[found[0]] = found[1]
        metadata = budget["metadata"]
        key = (metadata["uid"], metadata.get("generation", 1))
        if unmanaged and key not in self._warned:
            self._warned.add(key)
            message = UNMANAGED.format(selector_text((budget.get("spec") or {}).get("selector")))
            self.events.record(budget, "Warning", "UnmanagedPods", message, CONTROLLER)
        return sum(scales.values())

    def _still_disrupted(
        self, budget: dict[str, Any], disrupted: dict[str, str], pods: list[dict[str, Any]]
    ) -> dict[str, str]:
        """buildDisruptedPodMap: entries of pods that still exist, are not deleting and are young."""
        by_name = {p["metadata"]["name"]: p for p in pods}
        moment = datetime.datetime.now(datetime.UTC)
        kept = {}
        for name, when in disrupted.items():
            pod = by_name.get(name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            if datetime.datetime.fromisoformat(when.replace("Z", "+00:00")) + DELETION_TIMEOUT < moment:
                self.events.record(
                    pod,
                    "Warning",
                    "NotDeleted",
                    f"Pod was expected by PDB {budget['metadata']['namespace']}/{budget['metadata']['name']} "
                    "to be deleted but it wasn't",
                    CONTROLLER,
                )
                continue
            kept[name] = when
        return kept


def _condition(
    previous: dict[str, Any], allowed: bool, reason: str, message: str, generation: int
) -> list[dict[str, Any]]:
    """The DisruptionAllowed condition (apimeta.SetStatusCondition: the transition time kept while
    the status stays)."""
    status = "True" if allowed else "False"
    old = next((c for c in previous.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {})
    since = old.get("lastTransitionTime") if old.get("status") == status else now()
    return [
        {
            "type": "DisruptionAllowed",
            "status": status,
            "observedGeneration": generation,
            "lastTransitionTime": since or now(),
            "reason": reason,
            "message": message,
        }
    ]
