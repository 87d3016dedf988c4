"""Observe clusters: every cluster's pools, all clusters at once, one listing each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from provisioner.drivers import (
    MAX_CONCURRENT_REQUESTS,
    OPERATION_TIMEOUT,
    Driver,
    Target,
    raise_open_file_limit,
    wait_until,
)
from provisioner.drivers.registry import connect
from provisioner.errors import CloudError, OperationTimeout
from provisioner.heap import heap_frozen
from provisioner.pools import PoolState
from provisioner.retry import RetryPolicy

# The process's listing threads, one per cluster listed at once, started as listings need them
# and kept between observations (a wait for running operations observes again and again):
# starting 250 threads costs about a quarter of a round trip of CPU each time.
LISTING_THREADS = ThreadPoolExecutor(max_workers=MAX_CONCURRENT_REQUESTS, thread_name_prefix="observe")


@dataclass(frozen=True)
class Observation:
    target: Target
    pools: tuple[PoolState, ...] = ()
    error: CloudError | None = None  # the listing failed; `pools` is then empty, not "no pools"


class Drivers:
    """One driver per cloud, made on first use, shared by the threads that observe and apply."""

    def __init__(self, sandbox: str | Path | None = None):
        self.sandbox = sandbox
        self._drivers: dict[str, Driver] = {}
        raise_open_file_limit()  # each driver may keep a connection per request in flight

    def __call__(self, cloud: str) -> Driver:
        if cloud not in self._drivers:
            self._drivers[cloud] = connect(cloud, self.sandbox)
        return self._drivers[cloud]

    def prepare(self, clusters: Sequence[Target]) -> None:
        """Make the drivers these clusters need now, before worker threads share them, so no two
        threads make one (nor import an SDK at once)."""
        for cloud in dict.fromkeys(c.cloud for c in clusters):  # in order, so errors are repeatable
            self(cloud)


def observe(
    clusters: Sequence[Target],
    drivers: Drivers,
    policy: RetryPolicy | None = None,
    then: Callable[[Observation], None] | None = None,
) -> list[Observation]:
    """Each cluster's pools, in the order given; a cluster whose listing failed carries its error.
    A failed listing is retried whole here, the one layer that retries it.

    `then` runs on each observation in its worker as soon as it is made (sync writes it there),
    so slow work on one cluster overlaps the listing of the others.
    """
    policy = policy or RetryPolicy()
    drivers.prepare(clusters)

    def one(cluster: Target) -> Observation:
        try:
            pools = policy.call(lambda: drivers(cluster.cloud).list_pools(cluster.ref))
            observation = Observation(cluster, tuple(sorted(pools, key=lambda p: p.name)))
        except CloudError as error:
            observation = Observation(cluster, error=error)
        if then is not None:
            then(observation)
        return observation

    with heap_frozen():
        listings = [LISTING_THREADS.submit(one, cluster) for cluster in clusters]
        try:
            wait(listings)
        except BaseException:  # Ctrl-C: listings not begun never begin; those running end first
            for listing in listings:
                listing.cancel()
            wait(listings)
            raise
    # Every listing has ended (and been written, by `then`) before any error is raised.
    return [listing.result() for listing in listings]


def observe_settled(
    clusters: Sequence[Target],
    drivers: Drivers,
    policy: RetryPolicy | None = None,
    timeout: float = OPERATION_TIMEOUT,
    on_wait: Callable[[list[str]], None] | None = None,
) -> list[Observation]:
    """Observe, waiting first for operations still running in the clusters (a killed run's, say),
    so what is planned starts from where those operations end. Past `timeout`, the last
    observation is returned as it is: apply then waits again, per cluster, under its lock."""
    last: list[Observation] = []

    def settled() -> list[Observation] | None:
        last[:] = observe(clusters, drivers, policy)
        running = [f"{o.target.name}/{p.name}" for o in last for p in o.pools if p.status == "changing"]
        if running and on_wait is not None:
            on_wait(running)
        return None if running else list(last)

    try:
        return wait_until(settled, timeout, "the running operations")
    except OperationTimeout:
        return list(last)
