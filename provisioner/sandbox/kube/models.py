"""The sandbox's Kubernetes API state and rules: one KubeCluster per fleet cluster.

Nodes are not stored: each request computes them from the cloud emulator's pools (clouds.py) and
from what the GPU stack would advertise given each node's current labels and the ConfigMaps in the
cluster (rules.py). What kubectl changes on a node (labels, taints, annotations, cordon) is kept
per node until the node goes away, and yields to the cloud when the cloud changes the same label or
the pool's taints. Pods and ConfigMaps are stored; ConfigMaps record managedFields per field
manager at key granularity, as server-side apply does (Kubernetes "Server-Side Apply" docs:
field management, conflicts, forcing, removal of fields the applier stops applying).
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import itertools
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provisioner.sandbox.kube import rules
from provisioner.sandbox.kube.clouds import ADAPTERS, Pool
from provisioner.sandbox.kube.exceptions import AlreadyExists, BadRequest, Conflict, Invalid, NotFound
from provisioner.sandbox.kube.selectors import field_selector, label_selector

if TYPE_CHECKING:
    from provisioner.sandbox import SeededCluster

# kubelet's default --max-pods (kubelet configuration reference, maxPods: 110).
MAX_PODS = 110
FINISHED_PHASES = ("Succeeded", "Failed")
Key = tuple[str, str]  # namespace, name
Path = tuple[str, ...]  # a field of a ConfigMap: ("data", key), ("metadata", "labels", key)...


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class NodeEdits:
    """What was changed on one node through the API (kubectl label / taint / annotate / cordon),
    and, for the test helpers, what the node's agents report otherwise."""

    labels: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # key -> (cloud's, set)
    taints: tuple[list[dict[str, str]], list[dict[str, str]]] | None = None  # (the pool's, set)
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    mig_state: str | None = None  # what the MIG manager reports, forced (test helper)
    capacity: dict[str, str] = field(default_factory=dict)  # resource -> quantity, forced (test helper)

    def apply_labels(self, labels: dict[str, str]) -> dict[str, str]:
        for key, (was, value) in list(self.labels.items()):
            if labels.get(key) != was:  # the cloud changed the label since: its value wins
                del self.labels[key]
            elif value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        return labels

    def apply_taints(self, taints: list[dict[str, str]]) -> list[dict[str, str]]:
        if self.taints is not None and self.taints[0] != taints:
            self.taints = None
        return copy.deepcopy(self.taints[1]) if self.taints is not None else taints


@dataclass
class Entry:
    """One managedFields entry: a manager's fields under one operation."""

    manager: str
    operation: str  # Apply | Update
    time: str
    fields: set[Path] = field(default_factory=set)

    def render(self) -> dict[str, Any]:
        tree: dict[str, Any] = {}
        for path in sorted(self.fields):
            node = tree
            for part in path:
                node = node.setdefault(f"f:{part}", {})
        return {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": "v1",
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": tree,
        }

    def describe(self) -> str:
        """How a conflict names the manager (apimachinery fieldmanager, printManager)."""
        return f'"{self.manager}"' if self.operation == "Apply" else f'"{self.manager}" using v1'


def leaves(obj: dict[str, Any] | None) -> dict[Path, Any]:
    """A ConfigMap's managed fields and their values."""
    if not obj:
        return {}
    out: dict[Path, Any] = {}
    for section in ("data", "binaryData"):
        for key, value in (obj.get(section) or {}).items():
            out[(section, key)] = value
    metadata = obj.get("metadata") or {}
    for section in ("labels", "annotations"):
        for key, value in (metadata.get(section) or {}).items():
            out[("metadata", section, key)] = value
    if "immutable" in obj:
        out[("immutable",)] = obj["immutable"]
    return out


