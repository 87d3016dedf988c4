"""apps/v1 Deployments and ReplicaSets as the API server stores them: their defaults (kubernetes
pkg/apis/apps/v1/defaults.go: replicas 1; a Deployment's RollingUpdate strategy with 25%
maxUnavailable and maxSurge, revisionHistoryLimit 10, progressDeadlineSeconds 600; the pod
template's as core/v1 defaults a pod spec) and validation (pkg/apis/apps/validation: the selector is
required and not empty, the template's labels must match it, it is immutable in apps/v1, replicas
are not negative, the template has containers).

Their controllers are workloads.py's.
"""

from __future__ import annotations

from typing import Any

from provisioner.sandbox.kube.selectors import selector_is_empty, selector_matches
from provisioner.sandbox.kube.stored import Cause, Kind
from provisioner.sandbox.kube.validation import invalid, required


def _default_template(spec: dict[str, Any]) -> None:
    """core/v1 SetDefaults_PodSpec and SetDefaults_Container, as far as a template shows them."""
    pod = spec.setdefault("template", {}).setdefault("spec", {})
    pod.setdefault("restartPolicy", "Always")
    pod.setdefault("terminationGracePeriodSeconds", 30)
    pod.setdefault("dnsPolicy", "ClusterFirst")
    pod.setdefault("schedulerName", "default-scheduler")
    pod.setdefault("securityContext", {})
    for container in pod.get("containers") or []:
        image = str(container.get("image") or "")
        latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})


def default_replica_set(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _default_template(spec)


def default_deployment(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _default_template(spec)


def validate(obj: dict[str, Any], current: dict[str, Any] | None) -> list[Cause]:
    """ValidateDeploymentSpec / ValidateReplicaSetSpec, what the two share."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    replicas = spec.get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        causes.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    selector = spec.get("selector")
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector is None:
        causes.append(required("spec.selector"))
    elif selector_is_empty(selector):
        causes.append(
            invalid("spec.selector", selector, f"empty selector is invalid for {obj['kind'].lower()}")
        )
    elif not selector_matches(selector, labels):
        causes.append(
            invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`")
        )
    if not (template.get("spec") or {}).get("containers"):
        causes.append(required("spec.template.spec.containers"))
    if current is not None and selector != (current.get("spec") or {}).get("selector"):
        causes.append(invalid("spec.selector", selector, "field is immutable"))
    return causes


DEPLOYMENTS = Kind("apps", "v1", "Deployment", "deployments", default_deployment, validate)
REPLICA_SETS = Kind("apps", "v1", "ReplicaSet", "replicasets", default_replica_set, validate)
