"""The clouds' published API rate quotas, as data, and the limiters `sandbox serve --quotas` enforces
them with: a request is counted in the bucket of its scope (and class, and action where the cloud
counts per action), and past the limit answered with the cloud's own throttling error.

The numbers are the clouds' documentation's, each with its source below; none is taken from the
tool. Where a cloud publishes none (ACK's Container Service API) the figure is this sandbox's
choice, marked `chosen`. Each cloud's package supplies how its requests are read (`QuotaWire`:
the scope, the action, the error); what is counted and how is this table.

Two test knobs, applied to every limit alike: `scale` multiplies each limit's count and refill
rate; `speedup` multiplies each refill rate and divides each window's length.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from werkzeug.wrappers import Request, Response


QUOTAS_PATH = "/sandbox/quotas"  # every emulator answers GET here with its counts (`QuotaGate.report`)
Kind = Literal["token_bucket", "window"]


@dataclass(frozen=True)
class Limit:
    """A token bucket of `size` tokens refilled at `refill` per second, or a window that admits
    `size` requests per `window` seconds."""

    kind: Kind
    size: float
    refill: float = 0.0  # tokens per second (token_bucket)
    window: float = 0.0  # seconds (window)

    def scaled(self, scale: float, speedup: float) -> Limit:
        # At least one request, so a small scale never shuts a class out; whole requests only.
        size = max(1, math.floor(self.size * scale + 1e-9))
        return Limit(self.kind, size, self.refill * scale * speedup, self.window / speedup)

    def as_json(self) -> dict[str, Any]:
        if self.kind == "token_bucket":
            return {"kind": self.kind, "size": self.size, "refill_per_second": self.refill}
        return {"kind": self.kind, "size": self.size, "window_seconds": self.window}


@dataclass(frozen=True)
class CloudQuota:
    """One cloud's quota: what a scope is, its limits by the class of request they count, and which
    class a request is: by HTTP method, else by its API action's name prefix, else `default`."""

    scope: str  # in words, what one scope's requests share
    limits: Mapping[str, Limit]
    default: str
    source: str
    by_method: Mapping[str, str] = field(default_factory=dict)
    by_action_prefix: tuple[tuple[str, str], ...] = ()
    per_action: bool = False  # each API action has a bucket of its own, of its class's size
    chosen: bool = False  # the cloud publishes no figure: these are this sandbox's

    def classify(self, method: str, action: str) -> str:
        if method in self.by_method:
            return self.by_method[method]
        for prefix, name in self.by_action_prefix:
            if action.startswith(prefix):
                return name
        return self.default


QUOTAS: dict[str, CloudQuota] = {
    # learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling
    # ("Regional throttling and token bucket algorithm"): per subscription (and service principal,
    # and region: the sandbox is one ARM region and one principal), reads 250 refilled 25/s,
    # deletes 200 refilled 10/s, writes 200 refilled 10/s. Reads are GETs, writes the other methods
    # (x-ms-ratelimit-remaining-subscription-reads on GETs, -writes on non-GETs, same page).
    "aks": CloudQuota(
        scope="subscription",
        limits={
            "reads": Limit("token_bucket", 250, refill=25),
            "writes": Limit("token_bucket", 200, refill=10),
            "deletes": Limit("token_bucket", 200, refill=10),
        },
        by_method={"GET": "reads", "HEAD": "reads", "DELETE": "deletes"},
        default="writes",
        source="learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling",
    ),
    # cloud.google.com/kubernetes-engine/quotas ("Limit for API requests"): "The default rate limit
    # for the Kubernetes Engine API is 3000 requests per min, enforced at intervals of every 100
    # seconds": 5,000 requests per 100 s per project (quotas "generally apply at the Google Cloud
    # project level", same page). Where an interval starts is not said: here at a project's first
    # request after the last interval ended (chosen).
    "gke": CloudQuota(
        scope="project",
        limits={"requests": Limit("window", 5000, window=100)},
        default="requests",
        source="cloud.google.com/kubernetes-engine/quotas",
    ),
    # AWS publishes no rate for the EKS API. Modelled on EC2's, the one AWS API whose throttling is
    # published (docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html): token buckets per
    # account and Region, "each API is evaluated individually" (a bucket per action), non-mutating
    # actions (Describe*, List*, Search*, Get*) 100 refilled 20/s, mutating actions 50 refilled 5/s
    # ("Request token bucket sizes and refill rates"). The account is the SigV4 access key here.
    "eks": CloudQuota(
        scope="access key and region",
        limits={
            "non-mutating": Limit("token_bucket", 100, refill=20),
            "mutating": Limit("token_bucket", 50, refill=5),
        },
        by_action_prefix=(
            ("Describe", "non-mutating"),
            ("List", "non-mutating"),
            ("Search", "non-mutating"),
            ("Get", "non-mutating"),
        ),
        default="mutating",
        per_action=True,
        source="EC2's published throttling, as a model (AWS publishes none for EKS): "
        "docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html",
    ),
    # Alibaba Cloud publishes each API's rate in its Quota Center as N/T s, counted per region, API
    # and account ("API限速维度:regionId,API,ParentUid", e.g. help.aliyun.com/zh/pai/developer-
    # reference/api-eflo-controller-2022-12-15-quota; help.aliyun.com/en/openapi/throttling-and-
    # quota-management). No figure is published for the Container Service API (cs 2015-12-15):
    # 10 per 1 s per action is chosen, a tenth of the 100/1(s) other products list for their
    # describes. The account is the AccessKeyId here.
    "ack": CloudQuota(
        scope="AccessKeyId and region",
        limits={"requests": Limit("window", 10, window=1)},
        default="requests",
        per_action=True,
        chosen=True,
        source="chosen (no CS rate published); Alibaba's per-region, per-API, per-account counting: "
        "help.aliyun.com/en/openapi/throttling-and-quota-management",
    ),
}


