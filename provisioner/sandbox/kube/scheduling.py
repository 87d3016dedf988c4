"""kube-scheduler's filters, as far as the sandbox's pods need them, and its FitError message.

Sources: kubernetes/kubernetes pkg/scheduler/framework/plugins: NodeUnschedulable ("node(s) were
unschedulable", unless the pod tolerates node.kubernetes.io/unschedulable:NoSchedule),
TaintToleration ("node(s) had untolerated taint {%s: %s}", key and value, only
NoSchedule and NoExecute taints), NodeAffinity ("node(s) didn't match Pod's node affinity/selector",
spec.nodeSelector here), NodeResourcesFit ("Insufficient %v" per resource, "Too many pods"). The
framework runs the filters in that order and stops at a node's first failing plugin. FitError:
"0/N nodes are available: " then "<count> <reason>" per reason, sorted, joined ", ", and the
preemption summary after it (no pod here has a priority, so preemption finds no victims).
Cluster-autoscaler runs the same filters against its template nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
# NodeUnschedulable lets a pod onto a cordoned node where it tolerates this taint (node_unschedulable.go).
UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
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


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """v1 Toleration.ToleratesTaint: effect empty or equal; key empty (with Exists) or equal;
    operator Exists, or Equal (the default) with equal values."""
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
        if key and key != taint.get("key"):
            continue
        if not key and operator != "Exists":
            continue
        if operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def failures(
    pod: Mapping[str, Any], node: Mapping[str, Any], held: Mapping[str, int], pods_on_node: int
) -> list[str]:
    """Why `pod` does not fit `node`, whose active pods (`pods_on_node` of them) hold `held`
    of its extended resources: the first failing filter's reasons, [] where it fits."""
    spec, node_spec = pod.get("spec") or {}, node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node_spec.get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE):
        return ["node(s) were unschedulable"]
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in SCHEDULING_EFFECTS and not tolerates(tolerations, taint):
            return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"]
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return ["node(s) didn't match Pod's node affinity/selector"]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    reasons = []
    if pods_on_node + 1 > int(allocatable.get("pods", "0")):
        reasons.append("Too many pods")
    for resource, wanted in sorted(pod_requests(pod).items()):
        if held.get(resource, 0) + wanted > int(str(allocatable.get(resource, "0"))):
            reasons.append(f"Insufficient {resource}")
    return reasons


def counted(reasons: Iterable[str]) -> str:
    """ "<count> <reason>" per distinct reason, sorted, joined with ", "."""
    tally: dict[str, int] = {}
    for reason in reasons:
        tally[reason] = tally.get(reason, 0) + 1
    return ", ".join(sorted(f"{n} {reason}" for reason, n in tally.items()))


def fit_error(per_node: Mapping[str, list[str]], pre_filter: str = "", post_filter: str = "") -> str:
    """kube-scheduler's message for a pod no node fits, given each node's reasons (FitError.Error):
    a PreFilter plugin's reason stands for every node's; PostFilter plugins' reasons follow, the
    DynamicResources plugin's ("still not schedulable") before the preemption summary."""
    total = len(per_node)
    if not total:
        return "no nodes available to schedule pods"
    reasons = [r for found in per_node.values() for r in found]
    preemption = [
        NO_VICTIMS if not pre_filter and _resources_only(found) else NOT_HELPFUL
        for found in per_node.values()
    ]
    post = f"{post_filter}, " if post_filter else ""
    return (
        f"0/{total} nodes are available: {pre_filter or counted(reasons)}. "
        f"{post}preemption: 0/{total} nodes are available: {counted(preemption)}."
    )


def _resources_only(reasons: list[str]) -> bool:
    """Only resources are short: evicting pods could help, were there any of lower priority."""
    return all(r.startswith("Insufficient ") or r == "Too many pods" for r in reasons)


def matches_node_affinity(affinity: Mapping[str, Any] | None, node: Mapping[str, Any]) -> bool:
    """Whether `node` satisfies `affinity`'s requiredDuringSchedulingIgnoredDuringExecution (v1
    NodeSelector: its terms ORed, each term's matchExpressions on labels and matchFields on
    metadata.name ANDed; operators In, NotIn, Exists, DoesNotExist, Gt, Lt: k8s.io/component-
    helpers scheduling/corev1/nodeaffinity). No affinity, or no required part, matches every node."""
    required = ((affinity or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    metadata = node.get("metadata") or {}
    labels, fields = metadata.get("labels") or {}, {"metadata.name": metadata.get("name", "")}
    terms = required.get("nodeSelectorTerms") or []
    return any(
        (term.get("matchExpressions") or term.get("matchFields"))
        and all(_requirement(r, labels) for r in term.get("matchExpressions") or [])
        and all(_requirement(r, fields) for r in term.get("matchFields") or [])
        for term in terms
    )


def _requirement(requirement: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = requirement.get("key", ""), requirement.get("operator", "")
    wanted = [str(v) for v in requirement.get("values") or []]
    present, value = key in values, values.get(key)
    if operator == "In":
        return present and value in wanted
    if operator == "NotIn":
        return not present or value not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            number, bound = int(str(value)), int(wanted[0])
        except ValueError:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False
