"""One cluster's cluster autoscaler, as kubernetes/autoscaler's core runs it on each scan
(kubernetes-sigs/cluster-autoscaler pkg/core, pkg/processors):

- Scale-up: the pods the scheduler left Unschedulable, less those that fit nodes already asked
  for and not yet joined, are tried against each node group's template node with the scheduler's
  own filters (scheduling.py). A group at its max is skipped ("max node group size reached"). The
  group that fits the most pods (the most-pods expander; ties by name, for determinism) grows by
  the nodes those pods need, first-fit, up to its max; each pod it takes gets TriggeredScaleUp
  "pod triggered scale-up: [{<group> <now>-><new> (max: <max>)}]". When no group grows, every pod
  left gets NotTriggerScaleUp "pod didn't trigger scale-up: " and "<groups> <reason>" per reason
  (sorted here; CA's order is Go's map order). The group's size is set in the cloud at once (AWS
  SetDesiredCapacity, the scale set's capacity, the instance groups' resize, the scaling group's),
  so the cloud's API reports it while the instances boot; the new nodes join the Kubernetes API
  op_seconds later (read at each scan), absent from it until then. Nodes the cloud counts and
  Kubernetes does not list yet are CA's "upcoming nodes": pending pods that fit them wait.
- Templates: a group's Ready node where it has one, else the last one it had (nodeInfoCache),
  else the cloud provider's template (templates.py, nodegroups.py).
- Scale-down: a node of a group with no active pod for `scale_down_delay` seconds is removed,
  never below the group's min (CA's --scale-down-unneeded-time, default 10 minutes). The clouds
  here number their nodes, so only idle nodes at the end of a group go.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from provisioner.sandbox.kube.events import AUTOSCALER, Events
from provisioner.sandbox.kube.nodegroups import GROUPS, NodeGroup
from provisioner.sandbox.kube.nodes import Nodes
from provisioner.sandbox.kube.pods import Pods
from provisioner.sandbox.kube.scheduling import counted, failures, is_ready, pod_requests
from provisioner.sandbox.kube.templates import Template

MAX_SIZE_REACHED = "max node group size reached"
Bin = tuple[dict[str, int], int]  # what a template node's pods hold, and how many


class ClusterAutoscaler:
    def __init__(
        self,
        nodes: Nodes,
        pods: Pods,
        events: Events,
        scale_down_delay: float,
        op_seconds: Callable[[], float],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nodes, self.pods, self.events = nodes, pods, events
        self.scale_down_delay = scale_down_delay
        self.op_seconds = op_seconds  # how long a node the cloud added takes to join
        self.clock = clock
        self.idle_since: dict[str, float] = {}
        self.cache: dict[str, Template] = {}  # pool -> the template of its last Ready node

    def scan(self) -> None:
        """One loop: join nodes whose time came, schedule, scale up, scale down. The caller holds
        the cluster's lock."""
        now = self.clock()
        self._join(now)
        groups = self._groups()
        self.pods.retry()
        self._scale_up(groups, now)
        self._scale_down(groups, now)

    def _join(self, now: float) -> None:
        """Booting nodes whose time came join; those the cloud no longer counts are forgotten."""
        counted_now = {name for pool in self.nodes.cloud_pools() for name in pool.node_names}
        for name, asked in list(self.nodes.booting.items()):
            if name not in counted_now or now >= asked + self.op_seconds():
                del self.nodes.booting[name]

    def _groups(self) -> list[NodeGroup]:
        pools = {pool.name: pool for pool in self.nodes.pools()}
        groups = GROUPS[type(self.nodes.source)](self.nodes.source, pools)
        nodes = self.nodes.all()
        for group in groups:
            ready = [nodes[n] for n in pools[group.pool].node_names if n in nodes and is_ready(nodes[n])]
            if ready:
                self.cache[group.pool] = _from_node(ready[0])
            group.template = self.cache.get(group.pool, group.template)
        return groups

    def _scale_up(self, groups: list[NodeGroup], now: float) -> None:
        # Pods with ResourceClaims wait here: simulating DRA on template nodes is cluster-autoscaler's
        # own DRA support (a feature of its own, not emulated), and a template node publishes no slices.
        pending = [p for p in self.pods.unschedulable() if not (p.get("spec") or {}).get("resourceClaims")]
        joined = {g.pool: len(self.nodes.pools_by_name()[g.pool].node_names) for g in groups}
        for group in groups:  # pods that will fit the nodes already asked for wait for them
            waiting = group.size - joined[group.pool]
            if waiting > 0:
                placed, _ = _pack(pending, group.template, [({}, 0) for _ in range(waiting)], 0)
                pending = [p for p in pending if p not in placed]
        if not pending:
            return
        options = []
        reasons: dict[str, list[str]] = {p["metadata"]["uid"]: [] for p in pending}
        for group in groups:
            if group.size >= group.max_size:
                for found in reasons.values():
                    found.append(MAX_SIZE_REACHED)
                continue
            template = group.template.node(f"template-node-for-{group.ids[0]}")
            fitting = []
            for pod in pending:
                failed = failures(pod, template, {}, 0)
                reasons[pod["metadata"]["uid"]].extend(failed)
                if not failed:
                    fitting.append(pod)
            if fitting:
                options.append((group, fitting))
        if not options:
            for pod in pending:
                message = f"pod didn't trigger scale-up: {counted(reasons[pod['metadata']['uid']])}"
                self.events.record(pod, "Normal", "NotTriggerScaleUp", message, AUTOSCALER)
            return
        group, fitting = min(options, key=lambda o: (-len(o[1]), o[0].ids))
        target = group.size
        room = (group.max_size - target) // group.step * group.step
        placed, used = _pack(fitting, group.template, [], room)
        grow = -(-used // group.step) * group.step
        new = target + grow
        self._grow(group, new, now)
        infos = " ".join(
            f"{{{id_} {target // group.step}->{new // group.step} (max: {group.max_size // group.step})}}"
            for id_ in group.ids
        )
        message = f"pod triggered scale-up: [{infos}]"
        for pod in placed:
            self.events.record(pod, "Normal", "TriggeredScaleUp", message, AUTOSCALER)

    def _grow(self, group: NodeGroup, size: int, now: float) -> None:
        """Set the group's size in the cloud now; the nodes it adds boot, unlisted, until they join."""
        counted_before = set(self.nodes.cloud_pools_by_name()[group.pool].node_names)
        group.resize(size)
        for name in self.nodes.cloud_pools_by_name()[group.pool].node_names:
            if name not in counted_before:
                self.nodes.booting[name] = now

    def _scale_down(self, groups: list[NodeGroup], now: float) -> None:
        pools, counted_now = self.nodes.pools_by_name(), self.nodes.cloud_pools_by_name()
        for group in groups:
            names = pools[group.pool].node_names
            for name in names:
                if self.pods.held(name)[1]:
                    self.idle_since.pop(name, None)
                else:
                    self.idle_since.setdefault(name, now)
            if any(n in self.nodes.booting for n in counted_now[group.pool].node_names):
                continue  # CA leaves a group alone while its scale-up's nodes boot
            size = group.size
            while size - group.step >= group.min_size and size == len(names):
                per_zone = size // group.step
                last = [names[(zone + 1) * per_zone - 1] for zone in range(group.step)]
                if not all(now - self.idle_since.get(n, now) >= self.scale_down_delay for n in last):
                    break
                names = [n for n in names if n not in last]
                size -= group.step
            if size != group.size:
                group.resize(size)
        gone = set(self.idle_since) - {n for pool in pools.values() for n in pool.node_names}
        for name in gone:
            del self.idle_since[name]


# Taints CA drops from a real node it copies into a template: the node-condition ones (cluster-
# autoscaler utils/taints NodeConditionTaints), so a cordoned node's group still scales up.
CONDITION_TAINTS = ("node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready")


def _from_node(node: dict[str, Any]) -> Template:
    """A real node as a template (CA's sanitised NodeInfo): its labels, taints, extended resources."""
    labels = dict(node["metadata"].get("labels") or {})
    labels.pop("kubernetes.io/hostname", None)
    allocatable = node["status"].get("allocatable") or {}
    resources = {k: int(v) for k, v in allocatable.items() if "/" in k}
    taints = [dict(t) for t in node["spec"].get("taints") or [] if t.get("key") not in CONDITION_TAINTS]
    return Template(labels, taints, resources)


def _pack(
    pods: list[dict[str, Any]], template: Template, bins: list[Bin], room: int
) -> tuple[list[dict[str, Any]], int]:
    """First-fit `pods` into `bins` (template nodes), opening up to `room` new ones: the pods
    placed, and how many new nodes they took."""
    node, opened, placed = template.node("template"), 0, []
    for pod in pods:
        i = next((i for i, (held, count) in enumerate(bins) if not failures(pod, node, held, count)), None)
        if i is None:
            if opened >= room or failures(pod, node, {}, 0):
                continue
            bins.append(({}, 0))
            opened, i = opened + 1, len(bins) - 1
        held, count = bins[i]
        wanted = pod_requests(pod)
        bins[i] = ({k: held.get(k, 0) + wanted.get(k, 0) for k in {*held, *wanted}}, count + 1)
        placed.append(pod)
    return placed, opened
