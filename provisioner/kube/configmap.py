"""The device-plugin ConfigMap in each cluster: what apply would change, and server-side apply.

The document is the one `render` prints for the cluster (render.py, from its template), never a
second copy. The tool writes only what it wrote before or what is absent: server-side apply
records each field's manager in metadata.managedFields, so a key another manager wrote (helm,
kubectl, a GitOps controller) is left alone, and a ConfigMap the tool never wrote is not touched.
A key the fleet's pools need that the tool cannot put there is `blocked`: apply then leaves the
pools whose label names it alone, since their nodes would come up with no sharing at all.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError

from provisioner.compile import CompiledCluster
from provisioner.errors import KubeUnreachable
from provisioner.kube.contexts import FIELD_MANAGER, KubeAccess
from provisioner.nvidia import DEVICE_PLUGIN_LABEL

NO_KUBE_HINT = "pass --no-kube if you apply the ConfigMap yourself (GitOps)"


def desired_document(compiled: CompiledCluster) -> dict[str, Any] | None:
    """The ConfigMap `render` prints for the cluster, as an object; None where the cloud needs none."""
    if not compiled.uses_gpu_operator:  # render prints nothing for it: no templates to load
        return None
    from provisioner.render import render_device_plugin_config  # jinja2, only where rendering

    text = render_device_plugin_config(compiled)
    if text is None:
        return None
    try:  # ruamel's C parser where ruamel.yaml.clib is built: a fifth of the pure parser's CPU
        return _loader().load(text)
    except MarkedYAMLError:  # libyaml scans by YAML 1.1: the pure parser judges what it refuses
        return YAML(typ="safe", pure=True).load(text)


_LOADERS = threading.local()


def _loader() -> YAML:
    """This thread's safe loader: a YAML() looks for plug-ins on disk each time it is made, and
    one instance must not load on two threads at once."""
    loader = getattr(_LOADERS, "yaml", None)
    if loader is None:
        loader = _LOADERS.yaml = YAML(typ="safe")
    return loader


def needed_keys(compiled: CompiledCluster) -> tuple[str, ...]:
    """The keys the cluster's pools name in their device-plugin label, sorted."""
    keys = {p.setup.labels.get(DEVICE_PLUGIN_LABEL) for p in compiled.pools}
    return tuple(sorted(k for k in keys if k is not None))


def key_managers(config_map: Mapping[str, Any]) -> dict[str, set[str]]:
    """Per data key, the field managers that own it (metadata.managedFields, FieldsV1)."""
    owners: dict[str, set[str]] = {}
    for entry in config_map.get("metadata", {}).get("managedFields") or []:
        data = (entry.get("fieldsV1") or {}).get("f:data") or {}
        for key in data:
            if key.startswith("f:"):
                owners.setdefault(key[2:], set()).add(entry.get("manager", ""))
    return owners


def managers(config_map: Mapping[str, Any]) -> set[str]:
    return {e.get("manager", "") for e in config_map.get("metadata", {}).get("managedFields") or []}


@dataclass(frozen=True)
class ConfigMapPlan:
    """What apply would do to one cluster's device-plugin ConfigMap."""

    cluster: str
    namespace: str
    name: str
    desired: Mapping[str, Any] = field(repr=False)  # the rendered document
    needed: tuple[str, ...]  # keys the fleet's pools name
    context: str | None = None
    action: Literal["create", "update", "none"] = "none"
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()  # what the tool leaves alone, in words
    blocked: Mapping[str, str] = field(default_factory=dict)  # needed key -> why it will be missing
    error: str | None = None  # the cluster's Kubernetes API could not be used
    body: Mapping[str, Any] | None = field(default=None, repr=False)  # what server-side apply sends

    @property
    def path(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pending(self) -> bool:
        return self.action != "none"

    @property
    def worth_showing(self) -> bool:
        return self.pending or bool(self.conflicts or self.error)

    def summary(self, done: bool = False) -> str:
        """`keys time-sliced-10 added`, as plan shows it (`done`: as apply reports it)."""
        if self.action == "create":
            return f"{'created' if done else 'will be created'} with keys {', '.join(self.added)}"
        parts = [f"keys {', '.join(self.added)} added"] if self.added else []
        parts += [f"keys {', '.join(self.changed)} changed"] if self.changed else []
        return "; ".join(parts)

    def json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "kind": "configmap",
            "namespace": self.namespace,
            "name": self.name,
            "action": self.action,
            "keys_added": list(self.added),
            "keys_changed": list(self.changed),
            "conflicts": list(self.conflicts),
            "blocked_keys": sorted(self.blocked),
            "error": self.error,
        }


