"""How EKS requests meet the per-action token buckets modelled on EC2's (sandbox/quotas.py, "eks"):
counted per access key and region, both read from the SigV4 Authorization header's credential
(Credential=AKID/date/REGION/service/aws4_request), in the bucket of the request's EKS action,
named by botocore's EKS model (each operation's http method and requestUri); answered past it with
EKS's ThrottlingException (429; botocore data/eks/2017-11-01/service-2.json), which botocore's
retry handlers and the SDK's ClientError name a throttle."""

from __future__ import annotations

import functools
import re

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request

from provisioner.sandbox.eks.exceptions import ThrottlingException
from provisioner.sandbox.quotas import QuotaWire, Verdict

_CREDENTIAL = re.compile(r"Credential=(?P<key>[^/,\s]+)/\d{8}/(?P<region>[^/,]+)/")
_LABEL = re.compile(r"\{(\w+)(\+?)\}")


def access_key_and_region(request: Request) -> str | None:
    """`AKID/region`; None for an unsigned request (boto3 signs every one)."""
    found = _CREDENTIAL.search(request.headers.get("Authorization", ""))
    return f"{found['key']}/{found['region']}" if found else None


@functools.cache
def operations() -> Map:
    """EKS's operations as routes, from botocore's model (moto, which serves EKS here, brings it)."""
    from botocore.loaders import create_loader

    model = create_loader().load_service_model("eks", "service-2")

    def converter(label: re.Match[str]) -> str:
        # An ARN holds slashes (the client encodes them, the server decodes the path): it spans segments.
        greedy = label[2] == "+" or label[1].endswith("Arn")
        return f"<path:{label[1]}>" if greedy else f"<{label[1]}>"

    rules = [
        Rule(
            _LABEL.sub(converter, op["http"]["requestUri"].split("?")[0]),
            methods=[op["http"]["method"]],
            endpoint=name,
        )
        for name, op in model["operations"].items()
    ]
    return Map(rules, strict_slashes=False)


def action(request: Request) -> str:
    """The EKS operation a request is (ListNodegroups, DescribeNodegroup, ...); "" if none."""
    try:
        name, _ = operations().bind("eks").match(request.path, method=request.method)
    except HTTPException:
        return ""
    return str(name)


def throttled(verdict: Verdict) -> ThrottlingException:
    return ThrottlingException("Rate exceeded", retry_after=verdict.retry_after)


WIRE = QuotaWire(scope=access_key_and_region, throttled=throttled, action=action)
