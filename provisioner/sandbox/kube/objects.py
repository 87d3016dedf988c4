"""What every stored object shares: its metadata when created or written by name, and the cluster's
resourceVersion, one counter across every kind (as the API server's storage keeps one revision)."""

from __future__ import annotations

import copy
import datetime
import itertools
import random
import uuid
from typing import Any

from provisioner.sandbox.kube.exceptions import BadRequest, Invalid

Key = tuple[str, str]  # namespace, name


# The API server's generateName suffix: 5 characters of this alphabet, the prefix cut to leave room
# in 63 (apiserver pkg/storage/names/generate.go: randomLength 5, maxNameLength 63; apimachinery
# pkg/util/rand/rand.go: alphanums, no vowels so no words are spelt).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_RANDOM_LENGTH, _MAX_NAME = 5, 63
_names = random.Random()


def generate_name(prefix: str) -> str:
    """`prefix` with the apiserver's random suffix (SimpleNameGenerator.GenerateName)."""
    base = prefix[: _MAX_NAME - _RANDOM_LENGTH]
    return base + "".join(_names.choice(NAME_ALPHABET) for _ in range(_RANDOM_LENGTH))


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp(metadata: dict[str, Any], current: dict[str, Any] | None, revision: str) -> None:
    """The metadata a write stores: the object's uid and creation time kept from `current` (new
    where it is new), the write's resourceVersion, and no empty labels or annotations (the API
    server drops them); managedFields are the store's to render."""
    metadata.pop("managedFields", None)
    previous = (current or {}).get("metadata", {})
    metadata["uid"] = previous.get("uid") or str(uuid.uuid4())
    metadata["creationTimestamp"] = previous.get("creationTimestamp") or now()
    metadata["resourceVersion"] = revision
    for empty in ("labels", "annotations"):
        if not metadata.get(empty):
            metadata.pop(empty, None)


class Revisions:
    """The cluster's resourceVersion: every write takes the next one, lists report the last."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)
        self.current = "0"

    def next(self) -> str:
        self.current = str(next(self._counter))
        return self.current


def new_object(namespace: str, body: dict[str, Any], kind: str) -> dict[str, Any]:
    """`body` as created in `namespace`: named (or named from generateName), with a new uid."""
    obj = copy.deepcopy(body)
    metadata = obj.setdefault("metadata", {}) or {}
    obj["metadata"] = metadata
    if metadata.get("namespace") not in (None, "", namespace):
        raise BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if not metadata.get("name"):
        prefix = metadata.get("generateName")
        if not prefix:
            raise Invalid.of(
                kind,
                "",
                [
                    (
                        "metadata.name",
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                    )
                ],
            )
        metadata["name"] = generate_name(prefix)
    metadata["namespace"] = namespace
    metadata["uid"] = str(uuid.uuid4())
    metadata["creationTimestamp"] = now()
    obj["apiVersion"], obj["kind"] = "v1", kind
    return obj


def same_object(namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` as written to the object the URL names: a name or namespace it gives must match."""
    obj = copy.deepcopy(body)
    metadata = obj.setdefault("metadata", {}) or {}
    obj["metadata"] = metadata
    if metadata.get("name") not in (None, "", name):
        raise BadRequest("the name of the object does not match the name on the URL")
    if metadata.get("namespace") not in (None, "", namespace):
        raise BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    metadata["name"], metadata["namespace"] = name, namespace
    return obj


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target
