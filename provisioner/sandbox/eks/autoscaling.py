"""The Auto Scaling API's wire format, for the groups behind node groups (groups.py): the query
protocol of botocore's data/autoscaling/2011-01-01 (a form-encoded POST naming its Action, lists
as `Name.member.N`, XML answers in the 2011-01-01 namespace, errors as an XML ErrorResponse).

Served on the EKS emulator's address, as moto's server serves every service on one: a POST whose
form names an Action is Auto Scaling's, everything else EKS's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any
from xml.sax.saxutils import escape

from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from provisioner.sandbox.eks.exceptions import (
    AutoScalingThrottling,
    AutoScalingUnavailable,
    AutoScalingValidationError,
    InvalidAction,
)
from provisioner.sandbox.eks.groups import RESOURCE_TYPE, AutoScalingGroup
from provisioner.sandbox.engine import Engine
from provisioner.sandbox.wire import ApiError, EmulatorApp, WireErrors

NAMESPACE = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
FORM = "application/x-www-form-urlencoded"


def is_auto_scaling(request: Request) -> bool:
    return request.method == "POST" and request.mimetype == FORM and "Action" in request.form


def members(form: Any, name: str) -> Iterator[str]:
    """`name.member.1`, `name.member.2`, ... as the query protocol flattens a list."""
    index = 1
    while any(key == f"{name}.member.{index}" or key.startswith(f"{name}.member.{index}.") for key in form):
        yield f"{name}.member.{index}"
        index += 1


class AutoScalingHandlers:
    """One handler per Action; `groups(request)` is the account and region's groups by name and
    `sizes(group)` its node group's (min, max, desired)."""

    def __init__(
        self,
        groups: Callable[[Request], dict[str, AutoScalingGroup]],
        sizes: Callable[[Request, AutoScalingGroup], tuple[int, int, int]],
    ):
        self._groups = groups
        self._sizes = sizes
        self.actions: dict[str, Callable[[Request], str]] = {
            "CreateOrUpdateTags": self.create_or_update_tags,
            "DeleteTags": self.delete_tags,
            "DescribeAutoScalingGroups": self.describe_auto_scaling_groups,
            "DescribeTags": self.describe_tags,
        }

    def action(self, request: Request) -> Response:
        action = request.form["Action"]
        handler = self.actions.get(action)
        if handler is None:
            raise InvalidAction(f"The action {action} is not valid for this web service.")
        return _answer(action, handler(request))

    def _group(self, request: Request, name: str) -> AutoScalingGroup:
        found = self._groups(request).get(name)
        if found is None:
            raise AutoScalingValidationError(f"AutoScalingGroup name not found - {name}")
        return found

    def _tags(self, request: Request) -> Iterator[tuple[AutoScalingGroup, str, str]]:
        for member in members(request.form, "Tags"):
            kind = request.form.get(f"{member}.ResourceType", RESOURCE_TYPE)
            if kind != RESOURCE_TYPE:
                raise AutoScalingValidationError(f"ResourceType must be {RESOURCE_TYPE}")
            group = self._group(request, request.form.get(f"{member}.ResourceId", ""))
            yield group, request.form.get(f"{member}.Key", ""), request.form.get(f"{member}.Value", "")

    def create_or_update_tags(self, request: Request) -> str:
        by_group: dict[str, tuple[AutoScalingGroup, dict[str, str]]] = {}
        for group, key, value in list(self._tags(request)):
            by_group.setdefault(group.name, (group, {}))[1][key] = value
        for group, tags in by_group.values():
            group.tag(tags)
        return ""

    def delete_tags(self, request: Request) -> str:
        for group, key, _ in list(self._tags(request)):
            group.untag([key])
        return ""

    def describe_auto_scaling_groups(self, request: Request) -> str:
        names = [request.form[m] for m in members(request.form, "AutoScalingGroupNames")]
        groups = self._groups(request)
        chosen = [groups[n] for n in names if n in groups] if names else sorted(groups.values(), key=_name)
        return (
            "<AutoScalingGroups>"
            + "".join(self._group_xml(request, g) for g in chosen)
            + "</AutoScalingGroups>"
        )

    def describe_tags(self, request: Request) -> str:
        wanted: set[str] | None = None
        for member in members(request.form, "Filters"):
            if request.form.get(f"{member}.Name") == "auto-scaling-group":
                wanted = {request.form[v] for v in members(request.form, f"{member}.Values")}
        groups = [g for g in self._groups(request).values() if wanted is None or g.name in wanted]
        return (
            "<Tags>"
            + "".join(_tag_xml(g, k, v) for g in sorted(groups, key=_name) for k, v in sorted(g.tags.items()))
            + "</Tags>"
        )

    def _group_xml(self, request: Request, group: AutoScalingGroup) -> str:
        low, high, desired = self._sizes(request, group)
        tags = "".join(_tag_xml(group, k, v) for k, v in sorted(group.tags.items()))
        return (
            f"<member><AutoScalingGroupName>{escape(group.name)}</AutoScalingGroupName>"
            f"<MinSize>{low}</MinSize><MaxSize>{high}</MaxSize><DesiredCapacity>{desired}</DesiredCapacity>"
            f"<Tags>{tags}</Tags><Instances/></member>"
        )


def app(engine: Engine, handlers: AutoScalingHandlers, latency: float = 0.0) -> EmulatorApp:
    return EmulatorApp(
        engine,
        routes=Map([Rule("/", methods=["POST"], endpoint="action")]),
        handlers={"action": handlers.action},
        render_error=render_error,
        errors=WireErrors(
            malformed=InvalidAction,
            no_route=lambda what: InvalidAction(f"No route serves {what}."),
            faults={
                429: lambda: AutoScalingThrottling("Rate exceeded"),
                503: lambda: AutoScalingUnavailable("Service unavailable, try again later."),
            },
        ),
        latency=latency,
    )


def _name(group: AutoScalingGroup) -> str:
    return group.name


def _tag_xml(group: AutoScalingGroup, key: str, value: str) -> str:
    return (
        f"<member><ResourceId>{escape(group.name)}</ResourceId><ResourceType>{RESOURCE_TYPE}</ResourceType>"
        f"<Key>{escape(key)}</Key><Value>{escape(value)}</Value><PropagateAtLaunch>false</PropagateAtLaunch></member>"
    )


def _answer(action: str, result: str) -> Response:
    inner = f"<{action}Result>{result}</{action}Result>" if result else ""
    body = (
        f'<{action}Response xmlns="{NAMESPACE}">{inner}'
        f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata></{action}Response>"
    )
    return Response(body, content_type="text/xml")


def render_error(error: ApiError) -> Response:
    code = error.code or "InvalidAction"
    body = (
        f'<ErrorResponse xmlns="{NAMESPACE}"><Error><Type>Sender</Type><Code>{escape(code)}</Code>'
        f"<Message>{escape(error.message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>"
    )
    return Response(body, status=error.status, content_type="text/xml")
