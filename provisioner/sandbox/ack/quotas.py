"""How CS API requests meet the per-action windows chosen for ACK (sandbox/quotas.py, "ack"):
counted per AccessKeyId (from the ACS3 Authorization header, Credential=AKID,...) and region, in
the window of the request's action (the x-acs-action the SDK sends); answered past it with
Throttling.User (HTTP 400) and x-acs-retry-after in milliseconds, which the SDK reads into its
ThrottlingException's retry_after (alibabacloud_tea_openapi Utils.get_throttling_time_left).

ACK's endpoint is regional (cs.{region}.aliyuncs.com); the sandbox serves every region at one
address, so the region is the one of the cluster a path names, or DescribeClustersV1's region_id."""

from __future__ import annotations

import re

from werkzeug.wrappers import Request

from provisioner.sandbox.ack.exceptions import AckError, UserFlowControl
from provisioner.sandbox.ack.models import AckBackends
from provisioner.sandbox.quotas import QuotaWire, Verdict

_CREDENTIAL = re.compile(r"Credential=([^,\s]+)")
_CLUSTER = re.compile(r"/clusters/([^/]+)")
_TASK = re.compile(r"/tasks/([^/]+)")


def wire(backends: AckBackends) -> QuotaWire:
    def region(request: Request) -> str:
        """The region a request is for; "" where it names none (every region's clusters)."""
        try:
            if found := _CLUSTER.match(request.path):
                return backends.of_cluster(found[1]).region
            if found := _TASK.match(request.path):
                return backends.of_cluster(backends.of_task(found[1]).cluster_id).region
        except AckError:  # an unknown cluster or task: the API answers it, counted as regionless
            return ""
        return request.args.get("region_id", "")

    def scope(request: Request) -> str | None:
        found = _CREDENTIAL.search(request.headers.get("Authorization", ""))
        return f"{found[1]}/{region(request)}" if found else None  # unsigned: refused, uncounted

    return QuotaWire(
        scope=scope, throttled=throttled, action=lambda request: request.headers.get("x-acs-action", "")
    )


def throttled(verdict: Verdict) -> UserFlowControl:
    return UserFlowControl("Request was denied due to user flow control.", retry_after=verdict.retry_after)
