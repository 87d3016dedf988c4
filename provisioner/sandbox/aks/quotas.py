"""How ARM requests meet the subscription quota (sandbox/quotas.py, "aks"): counted per
subscription, the one in the path (/subscriptions/{id}/...), and answered past it with
SubscriptionRequestsThrottled and the bucket's tokens left in x-ms-ratelimit-remaining-subscription-*
(learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling,
"Remaining requests")."""

from __future__ import annotations

import math
import re

from werkzeug.wrappers import Request

from provisioner.sandbox.aks.exceptions import SubscriptionRequestsThrottled
from provisioner.sandbox.quotas import QuotaWire, Verdict

_SUBSCRIPTION = re.compile(r"/subscriptions/([^/]+)", re.IGNORECASE)
_OPERATION = {"reads": "read", "writes": "write", "deletes": "delete"}  # as ARM's message names them


def subscription(request: Request) -> str | None:
    """The subscription a request is counted in; None for a tenant-level path (none is served)."""
    found = _SUBSCRIPTION.match(request.path)
    return found[1].lower() if found else None  # a subscription ID is a GUID, in any case


def throttled(verdict: Verdict) -> SubscriptionRequestsThrottled:
    # The message as ARM words it (the article's example; ARM gives whole seconds).
    return SubscriptionRequestsThrottled(
        f"Number of '{_OPERATION[verdict.limit_class]}' requests for subscription '{verdict.scope}' "
        f"exceeded. Please try again after '{math.ceil(verdict.retry_after)}' seconds.",
        retry_after=verdict.retry_after,
    )


WIRE = QuotaWire(
    scope=subscription,
    throttled=throttled,
    remaining_header=lambda limit_class: f"x-ms-ratelimit-remaining-subscription-{limit_class}",
)
