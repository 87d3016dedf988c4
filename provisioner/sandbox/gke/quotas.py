"""How Kubernetes Engine API requests meet the project quota (sandbox/quotas.py, "gke"): counted
per project, the one in the path (/v1/projects/{p}/...), and answered past it with
RESOURCE_EXHAUSTED (429) in Google's wire format, its message as Google's quota errors word it
("Quota exceeded for quota metric '...' and limit '...' of service '...' for consumer '...'"), and a
Retry-After until the interval ends."""

from __future__ import annotations

import re

from werkzeug.wrappers import Request

from provisioner.sandbox.gke.exceptions import ResourceExhausted
from provisioner.sandbox.quotas import QuotaWire, Verdict

_PROJECT = re.compile(r"/v1/projects/([^/]+)/")


def project(request: Request) -> str | None:
    found = _PROJECT.match(request.path)
    return found[1] if found else None


def throttled(verdict: Verdict) -> ResourceExhausted:
    return ResourceExhausted(
        "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of service "
        f"'container.googleapis.com' for consumer 'project:{verdict.scope}'.",
        retry_after=verdict.retry_after,
    )


WIRE = QuotaWire(scope=project, throttled=throttled)
