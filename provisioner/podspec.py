"""A placement's fragment merged into users' Kubernetes manifests (`place --manifest FILE`).

Users keep their Deployments, Jobs and CronJobs in files; what they need from `place` is the same
files with the GPU limit on the right container and the pool's node selector and tolerations on
every pod template, nothing of theirs dropped. The YAML is edited round-trip (ruamel.yaml), so
comments, key order and quoting stay as they were and the output diffs cleanly against the input.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError

from provisioner import hardware
from provisioner.errors import BadRequest
from provisioner.nvidia import GPU_RESOURCE, SHARED_GPU_RESOURCE
from provisioner.placement import Placement

# Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-")


def gpu_resources() -> set[str]:
    """Resource names that ask for a GPU or a share of one: NVIDIA's, and each cloud's scheduler's."""
    names = {GPU_RESOURCE, SHARED_GPU_RESOURCE}
    for cloud in hardware.load().clouds.values():
        if cloud.scheduler is not None:
            names.add(cloud.scheduler.resource)
        if cloud.placement is not None and cloud.placement.compute_share_resource:
            names.add(cloud.placement.compute_share_resource)
    return names


def _is_gpu(name: str, known: set[str]) -> bool:
    return name in known or bool(_MIG_RESOURCE.match(name))


_NO_TEMPLATE = "{source}: no pod template to place (it has no {kinds})"


def check(text: str, source: str) -> None:
    """BadRequest unless `text` is YAML holding a pod template: said before any pool is chosen."""
    documents = _load(YAML(), text, source)
    if not any(True for document in documents for _ in _pod_specs(document, source)):
        raise BadRequest(_NO_TEMPLATE.format(source=source, kinds=", ".join(POD_SPEC_PATHS)))


def _load(yaml: YAML, text: str, source: str) -> list[Any]:
    try:
        return list(yaml.load_all(text))
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise BadRequest(f"{source}{line}: not YAML: {error.problem or error.context}") from None


def merge(text: str, placement: Placement, *, source: str, container: str | None = None) -> str:
    """`text` (one or more YAML documents) with `placement`'s fragment in every pod template:
    limits on each container without a GPU limit (or on the one named `container`), node selector,
    tolerations and pod fields merged. BadRequest names the file, line and document on conflicts."""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap the user's long lines
    mapping, sequence, offset = _indentation(text)
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    documents = _load(yaml, text, source)
    templates = 0
    for document in documents:
        for label, spec, line in _pod_specs(document, source):
            _merge_spec(spec, placement, container, f"{source}:{line}: {label}")
            templates += 1
    if templates == 0:
        raise BadRequest(_NO_TEMPLATE.format(source=source, kinds=", ".join(POD_SPEC_PATHS)))
    out = io.StringIO()
    if len(documents) == 1:
        yaml.dump(documents[0], out)
    else:
        yaml.dump_all(documents, out)
    return out.getvalue()


def _pod_specs(document: Any, source: str) -> Iterator[tuple[str, CommentedMap, int]]:
    """Each pod spec in a document (a List's items too), with a label and line for messages."""
    if not isinstance(document, CommentedMap):
        return
    kind = document.get("kind")
    if kind == "List":
        for item in document.get("items") or []:
            yield from _pod_specs(item, source)
        return
    path = POD_SPEC_PATHS.get(kind)  # type: ignore[arg-type]
    if path is None:
        return
    name = (document.get("metadata") or {}).get("name", "?")
    label = f"{kind} {name}"
    node: Any = document
    line = document.lc.line + 1
    for key in path:
        child = node.get(key) if isinstance(node, CommentedMap) else None
        if not isinstance(child, CommentedMap):
            raise BadRequest(f"{source}:{line}: {label}: no {'.'.join(path)} to place")
        line = node.lc.key(key)[0] + 1  # the line of `key:`, where messages point
        node = child
    yield label, node, line


