"""Strategic merge patch, as kubectl apply, edit, scale and cordon send it for the built-in kinds
the sandbox stores (Deployments, ReplicaSets, PodDisruptionBudgets): a JSON merge patch whose
lists of objects merge by their patchMergeKey, with the patch directives.

Written from the Kubernetes docs "Update API Objects in Place Using kubectl patch" (strategic
merge patch: patchStrategy merge, patchMergeKey) and apimachinery pkg/util/strategicpatch
(directives `$patch: replace | delete | merge`, `$setElementOrder/<list>`, `$retainKeys`,
`$deleteFromPrimitiveList/<list>`). The merge keys are those the core/v1 and apps/v1 types declare
(patchMergeKey tags in kubernetes/api core/v1 types.go), by field name, as the sandbox's kinds use
them; a list of any other field is replaced whole (patchStrategy unset: atomic).
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "topologySpreadConstraints": "topologyKey",
    "ownerReferences": "uid",
    "conditions": "type",
}
MERGED_PRIMITIVE_LISTS = ("finalizers",)  # patchStrategy merge on a list of strings: a union
# patchStrategy replace on a map: a PodDisruptionBudget's selector (kubernetes/api policy/v1
# types.go) is taken whole, not merged (a Deployment's is immutable either way).
REPLACED_MAPS = ("selector",)
_ORDER, _DELETE_PRIMITIVE = "$setElementOrder/", "$deleteFromPrimitiveList/"


def strategic_merge(target: Any, patch: Any) -> Any:
    """`target` with `patch` applied (a new object; neither argument is changed); None where the
    patch deletes it."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    patch = dict(patch)
    directive = patch.pop("$patch", None)
    if directive == "replace":
        return copy.deepcopy(patch)
    if directive == "delete":
        return None
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    retained = patch.pop("$retainKeys", None)
    orders = {k[len(_ORDER) :]: patch.pop(k) for k in list(patch) if k.startswith(_ORDER)}
    removals = {
        k[len(_DELETE_PRIMITIVE) :]: patch.pop(k) for k in list(patch) if k.startswith(_DELETE_PRIMITIVE)
    }
    for key, value in patch.items():
        merged = _merge_list(key, out.get(key), value) if isinstance(value, list) else None
        if not isinstance(value, list):
            base = None if key in REPLACED_MAPS else out.get(key)
            merged = None if value is None else strategic_merge(base, value)
        if merged is None:
            out.pop(key, None)
        else:
            out[key] = merged
    for key, values in removals.items():
        if isinstance(out.get(key), list):
            out[key] = [v for v in out[key] if v not in values]
    for key, order in orders.items():
        if isinstance(out.get(key), list):
            out[key] = _ordered(key, out[key], order)
    return out if retained is None else {k: v for k, v in out.items() if k in retained}


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    key = MERGE_KEYS.get(field)
    if field in MERGED_PRIMITIVE_LISTS and isinstance(current, list):
        return [*current, *(v for v in patch if v not in current)]
    if key is None or not all(isinstance(item, dict) for item in patch):
        return [item for item in copy.deepcopy(patch) if not (isinstance(item, dict) and "$patch" in item)]
    if any(item.get("$patch") == "replace" for item in patch):
        return [
            {k: v for k, v in item.items() if k != "$patch"}
            for item in patch
            if item.get("$patch") != "replace"
        ]
    out = copy.deepcopy(current) if isinstance(current, list) else []
    for item in patch:
        at = next(
            (i for i, old in enumerate(out) if isinstance(old, dict) and old.get(key) == item.get(key)), None
        )
        if item.get("$patch") == "delete":
            if at is not None:
                del out[at]
        elif at is None:
            out.append(strategic_merge({}, item))
        else:
            out[at] = strategic_merge(out[at], item)
    return out


def _ordered(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    """`$setElementOrder`: the items in the order given (by merge key), those not named after."""
    key = MERGE_KEYS.get(field)

    def identity(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    wanted = [identity(o) for o in order]
    named = [i for w in wanted for i in items if identity(i) == w]
    return named + [i for i in items if identity(i) not in wanted]