def plan_config_map(
    cluster: str,
    desired: Mapping[str, Any],
    needed: tuple[str, ...],
    current: Mapping[str, Any] | None,
    context: str | None = None,
) -> ConfigMapPlan:
    """Compare the rendered ConfigMap with the cluster's (None: absent)."""
    meta = desired["metadata"]
    base = {"cluster": cluster, "namespace": meta["namespace"], "name": meta["name"]}
    base |= {"desired": desired, "needed": needed, "context": context}
    want: Mapping[str, str] = desired.get("data") or {}
    if current is None:
        return ConfigMapPlan(**base, action="create", added=tuple(want), body=desired)
    have: Mapping[str, str] = current.get("data") or {}
    path = f"{meta['namespace']}/{meta['name']}"
    if FIELD_MANAGER not in managers(current):
        wrong = [k for k, v in want.items() if have.get(k) != v]
        conflicts = (
            (
                f"configmap {path} exists but provisioner did not write it, so it is left alone; "
                f"it lacks or differs in keys {', '.join(wrong)}",
            )
            if wrong
            else ()
        )
        why = f"configmap {path} was not written by provisioner"
        return ConfigMapPlan(**base, conflicts=conflicts, blocked={k: why for k in needed if k in wrong})
    owners = key_managers(current)
    ours = {k for k, who in owners.items() if FIELD_MANAGER in who}
    added, changed, conflicts, blocked = [], [], [], {}
    for key, value in want.items():
        if key not in have:
            added.append(key)
        elif have[key] == value:
            continue
        elif key in ours:
            changed.append(key)
        else:
            writers = ", ".join(sorted(owners.get(key, set()))) or "another manager"
            conflicts.append(
                f"key {key} of configmap {path} was written by {writers}, not provisioner, and differs "
                "from what the fleet needs: left alone"
            )
            if key in needed:
                blocked[key] = f"key {key} of configmap {path} was written by {writers}"
    # Every key the tool owns goes into the apply, the ones the fleet no longer needs too: server-
    # side apply removes what its manager leaves out, and a node may still be labelled with it.
    data = {k: have[k] for k in sorted(ours) if k in have and k not in want}
    data |= {k: v for k, v in want.items() if k in added or k in changed or k in ours}
    body = {**{k: v for k, v in desired.items() if k != "data"}, "data": data}
    action = "update" if added or changed else "none"
    return ConfigMapPlan(
        **base,
        action=action,
        added=tuple(added),
        changed=tuple(changed),
        conflicts=tuple(conflicts),
        blocked=blocked,
        body=body,
    )


def unreachable_plan(
    cluster: str,
    desired: Mapping[str, Any],
    needed: tuple[str, ...],
    error: KubeUnreachable,
    context: str | None = None,
) -> ConfigMapPlan:
    meta = desired["metadata"]
    blocked = dict.fromkeys(needed, f"{error}; {NO_KUBE_HINT}")
    return ConfigMapPlan(
        cluster, meta["namespace"], meta["name"], desired, needed, context, error=str(error), blocked=blocked
    )


def observe_config_map(access: KubeAccess, compiled: CompiledCluster) -> ConfigMapPlan | None:
    """The plan for `compiled`'s ConfigMap as the cluster holds it now; None where the cloud needs none."""
    desired = desired_document(compiled)
    if desired is None:
        return None
    needed = needed_keys(compiled)
    meta = desired["metadata"]
    context = None
    try:
        context = access.context_for(compiled.cluster)
        with access.connect(compiled.name, context) as kube:
            current = kube.config_map(meta["namespace"], meta["name"])
    except KubeUnreachable as error:
        return unreachable_plan(compiled.name, desired, needed, error, context)
    return plan_config_map(compiled.name, desired, needed, current, context)


def install(access: KubeAccess, planned: ConfigMapPlan) -> ConfigMapPlan:
    """Read the ConfigMap again, and server-side-apply what the tool may write. The plan as it
    stood when applied: its `blocked` keys are the ones not in place, and `error` says why."""
    if planned.context is None:  # no context reaches the cluster: nothing to apply to
        error = KubeUnreachable(planned.error or f"{planned.cluster}: no kubeconfig context")
        return unreachable_plan(planned.cluster, planned.desired, planned.needed, error)
    try:
        with access.connect(planned.cluster, planned.context) as kube:
            current = kube.config_map(planned.namespace, planned.name)
            fresh = plan_config_map(
                planned.cluster, planned.desired, planned.needed, current, planned.context
            )
            if fresh.pending:
                kube.apply_config_map(dict(fresh.body or {}))
    except KubeUnreachable as error:
        return unreachable_plan(planned.cluster, planned.desired, planned.needed, error, planned.context)
    return fresh
