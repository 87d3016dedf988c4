"""The clouds' API quotas, as the drivers pace themselves by them (clouds.yaml `quota`).

Each request counts in one quota scope: the cloud, then the ClusterRef fields its quota counts
by (ARM's subscription, GKE's project, EKS's and ACK's account and region). Pacing and sharding
(`sync --shard`) both go by this one scope, so that no two shards share a bucket.

Every request a driver sends first takes a token from its bucket here (`pace`): a burst within
the bucket goes at once, more waits for the refill, so a healthy fleet's plan or sync is never
throttled. A 429 the cloud sends all the same (another client sharing the quota) still backs off
in the one retry layer (provisioner.retry), and here slows that bucket down for a while.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from provisioner import hardware
from provisioner.clusters import ClusterRef
from provisioner.hardware import Bucket

# The share of each published rate, and of each burst, the tool takes: requests sent in order may
# reach the cloud bunched (a thread sends late, the next on time), and its clock is not ours.
HEADROOM, BURST_HEADROOM = 0.95, 0.9
# After a 429, the bucket refills at this share of its rate for SLOWED_SECONDS.
SLOWED_SHARE, SLOWED_SECONDS = 0.5, 60.0
# What a request's API action says of its kind, by the action's first word (ListNodegroups,
# describe_cluster_node_pools, DeleteNodegroup ...): reads and deletes, the rest writes.
_READ = re.compile(r"^(describe|list|get|head)", re.IGNORECASE)
_DELETE = re.compile(r"^(delete|remove)", re.IGNORECASE)
_METHOD_KINDS = {"GET": "read", "HEAD": "read", "DELETE": "delete"}


def quota_scope(ref: ClusterRef) -> tuple[str, ...]:
    """The quota scope requests for `ref`'s cluster count in: its cloud, then the fields of its
    quota's `scope` (a cluster's own location for EKS and ACK, its subscription for AKS)."""
    return scope_of(ref.cloud, account=ref.account, location=ref.location)


def scope_of(cloud: str, **fields: str) -> tuple[str, ...]:
    """The quota scope of a request to `cloud` that names these ClusterRef fields (a hook that sees
    only the request: a subscription, a project). A field the cloud's quota counts by and the
    request does not name is a KeyError: the hook cannot tell that request's scope."""
    return (cloud, *(fields[name] for name in hardware.load().clouds[cloud].quota.scope))


def action_kind(action: str) -> str:
    """read, write or delete: what an API action named `action` does."""
    return "read" if _READ.match(action) else "delete" if _DELETE.match(action) else "write"


def method_kind(method: str) -> str:
    """read, write or delete: what a REST request with HTTP `method` does."""
    return _METHOD_KINDS.get(method.upper(), "write")


@dataclass(frozen=True)
class Pacing:
    """How the quotas apply: to a real cloud as published (1, 1); to a sandbox enforcing them
    scaled as it says in its endpoints.json, `scale` on every size and rate, `speedup` on rates."""

    scale: float = 1.0
    speedup: float = 1.0


# Each bucket's key, and when it is empty again and slowed until, on the monotonic clock.
Schedule = dict[tuple[str, ...], tuple[float, float]]
# Each bucket's key, how many seconds on a process moved its empty time, and slowed until when.
Drawn = dict[tuple[str, ...], tuple[float, float]]


class _Slot:
    """One bucket's schedule as GCRA keeps it: the time the bucket is empty again at its rate
    (`empty_at`); a request may go once that is no more than the burst ahead of now."""

    __slots__ = ("empty_at", "slowed_until")

    def __init__(self, now: float):
        self.empty_at = now
        self.slowed_until = 0.0


