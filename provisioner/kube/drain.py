"""Drain nodes through the Eviction API, and reconfigure GPU nodes one batch at a time.

`drain` is kubectl drain's (docs/FACTS.md §2; kubernetes/kubectl pkg/drain): cordon, list each
node's pods, leave DaemonSet-managed, mirror and finished ones, evict the rest through policy/v1
Eviction all at once; a 429 (a PodDisruptionBudget allows no disruption now) is tried again until
the drain's deadline, a 404 is a pod already gone, and an accepted eviction is waited out until the
pod is gone or its UID changed. At the deadline a pod still there is blocked, or with `force`
deleted (a DELETE asks no budget).

`reconfigure_nodes` is NVIDIA's advice for a MIG change (NVIDIA/gpu-operator#262: cordon, let the
GPU jobs go, label, wait for the change, uncordon), since neither the MIG manager nor the device
plugin cordons or evicts anything itself (FACTS.md §7). Only the pods that use GPUs are drained.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from provisioner.errors import KubeUnreachable
from provisioner.hardware import PollSchedule
from provisioner.kube.contexts import Kube
from provisioner.kube.inspect import FINISHED_PHASES, quantity
from provisioner.nvidia import MIG_CONFIG_LABEL

# A refused eviction is tried again 0.1 s later, then each wait twice the last, as Karpenter
# retries its evictions (sigs.k8s.io/karpenter terminator/eviction.go: evictionQueueBaseDelay
# 100 ms, exponential), but never more than kubectl drain's 5 s apart (EvictErrorRetryDelay,
# FACTS.md §2): a budget freed soon (its pod's replacement Ready) is seen soon, a long one is
# asked no more often than kubectl asks it.
EVICTION_RETRY = PollSchedule(first=0.1, factor=2.0, ceiling=5.0)
# An evicted pod, and a relabelled node, are looked at on the same doubling schedule, up to each
# second as kubectl's waitForDelete polls (pkg/drain/drain.go); the 0.1 s start is chosen.
POLLING = PollSchedule(first=0.1, factor=2.0, ceiling=1.0)
MAX_PARALLEL_EVICTIONS = 32  # kubectl runs one goroutine per pod; a thread each costs more
FORCE_MARGIN_SECONDS = 10.0  # past a forced pod's grace period, how long it may take to go
GPU_RESOURCE_PREFIXES = ("nvidia.com/", "aliyun.com/gpu")  # NVIDIA's device plugin's and ACK cGPU's
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # a static pod's mirror (kubectl filters.go)
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
GPU_DEPLOY_PREFIX = "nvidia.com/gpu.deploy."  # the operands the MIG manager pauses
CORDONED_ANNOTATION = "provisioner.io/cordoned"  # on a node the tool cordoned
UNMANAGED = (
    "no controller manages it, so evicted it would not come back (kubectl drain refuses it "
    "without --force); --force-drain evicts it"
)

Progress = Callable[[str], None]
PodStatus = Literal["evicted", "gone", "forced", "blocked", "failed", "left"]


@dataclass(frozen=True)
class PodOutcome:
    namespace: str
    name: str
    node: str
    status: PodStatus  # evicted; gone before its eviction; forced (deleted); blocked; failed; left
    message: str = ""  # why blocked, failed, forced or left (a 429's names the budget)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DrainResult:
    pods: tuple[PodOutcome, ...]

    def having(self, *statuses: PodStatus) -> list[PodOutcome]:
        return [p for p in self.pods if p.status in statuses]

    @property
    def ok(self) -> bool:
        """Every pod to drain is gone (forced ones included)."""
        return not self.having("blocked", "failed")

    def problems(self, node: str | None = None) -> str:
        """Each pod still there, with why, on one line."""
        return "; ".join(
            f"{p.ref} {p.status}: {p.message}"
            for p in self.having("blocked", "failed")
            if node is None or p.node == node
        )


class _Say:
    """One line per call, whole, whatever thread says it (CI logs: no carriage returns)."""

    def __init__(self, progress: Progress | None) -> None:
        self._progress, self._lock = progress, threading.Lock()

    def __call__(self, line: str) -> None:
        if self._progress is not None:
            with self._lock:
                self._progress(" ".join(line.split()))


def cordon(kube: Kube, node: str) -> None:
    """kubectl cordon: spec.unschedulable through a strategic-merge patch (CordonHelper), marked as
    the tool's so that a later run uncordons a node it left cordoned, and never one a person did."""
    patch = {"metadata": {"annotations": {CORDONED_ANNOTATION: "true"}}, "spec": {"unschedulable": True}}
    kube.patch_node(node, patch, strategic=True)


