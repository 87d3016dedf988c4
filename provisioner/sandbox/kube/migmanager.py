"""NVIDIA's k8s-mig-manager on each node of a pool whose GPU Operator partitions GPUs from the
`nvidia.com/mig.config` label (EKS here): what it reports while it reconfigures.

Source: NVIDIA/mig-parted@bd7160f4 (v0.15.0). cmd/nvidia-mig-manager/main.go:557-576 acts when
the label changes value; pkg/mig/reconfigure/reconfigure.go Run (:127-239), in order: a config it
cannot validate is `failed` at once, nothing else touched (:137-140); one already applied is
`success` (:142-145); else the state becomes `pending` (:158), the GPU clients are paused by
setting their nvidia.com/gpu.deploy.* labels to `paused-for-mig-change` (:164, 371-385; a "false"
stays "false", :581-586), the config is applied (:206), the clients restarted (:234, labels back to
"true") and the state is `success` (:239). A failed apply (:206-208) returns before the restart:
the state is `failed` and the device plugin stays paused, so the node advertises no GPUs for any
layout until the label changes again (main.go:440-443 logs and waits for the next change). A wait
for the clients' pods that times out (:170-172) returns without setting a state: `pending` forever
(NVIDIA/gpu-operator#2833), which `stall` forces.
It never cordons the node nor evicts pods (a grep of mig-parted finds no cordon or Eviction use):
pods already holding GPUs keep running (the kubelet does not kill them for capacity lost).

A reconfiguration takes the sandbox's op_seconds on its engine's clock, and fails with its
fault_rate, drawn per node and change from its seed, so a run is repeatable whatever the order of
requests. A node's first label is in place when it joins (its boot applied it).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

PENDING, SUCCESS, FAILED = "pending", "success", "failed"


@dataclass(frozen=True)
class MigReport:
    """What the MIG manager shows for a node: its state label, the label value whose layout the
    GPUs carry (None: whole GPUs), and whether the GPU clients are paused (no device plugin)."""

    state: str
    applied: str | None
    paused: bool = False


@dataclass
class _Run:
    wanted: str
    started: float
    fails: bool
    stuck: bool = False


@dataclass
class _Node:
    label: str  # the label value last acted on
    applied: str | None  # the config in place
    state: str
    paused: bool = False  # the GPU clients left paused (after a failed apply)
    run: _Run | None = None
    runs: int = 0
    stall_next: bool = False


class MigManager:
    """Every node's MIG manager in one cluster; the caller holds the cluster's lock."""

    def __init__(
        self,
        clock: Callable[[], float],
        op_seconds: Callable[[], float],
        fault_rate: Callable[[], float],
        seed: int | None,
        scope: str,
    ) -> None:
        self.clock, self.op_seconds, self.fault_rate = clock, op_seconds, fault_rate
        self.seed, self.scope = seed, scope  # scope: the cluster, so clusters draw apart
        self.nodes: dict[str, _Node] = {}

    def report(self, node: str, label: str, valid: bool) -> MigReport:
        """The manager's report for `node`, whose nvidia.com/mig.config is `label` now; `valid`:
        whether the config exists for its GPUs."""
        known = self.nodes.get(node)
        if known is None:
            known = _Node(label, label if valid else None, SUCCESS if valid else FAILED)
            self.nodes[node] = known
        elif label != known.label:
            self._changed(node, known, label, valid)
        return self._settled(known)

    def stall(self, node: str) -> None:
        """The node's reconfiguration in flight, else its next one, stays pending (#2833)."""
        known = self.nodes.get(node)
        if known is None:
            return
        if known.run is not None:
            known.run.stuck = True
        else:
            known.stall_next = True

    def forget(self, present: set[str]) -> None:
        for gone in set(self.nodes) - present:
            del self.nodes[gone]

    def _changed(self, node: str, known: _Node, label: str, valid: bool) -> None:
        known.label = label
        if not valid:  # refused before pending: the layout and the clients stay as they were
            known.run, known.state = None, FAILED
            return
        if label == known.applied and known.run is None and known.state == SUCCESS:
            return  # already applied
        known.runs += 1
        fails = self._draw(node, label, known.runs)
        known.run = _Run(label, self.clock(), fails, stuck=known.stall_next)
        known.stall_next = False

    def _settled(self, known: _Node) -> MigReport:
        run = known.run
        if run is not None and not run.stuck and self.clock() >= run.started + self.op_seconds():
            known.run = None
            if run.fails:  # partitions half made, the clients never restarted
                known.applied, known.state, known.paused = None, FAILED, True
            else:
                known.applied, known.state, known.paused = run.wanted, SUCCESS, False
        if known.run is not None:
            return MigReport(PENDING, known.applied, paused=True)
        return MigReport(known.state, known.applied, paused=known.paused)

    def _draw(self, node: str, label: str, run: int) -> bool:
        rate = self.fault_rate()
        if rate <= 0:
            return False
        if self.seed is None:
            return random.random() < rate
        return random.Random(f"{self.seed}/{self.scope}/{node}/{label}/{run}").random() < rate