def _merge_spec(spec: CommentedMap, placement: Placement, container: str | None, where: str) -> None:
    containers = spec.get("containers")
    if not isinstance(containers, CommentedSeq) or not containers:
        raise BadRequest(f"{where}: no containers")
    known = gpu_resources()
    if container is not None:
        targets = [c for c in containers if isinstance(c, CommentedMap) and c.get("name") == container]
        if not targets:
            names = ", ".join(str(c.get("name")) for c in containers if isinstance(c, CommentedMap))
            raise BadRequest(f"{where}: no container named {container!r}; it has {names}")
    else:
        targets = [c for c in containers if isinstance(c, CommentedMap) and not _gpu_limits(c, known)]
        if not targets:
            raise BadRequest(
                f"{where}: every container already has a GPU limit; name the one to place with --container"
            )
    for target in targets:
        _set_limits(target, placement.limits, known)
    _merge_selector(spec, placement.node_selector, where)
    _merge_tolerations(spec, placement.tolerations)
    for key, value in placement.pod_fields.items():
        if key in spec and spec[key] != value:
            raise BadRequest(f"{where}: {key} is {spec[key]!r}; pods on this pool need {value!r}")
        spec[key] = value


def _gpu_limits(container: CommentedMap, known: set[str]) -> list[str]:
    limits = (container.get("resources") or {}).get("limits") or {}
    return [name for name in limits if _is_gpu(name, known)]


def _set_limits(container: CommentedMap, limits: dict[str, int], known: set[str]) -> None:
    """The placement's limits replace any GPU limit or request the container had (the named
    container may have asked for another pool's resource); its other resources stay."""
    resources = container.get("resources")
    if not isinstance(resources, CommentedMap):
        resources = container["resources"] = CommentedMap()
    for section in ("limits", "requests"):
        current = resources.get(section)
        if isinstance(current, CommentedMap):
            for name in [n for n in current if _is_gpu(n, known)]:
                del current[name]
    current = resources.get("limits")
    if not isinstance(current, CommentedMap):
        current = resources["limits"] = CommentedMap()
    current.update(limits)
    if isinstance(resources.get("requests"), CommentedMap) and not resources["requests"]:
        del resources["requests"]


def _merge_selector(spec: CommentedMap, selector: dict[str, str], where: str) -> None:
    current = spec.get("nodeSelector")
    if not isinstance(current, CommentedMap):
        current = spec["nodeSelector"] = CommentedMap()
    for key, value in selector.items():
        if key in current and str(current[key]) != value:
            raise BadRequest(
                f"{where}: nodeSelector {key} is {current[key]!r}, but the chosen pool needs {value!r}"
            )
        current[key] = value


def _merge_tolerations(spec: CommentedMap, tolerations: list[dict[str, str]]) -> None:
    current = spec.get("tolerations")
    if not isinstance(current, CommentedSeq):
        current = spec["tolerations"] = CommentedSeq()
    have = [dict(t) for t in current if isinstance(t, CommentedMap)]
    for toleration in tolerations:
        if not any(_covers(existing, toleration) for existing in have):
            current.append(CommentedMap(toleration))


def _covers(existing: dict[str, Any], wanted: dict[str, str]) -> bool:
    """Whether a user's toleration already tolerates the taint `wanted` was made for."""
    if existing.get("effect") not in (None, "", wanted["effect"]):
        return False
    if existing.get("operator") == "Exists" and not existing.get("key"):
        return True  # tolerates everything
    if existing.get("key") != wanted["key"]:
        return False
    return existing.get("operator") == "Exists" or existing.get("value") == wanted.get("value")


def _indentation(text: str) -> tuple[int, int, int]:
    """The mapping indent, sequence indent and dash offset the file uses (the first ones found), so
    the edited file keeps its shape; ruamel's defaults (2, 2, 0) where it shows none."""
    mapping = sequence = offset = None
    key_indent: int | None = None  # the indent of the line before, where it opened a block (`key:`)
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        if key_indent is not None and stripped.startswith("- ") and sequence is None:
            item = stripped[2:]
            offset = indent - key_indent
            sequence = offset + 2 + len(item) - len(item.lstrip(" "))
        elif (
            key_indent is not None
            and not stripped.startswith("-")
            and indent > key_indent
            and mapping is None
        ):
            mapping = indent - key_indent
        key_indent = indent if stripped.rstrip().endswith(":") else None
        if mapping is not None and sequence is not None:
            break
    return mapping or 2, sequence or 2, offset or 0