def uncordon(kube: Kube, node: str) -> None:
    patch = {"metadata": {"annotations": {CORDONED_ANNOTATION: None}}, "spec": {"unschedulable": False}}
    kube.patch_node(node, patch, strategic=True)


def cordoned_by_us(node: Mapping[str, Any]) -> bool:
    return CORDONED_ANNOTATION in ((node.get("metadata") or {}).get("annotations") or {})


def uses_gpu(pod: Mapping[str, Any]) -> bool:
    """Whether the pod holds GPUs: a container asking for a device plugin's GPU resource, or a
    ResourceClaim (DRA)."""
    spec = pod.get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for amounts in (resources.get("requests") or {}, resources.get("limits") or {}):
            if any(r.startswith(GPU_RESOURCE_PREFIXES) and quantity(q) for r, q in amounts.items()):
                return True
    return False


def _left_because(pod: Mapping[str, Any]) -> str | None:
    """Why kubectl's filters leave the pod where it is (filters.go: DaemonSet, mirror), or None."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    if any(o.get("controller") and o.get("kind") == "DaemonSet" for o in owners):
        return "DaemonSet-managed"
    if MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {}):
        return "mirror pod"
    return None


def _controlled(pod: Mapping[str, Any]) -> bool:
    return any(o.get("controller") for o in (pod.get("metadata") or {}).get("ownerReferences") or [])


def drain(
    kube: Kube,
    nodes: Sequence[str],
    *,
    timeout: float,
    force: bool = False,
    only: Callable[[dict[str, Any]], bool] | None = None,
    retry: PollSchedule = EVICTION_RETRY,
    polling: PollSchedule = POLLING,
    progress: Progress | None = None,
) -> DrainResult:
    """Cordon `nodes` and evict their pods (those `only` selects), all at once, until `timeout`
    seconds from now; KubeUnreachable where a node cannot be cordoned or listed."""
    say = _Say(progress)
    evictor = _Evictor(kube, time.monotonic() + timeout, force, retry, polling, say)
    for node in nodes:  # all first: no pod evicted from one lands on the next
        cordon(kube, node)
        say(f"node {node} cordoned")
    left: list[PodOutcome] = []
    evicting: list[tuple[str, dict[str, Any]]] = []
    for node in nodes:
        for pod in kube.pods(field_selector=f"spec.nodeName={node}"):
            if (pod.get("status") or {}).get("phase") in FINISHED_PHASES or (only and not only(pod)):
                continue
            reason = _left_because(pod)
            if reason is None and not force and not _controlled(pod):
                left.append(_outcome(pod, node, "blocked", UNMANAGED))
                say(f"pod {left[-1].ref} blocked on node {node}: {UNMANAGED}")
            elif reason is None:
                evicting.append((node, pod))
            else:
                left.append(_outcome(pod, node, "left", reason))
                say(f"pod {left[-1].ref} left on node {node}: {reason}")
    if not evicting:
        return DrainResult(tuple(left))
    with ThreadPoolExecutor(max_workers=min(len(evicting), MAX_PARALLEL_EVICTIONS)) as pool:
        evicted = list(pool.map(lambda item: evictor.evict(*item), evicting))
    return DrainResult(tuple(left + evicted))


def _outcome(pod: Mapping[str, Any], node: str, status: PodStatus, message: str = "") -> PodOutcome:
    metadata = pod["metadata"]
    return PodOutcome(metadata.get("namespace", ""), metadata["name"], node, status, message)


@dataclass(frozen=True)
class _Evictor:
    """One drain's evictions, each on its own thread, up to one deadline."""

    kube: Kube
    deadline: float  # time.monotonic()'s
    force: bool
    retry: PollSchedule  # between tries of an eviction a budget refused, by the time refused so far
    polling: PollSchedule  # between looks at an evicted pod, by the time since its eviction
    say: _Say

    def evict(self, node: str, pod: dict[str, Any]) -> PodOutcome:
        outcome = self._evict(node, pod)
        if outcome.status == "blocked" and self.force:
            return self._force(pod, outcome)
        if outcome.status in ("blocked", "failed"):
            self.say(f"pod {outcome.ref} {outcome.status}: {outcome.message}")
        return outcome

    def _evict(self, node: str, pod: dict[str, Any]) -> PodOutcome:
        """The eviction, tried again on each 429 until the deadline, then waited out."""
        ref = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
        refused_since: float | None = None
        while True:
            try:
                answer = self.kube.evict(pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
            except KubeUnreachable as exc:
                return _outcome(pod, node, "failed", str(exc))
            if answer.ok:
                self.say(f"pod {ref} evicted from node {node}")
                if self._gone(pod, self.deadline):
                    return _outcome(pod, node, "evicted")
                return _outcome(pod, node, "blocked", "evicted, still terminating at the drain's timeout")
            if answer.status == 404:
                return _outcome(pod, node, "gone")
            if answer.status != 429:
                return _outcome(pod, node, "failed", f"{answer.status} {answer.reason}: {answer.message}")
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                return _outcome(pod, node, "blocked", answer.message)
            if refused_since is None:
                refused_since = time.monotonic()
                self.say(
                    f"pod {ref} not evicted yet, trying again, at most {self.retry.ceiling:g}s apart: "
                    f"{answer.message}"
                )
            wait = max(self.retry.interval(time.monotonic() - refused_since), answer.retry_after or 0.0)
            time.sleep(min(wait, remaining))

    def _force(self, pod: dict[str, Any], blocked: PodOutcome) -> PodOutcome:
        """DELETE a pod the deadline left, and wait out its grace period."""
        grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        why = f"deleted past the drain's timeout ({blocked.message})"
        try:
            self.kube.delete_pod(blocked.namespace, blocked.name)
            gone = self._gone(pod, time.monotonic() + grace + FORCE_MARGIN_SECONDS)
        except KubeUnreachable as exc:
            return _outcome(pod, blocked.node, "failed", f"{why}: {exc}")
        if not gone:
            return _outcome(pod, blocked.node, "failed", f"{why}, still terminating")
        self.say(f"pod {blocked.ref} forced off node {blocked.node}: {why}")
        return _outcome(pod, blocked.node, "forced", why)

    def _gone(self, pod: dict[str, Any], until: float) -> bool:
        """Whether the pod is gone, or a new one took its name, before `until` (waitForDelete)."""
        metadata, since = pod["metadata"], time.monotonic()
        while True:
            try:
                now = self.kube.pod(metadata.get("namespace", ""), metadata["name"])
            except KubeUnreachable:  # one read unanswered is no answer: asked again until `until`
                now = pod
            if now is None or now["metadata"].get("uid") != metadata.get("uid"):
                return True
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(self.polling.interval(time.monotonic() - since), remaining))


