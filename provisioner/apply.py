"""Run a Plan: clusters in parallel, one operation at a time in each, behind a per-cluster lock.

Before acting on a cluster, apply waits for any operation still running there (one a killed run
left behind is waited for, never repeated), then observes again: a cluster that changed since
the plan is refused as stale, never acted on from an outdated picture.

Apply is the one layer that retries an operation: each step of an action (a replace is a delete,
then a create) is retried on its own, and drivers never retry inside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from provisioner.actions import Action
from provisioner.drivers import OPERATION_TIMEOUT, ClusterRef, Driver, wait_until
from provisioner.errors import CloudError, NotFound, OperationFailed, ProvisionerError, StalePlan, Unreachable
from provisioner.locks import Locks
from provisioner.observe import Drivers
from provisioner.plan import Change, ClusterPlan, Plan, fingerprint
from provisioner.pools import PoolState
from provisioner.retry import OUTAGE_WINDOW, Patience, RetryPolicy, patient

MAX_PARALLEL_CLUSTERS = 32


@dataclass(frozen=True)
class Outcome:
    cluster: str
    pool: str
    action: Action
    done: bool
    message: str = ""
    unreachable: bool = False  # the cloud stayed unreachable past the outage window


@dataclass
class ApplyResult:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.done for o in self.outcomes)

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
    def change_finished(self, outcome: Outcome) -> None: ...


class SilentReporter:
    def cluster_waiting(self, cluster: str, why: str) -> None:
        pass

    def change_started(self, change: Change) -> None:
        pass

    def change_retrying(self, change: Change, error: CloudError, delay: float) -> None:
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

    def run(self, plan: Plan) -> ApplyResult:
        work = [c for c in plan.clusters if c.changes]
        result = ApplyResult()
        if not work:
            return result
        self.drivers.prepare([c.target for c in work])
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_CLUSTERS, len(work))) as pool:
            for outcomes in pool.map(self._run_cluster, work):
                result.outcomes.extend(outcomes)
        return result

    def _run_cluster(self, planned: ClusterPlan) -> list[Outcome]:
        target = planned.target
        driver = self.drivers(target.cloud)
        try:
            with (
                self.locks.hold(target.ref.key, self.lock_timeout, f"cluster {target.name}"),
                patient(Patience(self.outage_window, self._cluster_retrying(target.name))),
            ):
                self._settle(driver, target.ref, planned)
                outcomes: list[Outcome] = []
                for change in planned.changes:
                    gone = next((o for o in outcomes if o.unreachable), None)
                    if gone is not None:  # a cloud given up on is not waited out again per change
                        message = f"not attempted: {target.name} is unreachable"
                        outcomes.append(Outcome(target.name, change.pool, change.action, False, message))
                    else:
                        outcomes.append(self._carry_out(driver, target.ref, change))
                return outcomes
        except ProvisionerError as error:  # the lock, the settling or the staleness check
            return [Outcome(target.name, c.pool, c.action, False, str(error)) for c in planned.changes]

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
        steps: dict[str, Callable[[], object]] = {
            "create": lambda: self._create(driver, cluster, change),
            "update": lambda: driver.update_pool(cluster, change.desired),  # type: ignore[arg-type]
            "delete": lambda: self._delete(driver, cluster, change.pool),
            "adopt": lambda: driver.adopt_pool(cluster, change.pool),
        }
        name = change.cluster
        try:
            with patient(Patience(self.outage_window, self._change_retrying(change))):
                for step in change.steps:
                    self.policy.call(steps[step], on_retry=self._change_retrying(change))
        except CloudError as error:
            outcome = Outcome(
                name,
                change.pool,
                change.action,
                False,
                str(error),
                unreachable=isinstance(error, Unreachable),
            )
        else:
            outcome = Outcome(name, change.pool, change.action, True)
        self.reporter.change_finished(outcome)
        return outcome

    def _change_retrying(self, change: Change) -> Callable[[CloudError, float], None]:
        return lambda error, delay: self.reporter.change_retrying(change, error, delay)

    def _create(self, driver: Driver, cluster: ClusterRef, change: Change) -> None:
        """Create, or, where an earlier attempt's request did reach the cloud, wait for that pool."""
        assert change.desired is not None
        try:
            driver.create_pool(cluster, change.desired)
        except Unreachable:
            raise  # given up on already: looking for the pool would wait the outage out again
        except CloudError:
            existing = {p.name: p for p in driver.list_pools(cluster)}.get(change.pool)
            if existing is None or not existing.owned:
                raise
            wait_until(
                lambda: True if self._ready(driver, cluster, change.pool) else None,
                self.operation_timeout,
                f"creating {change.pool}",
            )

    @staticmethod
    def _delete(driver: Driver, cluster: ClusterRef, name: str) -> None:
        with contextlib.suppress(NotFound):  # gone already: a retry after the cloud took the first request
            driver.delete_pool(cluster, name)

    @staticmethod
    def _ready(driver: Driver, cluster: ClusterRef, name: str) -> bool:
        pool = {p.name: p for p in driver.list_pools(cluster)}.get(name)
        if pool is not None and pool.status == "failed":
            raise OperationFailed(f"pool {name} failed to create")
        return pool is not None and pool.status == "ready"