def with_leaves(obj: dict[str, Any], values: dict[Path, Any]) -> dict[str, Any]:
    """`obj` with its managed fields replaced by `values`."""
    out = copy.deepcopy(obj)
    metadata = out.setdefault("metadata", {})
    for section in ("data", "binaryData"):
        out.pop(section, None)
    for section in ("labels", "annotations"):
        metadata.pop(section, None)
    out.pop("immutable", None)
    for path, value in sorted(values.items()):
        if path == ("immutable",):
            out["immutable"] = value
        elif path[0] == "metadata":
            metadata.setdefault(path[1], {})[path[2]] = value
        else:
            out.setdefault(path[0], {})[path[1]] = value
    return out


def _path_text(path: Path) -> str:
    return "." + ".".join(path)


def pod_requests(pod: dict[str, Any]) -> dict[str, int]:
    """Extended resources a pod requests: per container, requests, or limits where requests are
    not given (extended resources may not be overcommitted: requests equal limits)."""
    total: dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in wanted.items():
            if "/" in name:
                total[name] = total.get(name, 0) + int(str(quantity))
    return total


POD_FIELDS = ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")
CONFIG_MAP_FIELDS = ("metadata.name", "metadata.namespace")


def _pod_fields(pod: dict[str, Any]) -> dict[str, str]:
    return {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "spec.nodeName": pod["spec"].get("nodeName") or "",
        "status.phase": pod["status"].get("phase", ""),
    }


def _meta_fields(obj: dict[str, Any]) -> dict[str, str]:
    return {"metadata.name": obj["metadata"]["name"], "metadata.namespace": obj["metadata"]["namespace"]}