# Node-by-node reconfiguration


@dataclass(frozen=True)
class WaitFor:
    """What a relabelled node shows once its GPU stack has followed: the MIG manager's
    nvidia.com/mig.config.state success (`mig`), and/or `count` of `resource` allocatable (the
    device plugin restarted on its new nvidia.com/device-plugin.config)."""

    mig: bool = False
    resource: str | None = None
    count: int | None = None

    def __post_init__(self) -> None:
        if (self.resource is None) != (self.count is None) or not (self.mig or self.resource):
            raise ValueError("WaitFor needs mig=True, or a resource and its count")

    @classmethod
    def mig_success(cls) -> WaitFor:
        return cls(mig=True)

    @classmethod
    def allocatable(cls, resource: str, count: int) -> WaitFor:
        return cls(resource=resource, count=count)

    def check(self, node: Mapping[str, Any]) -> tuple[Literal["done", "waiting", "failed"], str]:
        """Where the node is, and what it shows."""
        labels = node["metadata"].get("labels") or {}
        if self.mig:
            state = labels.get(MIG_STATE_LABEL)
            if state == "failed":
                return "failed", f"{MIG_STATE_LABEL}=failed"
            if state != "success":
                return "waiting", f"{MIG_STATE_LABEL}={state or '(not set)'}"
        if self.resource is not None:
            shown = quantity(((node.get("status") or {}).get("allocatable") or {}).get(self.resource, 0))
            if shown != self.count:
                return "waiting", f"allocatable {self.resource}={shown:g}, expecting {self.count}"
        return "done", ""

    def stuck(self, node: Mapping[str, Any], shown: str, seconds: float) -> str:
        """Why the node is taken as stuck after `seconds`."""
        labels = node["metadata"].get("labels") or {}
        if self.mig and labels.get(MIG_STATE_LABEL) in (None, "pending"):
            paused = ", ".join(
                f"{k}={v}" for k, v in sorted(labels.items()) if k.startswith(GPU_DEPLOY_PREFIX)
            )
            return (
                f"stuck: {shown} after {seconds:g}s; the MIG manager may have given up waiting for "
                f"the GPU clients (NVIDIA/gpu-operator#2833), its operands: {paused or 'none labelled'}"
            )
        return f"stuck: {shown} after {seconds:g}s"


