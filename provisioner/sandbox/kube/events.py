"""The cluster's core/v1 Events, as the components' event recorders write them: one per object,
reason and message, its count and lastTimestamp bumped when the same is recorded again (client-go's
EventCorrelator aggregates repeats so), listable by namespace and by involvedObject fields (what
`kubectl describe pod` asks for)."""

from __future__ import annotations

import uuid
from typing import Any

from provisioner.sandbox.kube.objects import Revisions, now
from provisioner.sandbox.kube.selectors import field_selector, label_selector

SCHEDULER = "default-scheduler"
AUTOSCALER = "cluster-autoscaler"
EVENT_FIELDS = (
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
    "reason",
    "type",
    "source",
)


class Events:
    """Record and list events; the caller holds the cluster's lock."""

    def __init__(self, revisions: Revisions) -> None:
        self.revisions = revisions
        self.stored: dict[tuple[str, str, str, str], dict[str, Any]] = {}  # (ns, uid, reason, message)

    def record(self, pod: dict[str, Any], kind: str, reason: str, message: str, component: str) -> None:
        """An event of `kind` (Normal, Warning) about `pod` (or another object: a budget), from
        `component`."""
        metadata = pod["metadata"]
        key = (metadata["namespace"], metadata["uid"], reason, message)
        stamp, version = now(), self.revisions.next()
        found = self.stored.get(key)
        if found is not None:  # replaced, not changed: lists hand stored events out
            self.stored[key] = {
                **found,
                "metadata": {**found["metadata"], "resourceVersion": version},
                "count": found["count"] + 1,
                "lastTimestamp": stamp,
            }
            return
        self.stored[key] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{metadata['name']}.{uuid.uuid4().hex[:16]}",
                "namespace": metadata["namespace"],
                "uid": str(uuid.uuid4()),
                "creationTimestamp": stamp,
                "resourceVersion": version,
            },
            "involvedObject": {
                "apiVersion": pod.get("apiVersion", "v1"),
                "kind": pod.get("kind", "Pod"),
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata["uid"],
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": "",
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
        }

    def matching(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        labels = label_selector(label_selector_text)
        selected = field_selector(field_selector_text, "events", EVENT_FIELDS, _event_fields)
        return sorted(
            (
                e
                for e in self.stored.values()
                if (namespace is None or e["metadata"]["namespace"] == namespace)
                and labels(e["metadata"].get("labels") or {})
                and selected(e)
            ),
            key=lambda e: (e["metadata"]["namespace"], int(e["metadata"]["resourceVersion"])),
        )

    def forget(self, namespace: str, uid: str) -> None:
        """A deleted pod's events go with it (the API server expires them after an hour)."""
        for key in [k for k in self.stored if k[:2] == (namespace, uid)]:
            del self.stored[key]


def _event_fields(event: dict[str, Any]) -> dict[str, str]:
    involved = event["involvedObject"]
    return {
        "metadata.name": event["metadata"]["name"],
        "metadata.namespace": event["metadata"]["namespace"],
        "involvedObject.kind": involved["kind"],
        "involvedObject.name": involved["name"],
        "involvedObject.namespace": involved["namespace"],
        "involvedObject.uid": involved["uid"],
        "reason": event["reason"],
        "type": event["type"],
        "source": event["source"]["component"],
    }
