"""The steps of a pool change that happen inside the cluster, between apply's cloud operations.

A create-first replacement waits until the new generation's nodes are Ready and give what the
pool promises (the checks `verify` makes), then drains the old generations through the Eviction
API (kube/drain.py), so their PodDisruptionBudgets are asked, before apply deletes them. A change
of the labels a live node's GPU stack acts on (nvidia.com/mig.config, device-plugin.config) goes
node by node: cordon, drain the GPU pods, relabel, wait until the node is done, uncordon; only
then does apply change the pool's labels at the cloud (NVIDIA/gpu-operator#262: the MIG manager
neither cordons nor evicts).

Each step either finishes or raises RolloutStopped naming what it left as it was; nothing is
deleted that still holds pods unless --force-drain said so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from provisioner.clusters import ClusterRef
from provisioner.compile import CompiledCluster, CompiledPool
from provisioner.drivers import OPERATION_TIMEOUT, Driver, Pending, wait_until
from provisioner.errors import KubeUnreachable, OperationTimeout, RolloutStopped
from provisioner.hardware import PollSchedule
from provisioner.kube.contexts import KubeAccess
from provisioner.kube.drain import EVICTION_RETRY
from provisioner.nvidia import MIG_CONFIG_LABEL
from provisioner.plan import Change
from provisioner.pools import PoolState

# How often the new nodes are looked at while they come up, on the drivers' schedule shape
# (clouds.yaml `polling`): 0.1 s after the cloud said the pool is made, when its nodes are often
# already up, then 30% of the time waited, so nodes that take minutes are looked at every 15 s
# (chosen: no cloud publishes how often to read a node's readiness).
READY_POLLING = PollSchedule(first=0.1, factor=1.3, ceiling=15.0)


@dataclass(frozen=True)
class RolloutSettings:
    drain_timeout: float = 1800.0  # seconds a drain may wait on PodDisruptionBudgets (AKS's default, 30 min)
    force_drain: bool = False  # past drain_timeout, delete the pods that block (bypasses their PDBs)
    max_unavailable: int = 1  # nodes reconfigured at once
    ready_timeout: float = OPERATION_TIMEOUT  # for the new nodes to come up and give their slices
    node_timeout: float = 900.0  # for one node to take a new MIG layout or device-plugin config
    eviction_retry: PollSchedule = EVICTION_RETRY  # between evictions a budget refused (up to kubectl's 5 s)
    polling: PollSchedule = READY_POLLING


class Rollout:
    """One change's in-cluster steps, for apply; `say` reports each to the user."""

    def __init__(
        self,
        settings: RolloutSettings,
        kube: KubeAccess | None,
        compiled: CompiledCluster | None,
        say: Callable[[str], None],
    ):
        self.settings, self.kube, self.compiled, self.say = settings, kube, compiled, say

    def sized(self, driver: Driver, cluster: ClusterRef, change: Change) -> PoolState:
        """The pool to create: a new generation starts with as many nodes as the old ones have now,
        counted in the cluster where the cloud's listing gives no count (GKE)."""
        desired = change.desired
        assert desired is not None
        if change.order != "create-first" or desired.nodes is not None or self.kube is None:
            return desired
        return replace(desired, nodes=self._old_nodes(driver, cluster, change) or None)

    def wait_ready(self, driver: Driver, cluster: ClusterRef, change: Change) -> None:
        """Until the new generation's nodes are Ready and give the pool's slices: as many as it was
        created with, or as the old generations still have (a resumed replacement)."""
        desired = change.desired
        assert desired is not None
        pool = self._pool(change)
        if self.kube is None or pool is None:
            self.say(f"{desired.name} is ready at the cloud; its nodes are not checked (no Kubernetes API)")
            return
        scaling = desired.scaling
        wanted = max(desired.nodes or 0, self._old_nodes(driver, cluster, change))
        expected = min(max(wanted, scaling.min), scaling.max)
        if expected == 0:
            self.say(
                f"{desired.name} starts with no nodes: the autoscaler adds them for the pods the drain moves"
            )
            return
        told: list[str] = []

        def ready() -> bool | Pending:
            good, why = self._ready_nodes(driver, cluster, pool, desired.name)
            if len(good) >= expected:
                return True
            shown = f"{len(good)} of {expected} nodes of {desired.name} ready" + (
                f" ({why[0]})" if why else ""
            )
            if told != [shown]:
                told[:] = [shown]
                self.say(shown)
            return Pending()

        try:
            wait_until(
                ready,
                self.settings.ready_timeout,
                f"the nodes of {desired.name}",
                schedule=self.settings.polling,
            )
        except OperationTimeout:
            seen = told[0] if told else "no nodes"
            raise RolloutStopped(
                f"the new pool {desired.name} did not give its slices within "
                f"{self.settings.ready_timeout:g} s ({seen}); the old pool {', '.join(change.retires)} "
                "is left as it was"
            ) from None
        self.say(
            f"{desired.name}: {expected} node{'s' if expected != 1 else ''} ready with the pool's slices"
        )

    def drain(self, driver: Driver, cluster: ClusterRef, change: Change) -> None:
        """Cordon the old generations' nodes and evict their pods; RolloutStopped where a budget
        keeps pods past --drain-timeout (unless --force-drain)."""
        from provisioner.kube import drain

        old = ", ".join(change.retires)
        if self.kube is None or self.compiled is None:
            if self.settings.force_drain:
                self.say(f"{old}: not drained (no Kubernetes API; --force-drain)")
                return
            raise RolloutStopped(
                f"the new pool is up, but {old} is left: draining it needs the cluster's Kubernetes API "
                "(--no-kube); apply again with it, or with --force-drain to delete it undrained"
            )
        try:
            with self.kube.for_cluster(self.compiled.cluster) as kube:
                nodes = [n for name in change.retires for n in self._node_names(driver, cluster, kube, name)]
                if not nodes:
                    return
                self.say(f"draining {len(nodes)} node{'s' if len(nodes) != 1 else ''} of {old}")
                result = drain.drain(
                    kube,
                    nodes,
                    timeout=self.settings.drain_timeout,
                    force=self.settings.force_drain,
                    retry=self.settings.eviction_retry,
                    progress=self.say,
                )
        except KubeUnreachable as error:
            raise RolloutStopped(f"{old} is left undrained: {error}") from None
        if not result.ok:
            raise RolloutStopped(
                f"the drain of {old} did not finish within {self.settings.drain_timeout:g} s; {old} is left "
                f"(its nodes cordoned) and still runs {result.problems()}. Apply again once the budgets "
                "allow it, or with --force-drain"
            )

    def reconfigure(self, driver: Driver, cluster: ClusterRef, change: Change) -> None:
        """Change the node-reconfiguring labels on the pool's nodes one batch at a time."""
        from provisioner.kube import drain

        desired = change.desired
        assert desired is not None
        pool = self._pool(change)
        # A label the fleet drops is left to the cloud's update: each node's stack falls back to its default.
        labels = {
            key: value for key in change.node_by_node if (value := desired.label_map.get(key)) is not None
        }
        shown = ", ".join(f"{k}={v}" for k, v in labels.items())
        if not labels:
            return
        if self.kube is None or self.compiled is None or pool is None:
            if self.settings.force_drain:
                self.say(f"{desired.name}: {shown} set on every node at once by the cloud (--force-drain)")
                return
            raise RolloutStopped(
                f"{shown} changes what the GPUs of {desired.name}'s live nodes give: it goes node by node "
                "(cordon, drain the GPU pods, relabel, wait), which needs the cluster's Kubernetes API "
                "(--no-kube); apply again with it, or with --force-drain to let the cloud relabel every "
                "node at once"
            )
        if MIG_CONFIG_LABEL in labels:
            wait_for = drain.WaitFor.mig_success()
        else:
            wait_for = drain.WaitFor.allocatable(pool.setup.resource, pool.setup.slices_per_node)
        try:
            with self.kube.for_cluster(self.compiled.cluster) as kube:
                nodes = self._node_names(driver, cluster, kube, desired.name)
                outcomes = drain.reconfigure_nodes(
                    kube,
                    nodes,
                    labels,
                    wait_for=wait_for,
                    max_unavailable=self.settings.max_unavailable,
                    timeout=self.settings.node_timeout,
                    drain_timeout=self.settings.drain_timeout,
                    force=self.settings.force_drain,
                    retry=self.settings.eviction_retry,
                    progress=self.say,
                )
        except KubeUnreachable as error:
            raise RolloutStopped(f"{desired.name} not reconfigured: {error}") from None
        failed = [o for o in outcomes if o.status == "failed"]
        if failed:
            done = sum(o.status in ("reconfigured", "skipped") for o in outcomes)
            raise RolloutStopped(
                f"{failed[0].node}: {failed[0].message}; {done} of {len(nodes)} nodes have {shown}, the "
                f"others keep their old layout, and the pool's labels at the cloud are unchanged"
            )

    def _old_nodes(self, driver: Driver, cluster: ClusterRef, change: Change) -> int:
        """The nodes the generations being retired have in the cluster now (0 where unknown)."""
        if self.kube is None or self.compiled is None:
            return 0
        try:
            with self.kube.for_cluster(self.compiled.cluster) as kube:
                return sum(len(self._node_names(driver, cluster, kube, name)) for name in change.retires)
        except KubeUnreachable:
            return 0

    def _pool(self, change: Change) -> CompiledPool | None:
        if self.compiled is None:
            return None
        return next((p for p in self.compiled.pools if p.pool.name == change.pool), None)

    def _ready_nodes(
        self, driver: Driver, cluster: ClusterRef, pool: CompiledPool, cloud_name: str
    ) -> tuple[list[str], list[str]]:
        """The nodes of cloud pool `cloud_name` that are Ready and give `pool`'s slices, and why
        the first of the others does not."""
        from provisioner.kube.verify import node_problems, read_cluster

        assert self.kube is not None and self.compiled is not None
        try:
            with self.kube.for_cluster(self.compiled.cluster) as kube:
                reads = read_cluster(kube, self.compiled)
                names = set(self._node_names(driver, cluster, kube, cloud_name, reads.nodes))
        except KubeUnreachable as error:
            return [], [str(error)]
        good, why = [], []
        for node in reads.nodes:
            name = node.get("metadata", {}).get("name")
            if name not in names:
                continue
            problems = ([] if _is_ready(node) else [f"node {name} is not Ready"]) or node_problems(
                self.compiled, pool, reads, node
            )
            (why.extend(problems) if problems else good.append(name))
        return good, why

    def _node_names(
        self,
        driver: Driver,
        cluster: ClusterRef,
        kube: Any,
        cloud_name: str,
        nodes: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[str]:
        """The nodes of one cloud pool, by the cloud's own pool label (its name, or on ACK its ID)."""
        assert self.compiled is not None
        label = self.compiled.cloud.pool_label
        assert label is not None
        value: str | None = cloud_name
        if label.value == "cloudId":
            value = next((p.cloud_id for p in driver.list_pools(cluster) if p.name == cloud_name), None)
            if value is None:
                return []
        listed = nodes if nodes is not None else kube.nodes(f"{label.key}={value}")
        return sorted(
            n["metadata"]["name"]
            for n in listed
            if (n["metadata"].get("labels") or {}).get(label.key) == value
        )


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
