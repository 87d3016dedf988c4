"""Observe clusters: every cluster's pools, all clusters at once, one listing each."""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.clusters import KubernetesVersion, Target
from provisioner.drivers import OPERATION_TIMEOUT, Driver, raise_open_file_limit, requests_at_once, wait_until
from provisioner.drivers.registry import connect, pacing_for
from provisioner.errors import CloudError, OperationTimeout
from provisioner.heap import heap_frozen
from provisioner.pools import PoolState
from provisioner.quotas import quota_scope, set_pacing
from provisioner.retry import RetryPolicy
from provisioner.spread import spread

# This process's share of the listings beside a helper's, where it also handles every result
# (sync writes each to the catalog, which only this process holds): a write costs about half a
# listing's CPU, so with even shares this process would end last (bench `sync`).
SHARE_WHEN_HANDLING_EACH = 0.5


@dataclass(frozen=True)
class Observation:
    target: Target
    pools: tuple[PoolState, ...] = ()
    error: CloudError | None = None  # the listing failed; `pools` is then empty, not "no pools"


class Drivers:
    """One driver per cloud, made on first use, shared by the threads that observe and apply.

    Sent to a helper process (provisioner.spread), Drivers arrive as that process's own for the
    same sandbox: SDK clients, credentials and connections never cross processes."""

    def __init__(self, sandbox: str | Path | None = None):
        self.sandbox = sandbox
        self._drivers: dict[str, Driver] = {}
        raise_open_file_limit()  # each driver may keep a connection per request in flight
        set_pacing(pacing_for(sandbox))  # known before any batch would fork helpers (spread)

    def __call__(self, cloud: str) -> Driver:
        if cloud not in self._drivers:
            self._drivers[cloud] = connect(cloud, self.sandbox)
        return self._drivers[cloud]

    def prepare(self, clusters: Sequence[Target]) -> None:
        """Make the drivers these clusters need now, before worker threads share them, so no two
        threads make one (nor import an SDK at once), with the SDK clients they need."""
        for cloud in dict.fromkeys(c.cloud for c in clusters):  # in order, so errors are repeatable
            self(cloud).prepare([c.ref for c in clusters if c.cloud == cloud])

    def __reduce__(self) -> tuple[Any, ...]:
        if type(self) is not Drivers:  # a kind of its own would arrive as plain drivers: not sent
            raise TypeError(f"{type(self).__name__} stays in the process that made it")
        return (_drivers_here, (self.sandbox,))


@functools.cache
def _drivers_here(sandbox: str | Path | None) -> Drivers:
    """A helper process's drivers for `sandbox`, made once and kept between batches."""
    return Drivers(sandbox)


def observe(
    clusters: Sequence[Target],
    drivers: Drivers,
    policy: RetryPolicy | None = None,
    then: Callable[[Observation], None] | None = None,
) -> list[Observation]:
    """Each cluster's pools, in the order given; a cluster whose listing failed carries its error.
    A failed listing is retried whole, where it runs: the one layer that retries it.

    `then` runs on each observation in this process as soon as it is made (sync writes it there),
    so slow work on one cluster overlaps the listing of the others. A fleet of many clusters is
    listed from helper processes too (provisioner.spread): a listing's CPU, not the network, would
    otherwise set the wall time.
    """
    observations: list[Observation | None] = [None] * len(clusters)

    def made(index: int, observation: Observation) -> None:
        observations[index] = observation
        if then is not None:
            then(observation)

    batch = functools.partial(_list_each, drivers, policy or RetryPolicy())
    here = 1.0 if then is None else SHARE_WHEN_HANDLING_EACH
    spread(batch, clusters, made, here, scope=lambda cluster: quota_scope(cluster.ref))
    # Every listing has ended (and been written, by `then`) before any error is raised.
    return observations  # type: ignore[return-value]  # every index was made


def _list_each(
    drivers: Drivers,
    policy: RetryPolicy,
    clusters: Sequence[Target],
    emit: Callable[[int, Observation], None],
    part: float,
) -> None:
    """List `clusters` at once, up to `part` of each cloud's requests at once (this process's
    part of them), emitting each observation as it is made."""
    drivers.prepare(clusters)

    def one(index: int, cluster: Target) -> None:
        try:
            pools = policy.call(lambda: drivers(cluster.cloud).list_pools(cluster.ref))
            observation = Observation(cluster, tuple(sorted(pools, key=lambda p: p.name)))
        except CloudError as error:
            observation = Observation(cluster, error=error)
        emit(index, observation)

    with heap_frozen():
        listings = [
            _listing_threads(cluster.cloud, part).submit(one, index, cluster)
            for index, cluster in enumerate(clusters)
        ]
        try:
            wait(listings)
        except BaseException:  # Ctrl-C: listings not begun never begin; those running end first
            for listing in listings:
                listing.cancel()
            wait(listings)
            raise
    for listing in listings:
        listing.result()  # an error no listing should raise (a bug) is raised here


_executors: dict[tuple[str, int], ThreadPoolExecutor] = {}
_executors_lock = threading.Lock()


def _listing_threads(cloud: str, part: float) -> ThreadPoolExecutor:
    """Threads listing `cloud`'s clusters, one per listing in flight: this process's part of the
    cloud's requests at once. They are kept between observations (a wait for running operations
    observes again and again): starting hundreds of threads costs about a quarter of a round
    trip of CPU each time."""
    threads = max(1, math.floor(requests_at_once(cloud) * part))  # the parts add up to at most all
    with _executors_lock:
        key = (cloud, threads)
        if key not in _executors:
            _executors[key] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"observe-{cloud}")
        return _executors[key]


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


def kubernetes_versions(
    clusters: Sequence[Target], drivers: Drivers, policy: RetryPolicy | None = None
) -> dict[str, KubernetesVersion | CloudError]:
    """Each cluster's Kubernetes version from its cloud (one request each, all at once, retried as
    a listing is), by the cluster's name; the CloudError where it could not be read."""
    if not clusters:
        return {}
    policy = policy or RetryPolicy()
    drivers.prepare(clusters)

    def one(cluster: Target) -> KubernetesVersion | CloudError:
        try:
            return policy.call(lambda: drivers(cluster.cloud).kubernetes_version(cluster.ref))
        except CloudError as error:
            return error

    with ThreadPoolExecutor(max_workers=min(len(clusters), 64), thread_name_prefix="versions") as pool:
        return dict(zip([c.name for c in clusters], pool.map(one, clusters), strict=True))