class Pacer:
    """Token buckets by (scope, bucket), shared by every thread of the process. Each request
    reserves its slot under the lock and sleeps, if it must, outside it."""

    def __init__(
        self,
        pacing: Pacing | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.pacing = pacing  # None: no quotas to keep (a sandbox that enforces none)
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, ...], _Slot] = {}
        self._drained: dict[Hashable, float] = {}  # scope -> when another process may have emptied it

    def delay(self, scope: tuple[str, ...], kind: str, action: str = "") -> float:
        """Reserve a token for one request; the seconds to wait before sending it."""
        if self.pacing is None:
            return 0.0
        key, bucket = self._bucket(scope, kind, action)
        size, rate = self._scaled(bucket)
        with self._lock:
            now = self._clock()
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(now)
            interval = 1 / (rate * (SLOWED_SHARE if now < slot.slowed_until else 1.0))
            burst = (size - 1) * interval  # how far ahead of now the bucket may be emptied
            empty_at = max(slot.empty_at, now)
            if scope in self._drained:  # empty then, its first token an interval on
                empty_at = max(empty_at, self._drained[scope] + burst + interval)
            wait = max(0.0, empty_at - burst - now)
            slot.empty_at = empty_at + interval
        return wait

    def pace(self, scope: tuple[str, ...], kind: str, action: str = "") -> None:
        """Wait until a request counted in this scope's bucket may go."""
        wait = self.delay(scope, kind, action)
        if wait > 0:
            self._sleep(wait)

    def throttled(
        self, scope: tuple[str, ...], kind: str, action: str = "", retry_after: float | None = None
    ) -> None:
        """The cloud answered 429 in this bucket: nothing more before its Retry-After, and the
        bucket refills slower for a while."""
        if self.pacing is None:
            return
        key, bucket = self._bucket(scope, kind, action)
        size, rate = self._scaled(bucket)
        with self._lock:
            now = self._clock()
            slot = self._slots.setdefault(key, _Slot(now))
            interval = 1 / (rate * SLOWED_SHARE)
            # Empty now, and refilled only from the Retry-After on.
            slot.empty_at = max(slot.empty_at, now + (retry_after or 0.0) + (size - 1) * interval)
            slot.slowed_until = now + SLOWED_SECONDS

    def _bucket(self, scope: tuple[str, ...], kind: str, action: str) -> tuple[tuple[str, ...], Bucket]:
        quota = hardware.load().clouds[scope[0]].quota
        if quota.counted_by == "all":
            return (*scope, "all"), quota.buckets["all"]
        name = action if quota.counted_by == "action" else kind
        return (*scope, kind, name), quota.buckets[kind]

    def _scaled(self, bucket: Bucket) -> tuple[float, float]:
        assert self.pacing is not None
        scale = self.pacing.scale
        return max(
            1.0, bucket.size * scale * BURST_HEADROOM
        ), bucket.per_second * scale * HEADROOM * self.pacing.speedup

    def state(self) -> Schedule:
        """Every bucket's schedule, to hand to another process that paces the same scopes for a
        while (provisioner.spread): on Linux, time.monotonic is the machine's clock, not the process's."""
        with self._lock:
            return {key: (slot.empty_at, slot.slowed_until) for key, slot in self._slots.items()}

    def merge(self, state: Schedule) -> None:
        """Pace on from another process's schedule: each bucket as empty, and as slowed, as the
        later of the two says."""
        with self._lock:
            now = self._clock()
            for key, (empty_at, slowed_until) in state.items():
                slot = self._slots.setdefault(key, _Slot(now))
                slot.empty_at = max(slot.empty_at, empty_at)
                slot.slowed_until = max(slot.slowed_until, slowed_until)

    def drawn_since(self, state: Schedule, since: float) -> Drawn:
        """What this process drew in each bucket since it took `state` at `since`: how far on it
        moved the time the bucket is empty (and until when it is slowed)."""
        with self._lock:
            drawn: Drawn = {}
            for key, slot in self._slots.items():
                advance = slot.empty_at - max(state.get(key, (since, 0.0))[0], since)
                if advance > 0 or slot.slowed_until > since:
                    drawn[key] = (max(0.0, advance), slot.slowed_until)
            return drawn

    def add_drawn(self, drawn: Drawn, state: Schedule, since: float) -> None:
        """Count in what another process drew (its `drawn_since` the `state` this one gave it at
        `since`) on top of what this one drew meanwhile: two processes drawing on one bucket at
        once (a helper's listings, this process's version reads) add up, neither erasing the other."""
        with self._lock:
            for key, (advance, slowed_until) in drawn.items():
                base = max(state.get(key, (since, 0.0))[0], since)
                slot = self._slots.setdefault(key, _Slot(base))
                slot.empty_at = base + max(0.0, slot.empty_at - base) + advance
                slot.slowed_until = max(slot.slowed_until, slowed_until)

    def drained(self, scopes: Iterable[Hashable]) -> None:
        """Another process sent requests in these scopes and cannot say how many (a helper that
        died mid-share): every bucket of theirs, here or not yet, is taken as emptied now."""
        with self._lock:
            now = self._clock()
            for scope in scopes:
                self._drained[scope] = now

    def configure(self, pacing: Pacing | None) -> None:
        """Pace by `pacing` from now on (None: not at all), with the buckets afresh if it changed."""
        with self._lock:
            if pacing != self.pacing:
                self.pacing, self._slots, self._drained = pacing, {}, {}


# One for the process: quotas count every request the process sends, whichever thread sends it.
PACER = Pacer(Pacing())


def set_pacing(pacing: Pacing | None) -> None:
    """Pace every request by `pacing` from now on; set where the drivers are made
    (provisioner.drivers.registry), from what the cloud or the sandbox enforces."""
    PACER.configure(pacing)
