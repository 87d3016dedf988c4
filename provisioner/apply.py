"""Run a Plan: clusters in parallel, one operation at a time in each, behind a per-cluster lock.

Before acting on a cluster, apply waits for any operation still running there (one a killed run
left behind is waited for, never repeated), then observes again: a cluster that changed since
the plan is refused as stale, never acted on from an outdated picture.

Where the fleet's pools name device-plugin config keys, apply first server-side-applies the
cluster's device-plugin ConfigMap (kube/configmap.py), under the same lock; a pool whose label
names a key that could not be put in place is not created or updated, since its nodes would
give no shares.

Apply is the one layer that retries an operation: each step of an action (a create-first replace
is a create, the new nodes' readiness, a drain, a delete) is retried on its own, and drivers never
retry inside it. The steps inside the cluster (readiness, drain, node-by-node reconfiguration) are
provisioner/rollout.py's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from provisioner.actions import Action
from provisioner.clusters import ClusterRef
from provisioner.compile import CompiledCluster
from provisioner.drivers import OPERATION_TIMEOUT, Driver, wait_until
from provisioner.errors import (
    CloudError,
    NotFound,
    OperationFailed,
    ProvisionerError,
    RolloutStopped,
    StalePlan,
    Unreachable,
)
from provisioner.kube.configmap import NO_KUBE_HINT, ConfigMapPlan, install
from provisioner.kube.contexts import KubeAccess
from provisioner.locks import Locks
from provisioner.nvidia import DEVICE_PLUGIN_LABEL
from provisioner.observe import Drivers
from provisioner.plan import Change, ClusterPlan, Plan, fingerprint
from provisioner.pools import PoolState
from provisioner.retry import OUTAGE_WINDOW, Patience, RetryPolicy, patient
from provisioner.rollout import Rollout, RolloutSettings

MAX_PARALLEL_CLUSTERS = 32  # clusters applied at once, each running its operations one at a time


@dataclass(frozen=True)
class Outcome:
    cluster: str
    pool: str
    action: Action
    done: bool
    message: str = ""
    unreachable: bool = False  # the cloud stayed unreachable past the outage window
    then: Action | None = None  # after an adoption: the update or replace that followed it


@dataclass(frozen=True)
class ConfigMapOutcome:
    cluster: str
    path: str  # namespace/name
    failed: bool  # the planned change was not made, or keys the pools need are not in place
    message: str  # what changed, or why not


@dataclass
class ApplyResult:
    outcomes: list[Outcome] = field(default_factory=list)
    config_maps: list[ConfigMapOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.done for o in self.outcomes) and not any(c.failed for c in self.config_maps)

    @property
    def done(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.done]

    @property
    def not_done(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.done]


class Reporter(Protocol):
    def cluster_waiting(self, cluster: str, why: str) -> None: ...
    def change_started(self, change: Change) -> None: ...
    def change_retrying(self, change: Change, error: CloudError, delay: float) -> None: ...
    def change_progress(self, change: Change, message: str) -> None: ...  # a step inside the cluster
    def change_finished(self, outcome: Outcome) -> None: ...


class SilentReporter:
    def cluster_waiting(self, cluster: str, why: str) -> None:
        pass

    def change_started(self, change: Change) -> None:
        pass

    def change_retrying(self, change: Change, error: CloudError, delay: float) -> None:
        pass

    def change_progress(self, change: Change, message: str) -> None:
        pass

    def change_finished(self, outcome: Outcome) -> None:
        pass


@dataclass
class Applier:
    drivers: Drivers
    locks: Locks
    lock_timeout: float = 300.0
    policy: RetryPolicy = field(default_factory=lambda: RetryPolicy(attempts=12))
    operation_timeout: float = OPERATION_TIMEOUT
    reporter: Reporter = field(default_factory=SilentReporter)
    outage_window: float = OUTAGE_WINDOW  # an unreachable cloud is given up on after this long
    kube: KubeAccess | None = None  # None: the device-plugin ConfigMaps are not the tool's (--no-kube)
    compiled: Mapping[str, CompiledCluster] = field(default_factory=dict)  # by fleet cluster name
    rollout: RolloutSettings = field(default_factory=RolloutSettings)  # drains, readiness, node by node

    def run(self, plan: Plan) -> ApplyResult:
        work = [c for c in plan.clusters if c.changes or self._config_map(c) is not None]
        result = ApplyResult()
        if not work:
            return result
        self.drivers.prepare([c.target for c in work])
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_CLUSTERS, len(work))) as pool:
            for outcomes, config_map in pool.map(self._run_cluster, work):
                result.outcomes.extend(outcomes)
                if config_map is not None:
                    result.config_maps.append(config_map)
        return result

    def _config_map(self, planned: ClusterPlan) -> ConfigMapPlan | None:
        """The ConfigMap to install before the pools: where planned, and the pools need one or it changes."""
        config_map = planned.configmap
        if self.kube is None or config_map is None or not (config_map.pending or planned.changes):
            return None
        return config_map

    def _run_cluster(self, planned: ClusterPlan) -> tuple[list[Outcome], ConfigMapOutcome | None]:
        target = planned.target
        driver = self.drivers(target.cloud)
        installed: ConfigMapOutcome | None = None
        try:
            with (
                self.locks.hold(target.ref.key, self.lock_timeout, f"cluster {target.name}"),
                patient(Patience(self.outage_window, self._cluster_retrying(target.name))),
            ):
                self._settle(driver, target.ref, planned)
                blocked: Mapping[str, str] = {}
                config_map = self._config_map(planned)
                if config_map is not None:
                    installed, blocked = self._install(config_map)
                outcomes: list[Outcome] = []
                for change in planned.changes:
                    gone = next((o for o in outcomes if o.unreachable), None)
                    key = change.desired.label_map.get(DEVICE_PLUGIN_LABEL) if change.desired else None
                    if gone is not None:  # a cloud given up on is not waited out again per change
                        message = f"not attempted: {target.name} is unreachable"
                        outcomes.append(Outcome(target.name, change.pool, change.action, False, message))
                    elif key in blocked:
                        message = (
                            f"not attempted: its label names device-plugin key {key}, which is not in "
                            f"place, so its nodes would not share their GPUs: {blocked[key]}"
                        )
                        outcomes.append(Outcome(target.name, change.pool, change.action, False, message))
                    else:
                        outcomes.append(self._carry_out(driver, target.ref, change))
                return outcomes, installed
        except ProvisionerError as error:  # the lock, the settling or the staleness check
            failed = [Outcome(target.name, c.pool, c.action, False, str(error)) for c in planned.changes]
            return failed, installed

    def _install(self, planned: ConfigMapPlan) -> tuple[ConfigMapOutcome, Mapping[str, str]]:
        """Server-side-apply the cluster's ConfigMap; the keys the pools need that are not in place."""
        assert self.kube is not None
        done = install(self.kube, planned)
        name = planned.cluster
        if done.error is not None:
            message = f"not applied: {done.error}; {NO_KUBE_HINT}"
        else:
            what = f"applied: {done.summary(done=True)}" if done.pending else "unchanged"
            message = "; ".join([what, *done.conflicts])
        # Unreachable where nothing was to change and no pool needs a key: said, but no failure.
        failed = bool(done.blocked) or (done.error is not None and planned.pending)
        return ConfigMapOutcome(name, done.path, failed, message), done.blocked

    def _cluster_retrying(self, cluster: str) -> Callable[[CloudError, float], None]:
        """Retries before any change starts (settling), told once per reason, not once per poll."""
        told: list[str] = []

        def report(error: CloudError, delay: float) -> None:
            if told != [type(error).__name__]:
                told[:] = [type(error).__name__]
                words = " ".join(str(error).split())[:160]
                self.reporter.cluster_waiting(cluster, f"retrying: {type(error).__name__}: {words}")

        return report

    def _settle(self, driver: Driver, cluster: ClusterRef, planned: ClusterPlan) -> None:
        """Wait for operations still running in the cluster, then refuse if it changed since the plan."""

        def settled() -> list[PoolState] | None:
            pools = driver.list_pools(cluster)
            return pools if all(p.status != "changing" for p in pools) else None

        pools = self.policy.call(settled)
        if pools is None:
            running = ", ".join(planned.in_progress) or "a pool"
            name = planned.target.name
            self.reporter.cluster_waiting(name, f"waiting for the operation on {running} to finish")
            pools = wait_until(settled, self.operation_timeout, f"the running operation in {name}")
        if fingerprint(pools) != planned.fingerprint:
            raise StalePlan(
                f"plan is stale: cluster {planned.target.name} changed since it was planned; run plan again"
            )

    def _carry_out(self, driver: Driver, cluster: ClusterRef, change: Change) -> Outcome:
        self.reporter.change_started(change)
        inside = Rollout(
            self.rollout,
            self.kube,
            self.compiled.get(change.cluster),
            lambda message: self.reporter.change_progress(change, message),
        )
        steps: dict[str, Callable[[], object]] = {
            "create": lambda: self._create(driver, cluster, change, inside.sized(driver, cluster, change)),
            "update": lambda: driver.update_pool(cluster, change.desired),  # type: ignore[arg-type]
            "delete": lambda: self._delete(driver, cluster, change.retires or (change.pool,)),
            "adopt": lambda: driver.adopt_pool(cluster, change.pool),
            "ready": lambda: inside.wait_ready(driver, cluster, change),
            "drain": lambda: inside.drain(driver, cluster, change),
            "retire": lambda: self._delete(driver, cluster, change.retires),
            "discard": lambda: self._delete(driver, cluster, change.discards),
            "reconfigure": lambda: inside.reconfigure(driver, cluster, change),
        }
        name = change.cluster
        try:
            with patient(Patience(self.outage_window, self._change_retrying(change))):
                for step in change.steps:
                    self.policy.call(steps[step], on_retry=self._change_retrying(change))
        except (CloudError, RolloutStopped) as error:
            outcome = Outcome(
                name,
                change.pool,
                change.action,
                False,
                str(error),
                unreachable=isinstance(error, Unreachable),
            )
        else:
            outcome = Outcome(name, change.pool, change.action, True, then=change.then)
        self.reporter.change_finished(outcome)
        return outcome

    def _change_retrying(self, change: Change) -> Callable[[CloudError, float], None]:
        return lambda error, delay: self.reporter.change_retrying(change, error, delay)

    def _create(self, driver: Driver, cluster: ClusterRef, change: Change, desired: PoolState) -> None:
        """Create, or, where an earlier attempt's request did reach the cloud, wait for that pool."""
        name = desired.name
        try:
            driver.create_pool(cluster, desired)
        except Unreachable:
            raise  # given up on already: looking for the pool would wait the outage out again
        except CloudError:
            existing = {p.name: p for p in driver.list_pools(cluster)}.get(name)
            # Ours, and this fleet pool's: a cut generation name could be another's.
            if existing is None or not existing.owned or existing.pool_name != change.pool:
                raise
            wait_until(
                lambda: True if self._ready(driver, cluster, name) else None,
                self.operation_timeout,
                f"creating {name}",
            )
            # The earlier attempt may have stopped after the pool was made, before what follows
            # in the same call (EKS: the autoscaler's tags): finish it in place.
            made = {p.name: p for p in driver.list_pools(cluster)}[name]
            if desired.differences(made):
                driver.update_pool(cluster, desired)

    @staticmethod
    def _delete(driver: Driver, cluster: ClusterRef, names: tuple[str, ...]) -> None:
        for name in names:
            with contextlib.suppress(
                NotFound
            ):  # gone already: a retry after the cloud took the first request
                driver.delete_pool(cluster, name)

    @staticmethod
    def _ready(driver: Driver, cluster: ClusterRef, name: str) -> bool:
        pool = {p.name: p for p in driver.list_pools(cluster)}.get(name)
        if pool is not None and pool.status == "failed":
            raise OperationFailed(f"pool {name} failed to create")
        return pool is not None and pool.status == "ready"