class KubeCluster:
    """One fleet cluster's Kubernetes API: nodes from its cloud's pools, stored pods and ConfigMaps."""

    def __init__(self, target: SeededCluster, emulator: Any):
        self.name = target.name
        self.ref = target.ref
        self.source = ADAPTERS[target.ref.cloud](emulator, target.ref)
        self.lock = threading.RLock()
        self.edits: dict[str, NodeEdits] = {}
        self.config_maps: dict[Key, dict[str, Any]] = {}
        self.managed: dict[Key, list[Entry]] = {}
        self.pods: dict[Key, dict[str, Any]] = {}
        self._versions = itertools.count(1)
        self.version = "0"
        self._slots: dict[str, int] = {}
        self._seen: dict[str, tuple[str, str]] = {}  # node -> (uid, creationTimestamp)

    def _next_version(self) -> str:
        self.version = str(next(self._versions))
        return self.version

    def _slot(self, pool_key: str) -> int:
        """A stable small number per pool (for node IPs), in the order pools are first seen."""
        return self._slots.setdefault(pool_key, len(self._slots) + 1)

    # Nodes

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Every node now, by name, as the API shows it."""
        with self.lock:
            config_map = self.config_maps.get((rules.DEVICE_PLUGIN_NAMESPACE, rules.DEVICE_PLUGIN_CONFIG_MAP))
            nodes: dict[str, dict[str, Any]] = {}
            for pool in self.source.pools(self._slot):
                for index, name in enumerate(pool.node_names):
                    nodes[name] = self._node(pool, index, name, config_map)
            for gone in set(self.edits) - set(nodes):  # a node that went away takes its edits along
                del self.edits[gone]
            for gone in set(self._seen) - set(nodes):
                del self._seen[gone]
            return nodes

    def _cloud_labels(self, pool: Pool, index: int, name: str) -> dict[str, str]:
        """The node's labels as the kubelet and the cloud set them (Kubernetes "Well-Known Labels,
        Annotations and Taints"), before any edit and before the GPU stack's agents add theirs."""
        return {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": pool.instance_type,
            **({"topology.kubernetes.io/region": self.source.region} if self.source.region else {}),
            **({"topology.kubernetes.io/zone": pool.zones[index]} if pool.zones else {}),
            **pool.labels,
        }

    def _node(self, pool: Pool, index: int, name: str, config_map: dict[str, Any] | None) -> dict[str, Any]:
        edits = self.edits.get(name) or NodeEdits()
        labels = self._cloud_labels(pool, index, name)
        labels = edits.apply_labels(labels)
        taints = edits.apply_taints([dict(t) for t in pool.taints])  # a taint is flat: key, value, effect
        advertised = rules.Advertised()
        if pool.hardware is not None:
            advertised = pool.advertise(pool.hardware, labels, config_map, edits.mig_state)
        labels.update(advertised.labels)  # the GPU stack's agents write theirs over anything else
        capacity = {"pods": str(MAX_PODS), **{k: str(v) for k, v in advertised.resources.items()}}
        capacity.update(edits.capacity)
        if name not in self._seen:  # a node keeps the uid and creation time it was first listed with
            self._seen[name] = (str(uuid.uuid4()), now())
        uid, created = self._seen[name]
        spec: dict[str, Any] = {}
        if taints:
            spec["taints"] = taints
        if edits.unschedulable:
            spec["unschedulable"] = True
        metadata: dict[str, Any] = {"name": name, "uid": uid, "creationTimestamp": created, "labels": labels}
        if edits.annotations:
            metadata["annotations"] = dict(edits.annotations)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": metadata,
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                    }
                ],
                "addresses": [{"type": "Hostname", "address": name}],
            },
        }
        # An opaque version that changes whenever what the node shows changes.
        digest = hashlib.sha256(repr(node).encode()).hexdigest()
        metadata["resourceVersion"] = str(int(digest[:12], 16))
        return node

    def node(self, name: str) -> dict[str, Any]:
        try:
            return self.nodes()[name]
        except KeyError:
            raise NotFound.of("nodes", name) from None

    def list_nodes(self, label_selector_text: str = "") -> list[dict[str, Any]]:
        matches = label_selector(label_selector_text)
        return [n for _, n in sorted(self.nodes().items()) if matches(n["metadata"]["labels"])]

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A merge / strategic-merge patch of the node's labels, annotations, taints or
        unschedulable (NodeSpec.taints is atomic: a patch replaces the whole list)."""
        with self.lock:
            self.node(name)
            edits = self.edits.setdefault(name, NodeEdits())
            metadata, spec = patch.get("metadata") or {}, patch.get("spec") or {}
            base_labels = self._base_labels(name)
            for key, value in (metadata.get("labels") or {}).items():
                edits.labels[key] = (base_labels.get(key), None if value is None else str(value))
            for key, value in (metadata.get("annotations") or {}).items():
                if value is None:
                    edits.annotations.pop(key, None)
                else:
                    edits.annotations[key] = str(value)
            if "taints" in spec:
                base_taints = self._base_taints(name)
                edits.taints = (base_taints, [dict(t) for t in spec["taints"] or []])
            if "unschedulable" in spec:
                edits.unschedulable = bool(spec["unschedulable"])
            self._next_version()
            return self.node(name)

    def _pool_of(self, name: str) -> tuple[Pool, int]:
        for pool in self.source.pools(self._slot):
            if name in pool.node_names:
                return pool, pool.node_names.index(name)
        raise NotFound.of("nodes", name)

    def _base_labels(self, name: str) -> dict[str, str]:
        pool, index = self._pool_of(name)
        return self._cloud_labels(pool, index, name)

    def _base_taints(self, name: str) -> list[dict[str, str]]:
        return copy.deepcopy(self._pool_of(name)[0].taints)

    # Test helpers: what the node's agents would report otherwise.

    def fail_mig(self, node: str, state: str = "failed") -> None:
        """Make the MIG manager report `state` for `node` (it then leaves the GPUs whole)."""
        with self.lock:
            self.node(node)
            self.edits.setdefault(node, NodeEdits()).mig_state = state

    def set_capacity(self, node: str, resource: str, quantity: int | str) -> None:
        """Make `node` advertise `quantity` of `resource` (a device plugin that lost devices, a
        kubelet with fewer pods)."""
        with self.lock:
            self.node(node)
            self.edits.setdefault(node, NodeEdits()).capacity[resource] = str(quantity)

    def label_node(self, node: str, key: str, value: str | None) -> None:
        """`kubectl label node NODE KEY=VALUE --overwrite` (or `KEY-` for None)."""
        self.patch_node(node, {"metadata": {"labels": {key: value}}})

    def finish_pod(self, namespace: str, name: str, phase: str = "Succeeded") -> None:
        with self.lock:
            self.pod(namespace, name)
            stored = self.pods[(namespace, name)]  # replaced, not changed: lists hand stored pods out
            self.pods[(namespace, name)] = {
                **stored,
                "metadata": {**stored["metadata"], "resourceVersion": self._next_version()},
                "status": {**stored["status"], "phase": phase},
            }

    # Pods

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            try:
                return copy.deepcopy(self.pods[(namespace, name)])
            except KeyError:
                raise NotFound.of("pods", name) from None

    def list_pods(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        """The stored pods themselves, not copies, for the response to serialise: never modify
        them (a stored pod is replaced whole, never changed, so a list stays as it was read)."""
        labels = label_selector(label_selector_text)
        fields = field_selector(field_selector_text, "pods", POD_FIELDS, _pod_fields)
        with self.lock:
            return [
                pod
                for (ns, _), pod in sorted(self.pods.items())
                if (namespace is None or ns == namespace)
                and labels(pod["metadata"].get("labels") or {})
                and fields(pod)
            ]

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a pod; one given spec.nodeName is bound there at once and admitted or refused
        as the kubelet does (no scheduler runs: a pod without nodeName stays Pending)."""
        with self.lock:
            pod = self._new_object(namespace, body, "Pod", "pods")
            name = pod["metadata"]["name"]
            containers = (pod.get("spec") or {}).get("containers")
            if not containers:
                raise Invalid.of("Pod", name, [("spec.containers", "FieldValueRequired", "Required value")])
            missing = [i for i, c in enumerate(containers) if not c.get("name") or not c.get("image")]
            if missing:
                i = missing[0]
                field_name = "name" if not containers[i].get("name") else "image"
                raise Invalid.of(
                    "Pod",
                    name,
                    [(f"spec.containers[{i}].{field_name}", "FieldValueRequired", "Required value")],
                )
            if (namespace, name) in self.pods:
                raise AlreadyExists.of("pods", name)
            pod["status"] = self._admit(pod)
            pod["metadata"]["resourceVersion"] = self._next_version()
            self.pods[(namespace, name)] = pod
            return copy.deepcopy(pod)

    def _admit(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The kubelet's admission of a pod bound to its node (kubelet lifecycle predicate:
        `Node didn't have enough resource: <name>, requested: N, used: N, capacity: N`)."""
        node_name = pod["spec"].get("nodeName")
        node = self.nodes().get(node_name or "")
        if node is None:
            return {"phase": "Pending"}
        allocatable = node["status"]["allocatable"]
        active = [
            p
            for p in self.pods.values()
            if p["spec"].get("nodeName") == node_name and p["status"].get("phase") not in FINISHED_PHASES
        ]
        wanted = {**pod_requests(pod), "pods": 1}
        for resource, requested in sorted(wanted.items()):
            used = (
                len(active) if resource == "pods" else sum(pod_requests(p).get(resource, 0) for p in active)
            )
            capacity = int(allocatable.get(resource, "0"))
            if used + requested > capacity:
                return {
                    "phase": "Failed",
                    "reason": f"OutOf{resource}",
                    "message": (
                        f"Pod was rejected: Node didn't have enough resource: {resource}, "
                        f"requested: {requested}, used: {used}, capacity: {capacity}"
                    ),
                    "startTime": now(),
                }
        return {"phase": "Running", "hostIP": "10.0.0.1", "startTime": now()}

    def delete_pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            pod = self.pod(namespace, name)
            del self.pods[(namespace, name)]
            self._next_version()
            return pod

    # ConfigMaps

    def config_map(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            try:
                return self._rendered(namespace, name)
            except KeyError:
                raise NotFound.of("configmaps", name) from None

    def _rendered(self, namespace: str, name: str) -> dict[str, Any]:
        obj = copy.deepcopy(self.config_maps[(namespace, name)])
        entries = [e.render() for e in self.managed.get((namespace, name), []) if e.fields]
        if entries:
            obj["metadata"]["managedFields"] = entries
        return obj

    def list_config_maps(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        labels = label_selector(label_selector_text)
        fields = field_selector(field_selector_text, "configmaps", CONFIG_MAP_FIELDS, _meta_fields)
        with self.lock:
            return [
                self._rendered(ns, name)
                for (ns, name), obj in sorted(self.config_maps.items())
                if (namespace is None or ns == namespace)
                and labels(obj["metadata"].get("labels") or {})
                and fields(obj)
            ]

    def create_config_map(self, namespace: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
        with self.lock:
            obj = self._new_object(namespace, body, "ConfigMap", "configmaps")
            key = (namespace, obj["metadata"]["name"])
            if key in self.config_maps:
                raise AlreadyExists.of("configmaps", key[1])
            self._check_config_map(obj)
            self._update_fields(key, {}, leaves(obj), manager)
            return self._store(key, obj)

    def replace_config_map(
        self, namespace: str, name: str, body: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        with self.lock:
            key = (namespace, name)
            if key not in self.config_maps:
                raise NotFound.of("configmaps", name)
            current = self.config_maps[key]
            obj = self._same_object(namespace, name, body, "ConfigMap")
            wanted = obj["metadata"].get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise Conflict(
                    f'Operation cannot be fulfilled on configmaps "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    {"name": name, "kind": "configmaps"},
                )
            self._check_config_map(obj)
            self._update_fields(key, leaves(current), leaves(obj), manager)
            return self._store(key, obj, current)

    def merge_patch_config_map(
        self, namespace: str, name: str, patch: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); on a ConfigMap a strategic merge patch means the same."""
        with self.lock:
            current = self.config_maps.get((namespace, name))
            if current is None:
                raise NotFound.of("configmaps", name)
            merged = _merge(copy.deepcopy(current), patch)
            merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self.replace_config_map(namespace, name, merged, manager)

    def apply_config_map(
        self, namespace: str, name: str, body: dict[str, Any], manager: str, force: bool
    ) -> dict[str, Any]:
        """Server-side apply: the manager owns exactly the fields it applies; a field another
        manager owns with a different value is a conflict unless forced (then it changes hands);
        fields it applied before and applies no more are removed unless another manager owns them."""
        with self.lock:
            if body.get("apiVersion") != "v1" or body.get("kind") != "ConfigMap":
                raise BadRequest("apiVersion v1 and kind ConfigMap must be set in an apply request")
            obj = self._same_object(namespace, name, body, "ConfigMap")
            self._check_config_map(obj)
            key = (namespace, name)
            current = self.config_maps.get(key)
            before, applied = leaves(current), leaves(obj)
            entries = self.managed.setdefault(key, [])
            mine = next((e for e in entries if e.manager == manager and e.operation == "Apply"), None)
            if mine is None:
                mine = Entry(manager, "Apply", now())
                entries.append(mine)
            conflicts = [
                (path, other)
                for path in sorted(applied)
                for other in entries
                if other is not mine and path in other.fields and before.get(path) != applied[path]
            ]
            if conflicts and not force:
                if not mine.fields:
                    entries.remove(mine)
                raise _apply_conflict(conflicts)
            for path, other in conflicts:
                other.fields.discard(path)
            result = dict(before)
            for path in mine.fields - set(applied):
                if not any(path in e.fields for e in entries if e is not mine):
                    result.pop(path, None)
            result.update(applied)
            mine.fields, mine.time = set(applied), now()
            base = current or {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
            }
            return self._store(key, with_leaves(base, result), current)

    def delete_config_map(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            if (namespace, name) not in self.config_maps:
                raise NotFound.of("configmaps", name)
            obj = self.config_maps.pop((namespace, name))
            self.managed.pop((namespace, name), None)
            self._next_version()
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": name, "kind": "configmaps", "uid": obj["metadata"]["uid"]},
            }

    def _update_fields(self, key: Key, before: dict[Path, Any], after: dict[Path, Any], manager: str) -> None:
        """An Update operation: the manager takes the fields it changed from everyone else; fields
        it removed leave every manager's set."""
        changed = {p for p, v in after.items() if before.get(p, object()) != v}
        removed = set(before) - set(after)
        entries = self.managed.setdefault(key, [])
        for entry in entries:
            entry.fields -= changed | removed
        if changed:
            mine = next((e for e in entries if e.manager == manager and e.operation == "Update"), None)
            if mine is None:
                mine = Entry(manager, "Update", now())
                entries.append(mine)
            mine.fields |= changed
            mine.time = now()
        entries[:] = [e for e in entries if e.fields]

    @staticmethod
    def _check_config_map(obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        for section in ("data", "binaryData"):
            values = obj.get(section)
            if values is not None and not isinstance(values, dict):
                raise BadRequest(
                    f'ConfigMap in version "v1" cannot be handled as a ConfigMap: {section} must be an object'
                )
            bad = [k for k, v in (values or {}).items() if not isinstance(v, str)]
            if bad:
                raise Invalid.of(
                    "ConfigMap", name, [(f"{section}[{bad[0]}]", "FieldValueInvalid", "must be a string")]
                )

    def _store(self, key: Key, obj: dict[str, Any], current: dict[str, Any] | None = None) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj["apiVersion"], obj["kind"] = "v1", "ConfigMap"
        metadata = obj.setdefault("metadata", {})
        metadata.pop("managedFields", None)
        metadata["namespace"], metadata["name"] = key
        previous = (current or {}).get("metadata", {})
        metadata["uid"] = previous.get("uid") or str(uuid.uuid4())
        metadata["creationTimestamp"] = previous.get("creationTimestamp") or now()
        metadata["resourceVersion"] = self._next_version()
        for empty in ("labels", "annotations"):
            if not metadata.get(empty):
                metadata.pop(empty, None)
        self.config_maps[key] = obj
        self.managed.setdefault(key, [])
        self.managed[key][:] = [e for e in self.managed[key] if e.fields]
        return self._rendered(*key)

    def _new_object(self, namespace: str, body: dict[str, Any], kind: str, resource: str) -> dict[str, Any]:
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
            metadata["name"] = prefix + uuid.uuid4().hex[:5]
        metadata["namespace"] = namespace
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = now()
        obj["apiVersion"], obj["kind"] = "v1", kind
        if kind == "Pod":
            obj.setdefault("spec", {})
        return obj

    @staticmethod
    def _same_object(namespace: str, name: str, body: dict[str, Any], kind: str) -> dict[str, Any]:
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


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


def _apply_conflict(conflicts: list[tuple[Path, Entry]]) -> Conflict:
    """The API server's apply conflict (apimachinery fieldmanager conflict.go, NewConflictError)."""
    causes = [
        {"type": "FieldManagerConflict", "message": f"conflict with {e.describe()}", "field": _path_text(p)}
        for p, e in conflicts
    ]
    if len(conflicts) == 1:
        path, entry = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {entry.describe()}: {_path_text(path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for path, entry in conflicts:
            by_manager.setdefault(entry.describe(), []).append(_path_text(path))
        parts = [
            f"conflicts with {m}:" + "".join(f"\n- {p}" for p in paths) for m, paths in by_manager.items()
        ]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(parts)
    return Conflict(message, {"causes": causes})


class KubeClusters:
    """Every fleet cluster's API, by the fleet's name for it."""

    def __init__(self) -> None:
        self.clusters: dict[str, KubeCluster] = {}

    def add(self, target: SeededCluster, emulator: Any) -> KubeCluster:
        return self.clusters.setdefault(target.name, KubeCluster(target, emulator))

    def __getitem__(self, name: str) -> KubeCluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise NotFound("the server could not find the requested resource", {}) from None