@dataclass(frozen=True)
class QuotaSettings:
    scale: float = 1.0  # every limit's count and refill rate multiplied by it
    speedup: float = 1.0  # every refill rate multiplied, every window's length divided by it

    def __post_init__(self) -> None:
        if not (self.scale > 0 and self.speedup > 0):
            raise ValueError(f"quota scale and speedup must be above 0 (given {self.scale}, {self.speedup})")


@dataclass(frozen=True)
class Verdict:
    """A request's reckoning: admitted or not, `retry_after` seconds until it would be, and what is
    left in its bucket after it."""

    admitted: bool
    scope: str
    limit_class: str
    retry_after: float
    remaining: int


class _Bucket:
    """One token bucket, or one window, of one scope (and class and action)."""

    __slots__ = ("level", "since")

    def __init__(self, limit: Limit, now: float):
        self.level = float(limit.size) if limit.kind == "token_bucket" else 0.0  # tokens, or requests counted
        self.since = now  # the last refill, or the window's start

    def take(self, limit: Limit, now: float) -> tuple[bool, float, int]:
        if limit.kind == "token_bucket":
            self.level = min(limit.size, self.level + (now - self.since) * limit.refill)
            self.since = now
            if self.level >= 1:
                self.level -= 1
                return True, 0.0, math.floor(self.level)
            return False, (1 - self.level) / limit.refill, 0
        if now >= self.since + limit.window:
            self.since, self.level = now, 0.0
        if self.level < limit.size:
            self.level += 1
            return True, 0.0, int(limit.size - self.level)
        return False, self.since + limit.window - now, 0


class QuotaLimiter:
    """A cloud's buckets by scope, class and (where it counts per action) action, behind one lock;
    refused requests take no token, as ARM says of a request sent before its Retry-After."""

    def __init__(
        self, quota: CloudQuota, settings: QuotaSettings, clock: Callable[[], float] = time.monotonic
    ):
        self.quota = quota
        self.settings = settings
        self.limits = {
            name: limit.scaled(settings.scale, settings.speedup) for name, limit in quota.limits.items()
        }
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str, str], _Bucket] = {}
        self._counts: dict[tuple[str, str, str], list[int]] = {}  # bucket -> [requests, throttled]

    def take(self, scope: str, method: str, action: str) -> Verdict:
        limit_class = self.quota.classify(method, action)
        limit = self.limits[limit_class]
        key = (scope, limit_class, action if self.quota.per_action else "")
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(limit, now)
            admitted, wait, remaining = bucket.take(limit, now)
            counts = self._counts.setdefault(key, [0, 0])
            counts[0] += 1
            counts[1] += not admitted
        # Rounded up to the millisecond, so that waiting the answer's Retry-After is always enough.
        return Verdict(admitted, scope, limit_class, math.ceil(wait * 1000) / 1000, remaining)

    def report(self) -> dict[str, Any]:
        with self._lock:
            counted = sorted(self._counts.items())
        scopes: dict[str, dict[str, int]] = {}
        for (scope, _, _), (n, t) in counted:
            totals = scopes.setdefault(scope, {"requests": 0, "throttled": 0})
            totals["requests"] += n
            totals["throttled"] += t
        # Each bucket's own counts, so that a floor can be reckoned from them (bench `fleet`).
        buckets = [
            {"scope": scope, "class": limit_class, "action": action, "requests": n, "throttled": t}
            for (scope, limit_class, action), (n, t) in counted
        ]
        return {
            "enabled": True,
            "scale": self.settings.scale,
            "speedup": self.settings.speedup,
            "scope": self.quota.scope,
            "per_action": self.quota.per_action,
            "chosen": self.quota.chosen,
            "source": self.quota.source,
            "limits": {name: limit.as_json() for name, limit in self.limits.items()},
            "scopes": scopes,
            "buckets": buckets,
            "requests": sum(s["requests"] for s in scopes.values()),
            "throttled": sum(s["throttled"] for s in scopes.values()),
        }


@dataclass(frozen=True)
class QuotaWire:
    """How one cloud's requests meet its quota, supplied by the cloud's package: the scope a request
    is counted in (None: none, it is not counted), its API action's name, the cloud's throttling
    answer, and the header (if any) that tells a client what is left in the bucket."""

    scope: Callable[[Request], str | None]
    throttled: Callable[[Verdict], Exception]  # the cloud's ApiError (sandbox.wire, which imports this)
    action: Callable[[Request], str] = lambda request: ""
    remaining_header: Callable[[str], str | None] = lambda limit_class: None


class QuotaGate:
    """The check `EmulatorApp.respond` makes of each request while quotas are enforced."""

    def __init__(
        self,
        cloud: str,
        wire: QuotaWire,
        settings: QuotaSettings,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.cloud = cloud
        self.wire = wire
        self.limiter = QuotaLimiter(QUOTAS[cloud], settings, clock)

    def admit(self, request: Request) -> Verdict | None:
        scope = self.wire.scope(request)
        if scope is None:
            return None
        return self.limiter.take(scope, request.method, self.wire.action(request))

    def annotate(self, response: Response, verdict: Verdict) -> None:
        header = self.wire.remaining_header(verdict.limit_class)
        if header is not None:
            response.headers[header] = str(verdict.remaining)

    def report(self) -> dict[str, Any]:
        return {"cloud": self.cloud, **self.limiter.report()}
