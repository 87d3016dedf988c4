"""A placement's fragment merged into users' Kubernetes manifests (`place --manifest FILE`).

Users keep their Deployments, Jobs and CronJobs in files; what they need from `place` is the same
files with the GPU limit on the right container and the pool's node selector and tolerations on
every pod template, nothing of theirs dropped (but a selector of the cloud's own pool label that
an earlier `place` wrote: the fleet pool's label takes its place). The YAML is edited round-trip
(ruamel.yaml), so comments, key order and quoting stay as they were and the output diffs cleanly
against the input.

A manifest whose containers reach GPUs outside the scheduler's device accounting (an
`NVIDIA_VISIBLE_DEVICES` in their env, `privileged: true`) is refused: merging a slice into it would
look right and pile pods onto one GPU (docs/FACTS.md, "Device accounting").

On a DRA pool the pod claims its devices instead: the placement's claim goes into each pod spec's
resourceClaims and the container's resources.claims, and a container still asking for a GPU
through the device plugin (off on those nodes) is refused.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.events import CollectionEndEvent, CollectionStartEvent
from ruamel.yaml.reader import ReaderError

from provisioner import hardware
from provisioner.errors import BadRequest
from provisioner.kubeyaml import for_kubectl
from provisioner.nvidia import GPU_RESOURCE, SHARED_GPU_RESOURCE
from provisioner.placement import Placement
from provisioner.pools import POOL_NODE_LABEL

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
# etcd takes requests of 1.5 MiB by default; a file of many objects stays far below this, /dev/zero not.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
# Kubernetes objects nest a few dozen levels (CRD schemas the deepest); ruamel recurses per level.
MAX_DEPTH = 100

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
BYPASS_FLAG = "--allow-device-bypass"
REPORTED = 20  # findings printed; a generated file may hold thousands of the same one
# NVIDIA Container Toolkit: `void`, empty or unset expose no GPU (runc's behaviour), `none` the
# driver but no GPU; `all` and lists of indexes or UUIDs expose those GPUs, counted or not.
_NO_GPU_VALUES = frozenset({"", "void", "none"})
# kubectl reads YAML 1.1, where these plain scalars are true; ruamel (YAML 1.2) keeps them as strings.
_YAML11_TRUE = frozenset({"y", "yes", "true", "on"})
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_CONTAINER_LISTS = {
    "initContainers": "initContainer",
    "containers": "container",
    "ephemeralContainers": "ephemeralContainer",
}


class DeviceBypass(BadRequest):
    """Containers that would reach GPUs the scheduler does not count; each finding names the file,
    line, workload, container and field."""

    def __init__(self, findings: list[str]):
        super().__init__("\n".join(findings))
        self.findings = findings

    def report(self) -> list[str]:
        return [
            *(f"error: {finding}" for finding in at_most(self.findings)),
            "these reach GPUs the scheduler does not count, so it places other pods on the same GPUs; "
            f"ask for GPUs only through resources.limits (place sets them), or pass {BYPASS_FLAG} "
            "if that is what you mean",
        ]


def at_most(findings: list[str], count: int = REPORTED) -> list[str]:
    """The first `count` findings, and how many more there are."""
    more = len(findings) - count
    return findings[:count] + ([f"… and {more} more like these"] if more > 0 else [])


def check(
    text: str, source: str, *, container: str | None = None, allow_device_bypass: bool = False
) -> list[str]:
    """BadRequest unless `text` is YAML holding a pod template, DeviceBypass where a container would
    reach GPUs outside the scheduler's accounting: said before any pool is chosen. With
    `allow_device_bypass`, those findings are returned instead, for the caller to warn with."""
    documents = _load(YAML(), text, source)
    if not any(True for document in documents for _ in _pod_specs(document, source)):
        raise BadRequest(_NO_TEMPLATE.format(source=source, kinds=", ".join(POD_SPEC_PATHS)))
    return _refuse_bypasses(documents, source, container, allow_device_bypass)


def _bypasses(documents: list[Any], source: str, container: str | None = None) -> list[str]:
    """Every container (init containers too) in `documents`' pod templates that would reach GPUs
    the device plugin or the cloud's GPU scheduler does not count, as `file:line: Kind name:
    container c: field ...`. `container` is the one `place` gives the slice, as in `merge`."""
    found: list[str] = []
    known = gpu_resources()
    for document in documents:
        for label, spec, _ in _pod_specs(document, source):
            targets = _targets(spec.get("containers"), container, known)
            for key, noun in _CONTAINER_LISTS.items():
                listed = spec.get(key)
                for item in listed if isinstance(listed, CommentedSeq) else []:
                    if isinstance(item, CommentedMap):
                        gets_gpu = any(item is t for t in targets) or bool(_gpu_limits(item, known))
                        where = f"{label}: {noun} {_name(item.get('name', '?'))}"
                        found += _container_bypasses(item, gets_gpu, source, where)
    return list(dict.fromkeys(found))  # a container YAML aliases twice is told once


def _refuse_bypasses(documents: list[Any], source: str, container: str | None, allow: bool) -> list[str]:
    found = _bypasses(documents, source, container)
    if found and not allow:
        raise DeviceBypass(found)
    return found


def _container_bypasses(item: CommentedMap, gets_gpu: bool, source: str, where: str) -> list[str]:
    found = []
    env = item.get("env")
    for index, var in enumerate(env if isinstance(env, CommentedSeq) else []):
        if not isinstance(var, CommentedMap) or var.get("name") != VISIBLE_DEVICES:
            continue
        at = f"{source}:{_line(env, index, item)}: {where}: env[{VISIBLE_DEVICES}]"
        if "valueFrom" in var:
            found.append(f"{at} is set by valueFrom, which place cannot read: it may name any GPU")
            continue
        value = "" if var.get("value") is None else str(var.get("value"))
        if value not in _NO_GPU_VALUES:
            found.append(f"{at} is {_shown(value)}: the NVIDIA runtime exposes those GPUs, counted or not")
        elif gets_gpu:  # the device plugin passes its devices in this variable: the user's wins
            found.append(
                f"{at} is {_shown(value)}: on a container given GPUs it replaces the devices the "
                "device plugin passes in that variable"
            )
    context = item.get("securityContext")
    if isinstance(context, CommentedMap) and _true(context.get("privileged")):
        # Refused on a container without the slice too: the pod lands on the GPU node, where a
        # privileged container may open every GPU device, the ones given to other pods included.
        found.append(
            f"{source}:{_line(context, 'privileged', item)}: {where}: securityContext.privileged is "
            "true: a privileged container sees every GPU on the node"
        )
    return found


def _shown(value: Any, limit: int = 60) -> str:
    """A value from the file on one short line: quoted, escaped, cut."""
    text = repr(str(value))
    return text if len(text) <= limit else text[: limit - 2] + "…'"


def _name(value: Any) -> str:
    """A Kubernetes name as it is; anything else (newlines, escapes, megabytes) as `_shown` gives it."""
    return value if isinstance(value, str) and _PLAIN_NAME.match(value) else _shown(value)


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in _YAML11_TRUE)


def _line(node: CommentedMap | CommentedSeq, key: str | int, fallback: CommentedMap) -> int:
    """The line of `key` (a map key or a sequence index) in `node`, else of `fallback`."""
    try:
        position = node.lc.item(key) if isinstance(node, CommentedSeq) else node.lc.key(key)
    except (KeyError, IndexError, TypeError):
        position = (fallback.lc.line, 0)
    return position[0] + 1


def decode(data: bytes, source: str) -> str:
    """The manifest's text: BadRequest past MAX_MANIFEST_BYTES (read at most one byte more) or
    where it is not UTF-8, naming the line."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise BadRequest(
            f"{source}: is larger than {MAX_MANIFEST_BYTES // (1024 * 1024)} MB, so it is not a manifest; "
            "reading stops there so that an endless stream cannot exhaust memory"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BadRequest(
            f"{source}:{line}: is not UTF-8 text (byte 0x{data[exc.start]:02x}); save it as UTF-8"
        ) from None


def _load(yaml: YAML, text: str, source: str) -> list[Any]:
    try:
        _check_depth(text, source)
        return list(yaml.load_all(text))
    except ReaderError as error:
        line = text[: error.position].count("\n") + 1
        raise BadRequest(
            f"{source}:{line}: not YAML: character U+{error.character:04X} is a control character, "
            "which YAML does not allow"
        ) from None
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise BadRequest(f"{source}{line}: not YAML: {error.problem or error.context}") from None


def merge(
    text: str,
    placement: Placement,
    *,
    source: str,
    container: str | None = None,
    allow_device_bypass: bool = False,
) -> str:
    """`text` (one or more YAML documents) with `placement`'s fragment in every pod template:
    limits on each container without a GPU limit (or on the one named `container`), node selector,
    tolerations and pod fields merged. BadRequest names the file, line and document on conflicts;
    DeviceBypass (unless `allow_device_bypass`) where a container reaches GPUs uncounted."""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap the user's long lines
    mapping, sequence, offset = _indentation(text)
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    documents = _load(yaml, text, source)
    _refuse_bypasses(documents, source, container, allow_device_bypass)
    templates = 0
    for document in documents:
        for label, spec, line in _pod_specs(document, source):
            _merge_spec(spec, placement, container, f"{source}:{line}: {label}")
            templates += 1
    if templates == 0:
        raise BadRequest(_NO_TEMPLATE.format(source=source, kinds=", ".join(POD_SPEC_PATHS)))
    # Written by a YAML of its own: the reading one's resolver stays YAML 1.2, as the file was read.
    writer = for_kubectl(YAML())
    writer.width = yaml.width
    writer.indent(mapping=mapping, sequence=sequence, offset=offset)
    out = io.StringIO()
    if len(documents) == 1:
        writer.dump(documents[0], out)
    else:
        writer.dump_all(documents, out)
    return out.getvalue()


def workload_namespaces(text: str, source: str) -> set[str | None]:
    """The namespaces the manifest's pod-making objects name (None: none named, the context's):
    a DRA pool's claim must be in the same one, as claims are namespaced."""
    found: set[str | None] = set()

    def visit(document: Any) -> None:
        if not isinstance(document, dict):
            return
        if document.get("kind") == "List":
            for item in document.get("items") or []:
                visit(item)
        elif document.get("kind") in POD_SPEC_PATHS:
            metadata = document.get("metadata")
            namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
            found.add(str(namespace) if namespace else None)

    for document in _load(YAML(), text, source):
        visit(document)
    return found


def _check_depth(text: str, source: str) -> None:
    """BadRequest where collections nest past MAX_DEPTH: found from the parser's events, before
    the loader would recurse that deep."""
    depth = 0
    for event in YAML().parse(text):
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1
                raise BadRequest(
                    f"{source}:{line}: nested deeper than {MAX_DEPTH} levels; is this a manifest?"
                )
        elif isinstance(event, CollectionEndEvent):
            depth -= 1


def _pod_specs(
    document: Any, source: str, seen: set[int] | None = None
) -> Iterator[tuple[str, CommentedMap, int]]:
    """Each pod spec in a document (a List's items too), with a label and line for messages. An
    item YAML aliases is one object, visited once: nested aliased Lists never multiply the work."""
    seen = set() if seen is None else seen
    if not isinstance(document, CommentedMap) or id(document) in seen:
        return
    seen.add(id(document))
    kind = document.get("kind")
    if kind == "List":
        items = document.get("items")
        for item in items if isinstance(items, CommentedSeq) else []:
            yield from _pod_specs(item, source, seen)
        return
    path = POD_SPEC_PATHS.get(kind)  # type: ignore[arg-type]
    if path is None:
        return
    metadata = document.get("metadata")
    label = f"{kind} {_name(metadata.get('name', '?') if isinstance(metadata, CommentedMap) else '?')}"
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
    if placement.device is not None:
        _merge_claims(spec, containers, placement, container, where, known)
        return
    targets = _targets(containers, container, known)
    if not targets and container is not None:
        names = ", ".join(str(c.get("name")) for c in containers if isinstance(c, CommentedMap))
        raise BadRequest(f"{where}: no container named {container!r}; it has {names}")
    if not targets:
        raise BadRequest(
            f"{where}: every container already has a GPU limit; name the one to place with --container"
        )
    for target in targets:
        _set_limits(target, placement.limits, known)
    _merge_selector(spec, placement, where)
    _merge_tolerations(spec, placement.tolerations)
    for key, value in placement.pod_fields.items():
        if key in spec and spec[key] != value:
            raise BadRequest(f"{where}: {key} is {spec[key]!r}; pods on this pool need {value!r}")
        spec[key] = value


def _merge_claims(  # noqa: PLR0917 (the spec, its containers, and what _merge_spec was given)
    spec: CommentedMap,
    containers: CommentedSeq,
    placement: Placement,
    container: str | None,
    where: str,
    known: set[str],
) -> None:
    """A DRA pool's side of the pod: its claim in resourceClaims, used by the named container or
    every container; node selector and tolerations as for any pool. A container asking for a GPU
    through the device plugin is refused: the device plugin is off on a DRA pool's nodes."""
    for key, noun in _CONTAINER_LISTS.items():
        listed = spec.get(key)
        for item in listed if isinstance(listed, CommentedSeq) else []:
            if not isinstance(item, CommentedMap):
                continue
            asked = _gpu_limits(item, known) + _gpu_requests(item, known)
            if asked:
                raise BadRequest(
                    f"{where}: {noun} {_name(item.get('name', '?'))} asks for {asked[0]} through the "
                    f"device plugin, which is off on DRA pool {placement.pool}'s nodes: remove it; "
                    "place gives the container a claim of the pool's devices instead"
                )
    listed = [c for c in containers if isinstance(c, CommentedMap)]
    targets = listed if container is None else [c for c in listed if c.get("name") == container]
    if not targets:
        names = ", ".join(str(c.get("name")) for c in listed)
        raise BadRequest(f"{where}: no container named {container!r}; it has {names}")
    (wanted,) = placement.pod_claims
    claims = spec.get("resourceClaims")
    if not isinstance(claims, CommentedSeq):
        claims = spec["resourceClaims"] = CommentedSeq()
    same = [c for c in claims if isinstance(c, CommentedMap) and c.get("name") == wanted["name"]]
    if same and dict(same[0]) != wanted:
        raise BadRequest(
            f"{where}: resourceClaims {wanted['name']} is {dict(same[0])!r}; the chosen pool needs {wanted!r}"
        )
    if not same:
        claims.append(CommentedMap(wanted))
    for target in targets:
        resources = target.get("resources")
        if not isinstance(resources, CommentedMap):
            resources = target["resources"] = CommentedMap()
        used = resources.get("claims")
        if not isinstance(used, CommentedSeq):
            used = resources["claims"] = CommentedSeq()
        if not any(isinstance(c, CommentedMap) and c.get("name") == wanted["name"] for c in used):
            used.append(CommentedMap({"name": wanted["name"]}))
    _merge_selector(spec, placement, where)
    _merge_tolerations(spec, placement.tolerations)


def _gpu_requests(container: CommentedMap, known: set[str]) -> list[str]:
    requests = (container.get("resources") or {}).get("requests") or {}
    return [name for name in requests if _is_gpu(name, known)]


def _targets(containers: Any, container: str | None, known: set[str]) -> list[CommentedMap]:
    """The containers that get the placement's limits: the one named, else those asking for no GPU."""
    listed = [c for c in containers if isinstance(c, CommentedMap)] if isinstance(containers, list) else []
    if container is not None:
        return [c for c in listed if c.get("name") == container]
    return [c for c in listed if not _gpu_limits(c, known)]


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


def _merge_selector(spec: CommentedMap, placement: Placement, where: str) -> None:
    current = spec.get("nodeSelector")
    if not isinstance(current, CommentedMap):
        current = spec["nodeSelector"] = CommentedMap()
    _drop_cloud_pool_label(current, placement, where)
    for key, value in placement.node_selector.items():
        if key in current and str(current[key]) != value:
            raise BadRequest(
                f"{where}: nodeSelector {key} is {current[key]!r}, but the chosen pool needs {value!r}"
            )
        current[key] = value


def _drop_cloud_pool_label(current: CommentedMap, placement: Placement, where: str) -> None:
    """A selector of the cloud's own pool label pins the pod to one cloud pool, which a create-first
    replacement deletes: where it names the chosen pool (an earlier place wrote it), the fleet pool's
    label takes its place; naming another, the pod could land nowhere."""
    if placement.cloud_pool_label is None:
        return
    key, values = placement.cloud_pool_label
    if key not in current:
        return
    if str(current[key]) in values:
        del current[key]
        return
    raise BadRequest(
        f"{where}: nodeSelector {key} is {current[key]!r}, another pool than the chosen {placement.pool!r}; "
        f"remove it (place selects the pool by {POOL_NODE_LABEL}, across its generations)"
    )


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