NodeStatus = Literal["reconfigured", "skipped", "failed", "untouched"]


@dataclass(frozen=True)
class NodeOutcome:
    node: str
    status: NodeStatus  # untouched: the rollout stopped before this node's turn
    message: str = ""
    cordoned: bool = False  # left cordoned (a failed node, for the operator to look at)
    drain: DrainResult | None = None


def reconfigure_nodes(
    kube: Kube,
    nodes: Sequence[str],
    labels: Mapping[str, str],
    *,
    wait_for: WaitFor,
    max_unavailable: int = 1,
    timeout: float,
    drain_timeout: float,
    force: bool = False,
    retry: PollSchedule = EVICTION_RETRY,
    polling: PollSchedule = POLLING,
    progress: Progress | None = None,
) -> list[NodeOutcome]:
    """Set `labels` on `nodes`, `max_unavailable` at a time in their order: cordon, drain the pods
    that use GPUs, label, wait (up to `timeout` seconds) for `wait_for`, uncordon. A node that
    fails stops the rollout, cordoned; the nodes after its batch keep their old layout."""
    if max_unavailable < 1:
        raise ValueError("max_unavailable must be at least 1")
    say = _Say(progress)
    rollout = _Rollout(kube, labels, wait_for, timeout, drain_timeout, force, retry, polling, say)
    outcomes: dict[str, NodeOutcome] = {}
    for start in range(0, len(nodes), max_unavailable):
        batch = list(nodes[start : start + max_unavailable])
        if any(o.status == "failed" for o in outcomes.values()):
            outcomes |= {n: NodeOutcome(n, "untouched", "the rollout stopped before its turn") for n in batch}
            continue
        todo: dict[str, dict[str, Any]] = {}
        for name in batch:
            node = kube.node(name)
            if node is None:
                outcomes[name] = _failed(name, "no such node", say, None, cordoned=False)
            elif _carries(node, labels) and wait_for.check(node)[0] == "done":
                if cordoned_by_us(node):  # done since an earlier run stopped on it
                    uncordon(kube, name)
                outcomes[name] = NodeOutcome(name, "skipped", "already labelled and done")
                say(f"node {name} skipped: already labelled and done")
            else:
                todo[name] = node
        if todo:
            outcomes |= rollout.batch(todo)
    stopped = [n for n in nodes if outcomes[n].status == "untouched"]
    if stopped:
        say(f"rollout stopped; not started: {', '.join(stopped)}")
    return [outcomes[n] for n in nodes]


def _carries(node: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return labels.items() <= (node["metadata"].get("labels") or {}).items()


@dataclass(frozen=True)
class _Rollout:
    kube: Kube
    labels: Mapping[str, str]
    wait_for: WaitFor
    timeout: float
    drain_timeout: float
    force: bool
    retry: PollSchedule
    polling: PollSchedule
    say: _Say

    def batch(self, nodes: dict[str, dict[str, Any]]) -> dict[str, NodeOutcome]:
        """One batch's turn: drained together, labelled, waited for together."""
        try:
            drained = drain(
                self.kube, list(nodes), timeout=self.drain_timeout, force=self.force, only=uses_gpu,
                retry=self.retry, polling=self.polling, progress=self.say,
            )  # fmt: skip
        except KubeUnreachable as exc:
            return {name: _failed(name, f"not drained: {exc}", self.say, None) for name in nodes}
        outcomes: dict[str, NodeOutcome] = {}
        waiting: dict[str, dict[str, Any]] = {}
        for name, node in nodes.items():
            problems = drained.problems(name)
            if problems:
                outcomes[name] = _failed(name, f"not drained: {problems}", self.say, drained)
                continue
            try:
                waiting[name] = self.kube.patch_node(name, {"metadata": {"labels": self._patch(node)}})
            except KubeUnreachable as exc:
                outcomes[name] = _failed(name, f"not labelled: {exc}", self.say, drained)
                continue
            self.say(f"node {name} labelled {', '.join(f'{k}={v}' for k, v in self.labels.items())}")
        return outcomes | self._wait(waiting, drained)

    def _patch(self, node: Mapping[str, Any]) -> dict[str, str | None]:
        """The labels to set. A MIG change also clears the state label, so that `success` is read
        only once the MIG manager answered this change, not left over from the last one."""
        patch: dict[str, str | None] = dict(self.labels)
        wanted = self.labels.get(MIG_CONFIG_LABEL)
        had = (node["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL)
        if self.wait_for.mig and wanted is not None and had != wanted:
            patch[MIG_STATE_LABEL] = None
        return patch

    def _wait(self, waiting: dict[str, dict[str, Any]], drained: DrainResult) -> dict[str, NodeOutcome]:
        """Each node's outcome once `wait_for` holds, fails, or the timeout passed."""
        outcomes: dict[str, NodeOutcome] = {}
        started = time.monotonic()
        deadline = started + self.timeout
        shown: dict[str, str] = {}
        while waiting:
            for name in list(waiting):
                try:
                    node = self.kube.node(name)
                except KubeUnreachable as exc:  # no answer about the node: asked again
                    shown[name] = str(exc)
                    continue
                if node is None:
                    outcomes[name] = _failed(name, "the node went away", self.say, drained, cordoned=False)
                    del waiting[name]
                    continue
                waiting[name] = node
                where, shown[name] = self.wait_for.check(node)
                if where == "failed":
                    outcomes[name] = _failed(name, shown[name], self.say, drained)
                elif where == "done":
                    outcomes[name] = self._done(name, drained)
                if where != "waiting":
                    del waiting[name]
            remaining = deadline - time.monotonic()
            if waiting and remaining <= 0:
                for name, node in waiting.items():
                    why = self.wait_for.stuck(node, shown[name], self.timeout)
                    outcomes[name] = _failed(name, why, self.say, drained)
                break
            if waiting:
                time.sleep(min(self.polling.interval(time.monotonic() - started), remaining))
        return outcomes

    def _done(self, name: str, drained: DrainResult) -> NodeOutcome:
        try:
            uncordon(self.kube, name)
        except KubeUnreachable as exc:
            return _failed(name, f"reconfigured, not uncordoned: {exc}", self.say, drained)
        self.say(f"node {name} done, uncordoned")
        return NodeOutcome(name, "reconfigured", drain=drained)


def _failed(
    name: str, why: str, say: _Say, drained: DrainResult | None, *, cordoned: bool = True
) -> NodeOutcome:
    message = f"{why}; left cordoned" if cordoned else why
    say(f"node {name} failed: {message}")
    return NodeOutcome(name, "failed", message, cordoned=cordoned, drain=drained)
