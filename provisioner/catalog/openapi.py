"""The catalog service's OpenAPI document, exact: FastAPI writes it from each route's typed
parameters, and this module adds what those declarations cannot say, so that a client (or
schemathesis, which the tests run against the service) reading the document knows every answer:

- every route answers 422 to an unknown, repeated or bad query parameter, and 503 when the
  database fails, with {"error": ...}; with a token, 401 without it;
- an empty query parameter is no filter (the service drops it), and a query parameter is a string
  on the wire, present or not, never JSON's null;
- `/` answers HTML (its 422 too), `/metrics` Prometheus' text format, the others JSON whose
  schema (schemas.py) names every key;
- `/api/place` takes exactly one of `mig`, `gpu_memory` and `gpus`, and a `mig` the GPU named by
  `gpu` offers: rules across parameters, which OpenAPI says only of one parameter, so the four are
  one object parameter (style form, exploded: the same `?mig=1g.10gb&gpu=A100` on the wire) whose
  schema holds them. Its values come from the tool's hardware data, as the route's checks do.
"""

from __future__ import annotations

import copy
from typing import Any

from provisioner import hardware
from provisioner.catalog import schemas as answers

EMPTY: dict[str, Any] = {"const": ""}  # a parameter sent empty: the same as not sent
ERROR = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "problems": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["error"],
}
NO_PLACEMENT = {
    "type": "object",
    "properties": {"error": {"type": "string"}, "closest": {"type": "array", "items": {"type": "string"}}},
    "required": ["error", "closest"],
}
UNHEALTHY = {
    "type": "object",
    "properties": {"status": {"const": "unavailable"}, "error": {"type": "string"}},
    "required": ["status", "error"],
}
# Each route's answer, by the components' names (exact() puts them there).
ANSWERS = {
    "/healthz": {"$ref": "#/components/schemas/Healthy"},
    "/api/clusters": {"type": "array", "items": {"$ref": "#/components/schemas/Cluster"}},
    "/api/pools": {"type": "array", "items": {"$ref": "#/components/schemas/Pool"}},
    "/api/pools/{cluster_and_pool}": {"$ref": "#/components/schemas/Pool"},
    "/api/capacity": {"type": "array", "items": {"$ref": "#/components/schemas/Capacity"}},
    "/api/drift": {"type": "array", "items": {"$ref": "#/components/schemas/Drift"}},
    "/api/place": {"$ref": "#/components/schemas/Placement"},
}
PLACE_MODES = ("mig", "gpu_memory", "gpus")
PLACE_OBJECT = (*PLACE_MODES, "gpu")  # the parameters /api/place's rules tie together
# Characters a regular expression (ECMA 262, as JSON Schema reads it) gives a meaning.
_SYNTAX = set("^$\\.*+?()[]{}|/")


def exact(generated: dict[str, Any], *, guarded: bool) -> dict[str, Any]:
    """FastAPI's document of the service's routes, made to say what they answer."""
    document = copy.deepcopy(generated)
    document["info"]["description"] = (
        "Read-only: a method other than GET or HEAD is 405. A query parameter sent empty is no "
        "filter; one a route does not take, or sent twice, is a 422."
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas |= {"Error": ERROR, "NoPlacement": NO_PLACEMENT}
    schemas |= {
        "Pool": answers.pool(),
        "Cluster": answers.cluster(),
        "Capacity": answers.capacity(),
        "Drift": answers.drift(),
        "Placement": answers.placement(),
        "Healthy": answers.healthy(),
    }
    if guarded:
        document["components"]["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": "The service's token."},
            "basic": {"type": "http", "scheme": "basic", "description": "Any user, the token as password."},
        }
        document["security"] = [{"bearer": []}, {"basic": []}]
    for path, operations in document["paths"].items():
        for operation in operations.values():
            _query_parameters(operation)
            _responses(path, operation, guarded)
    _pools(document["paths"]["/api/pools"]["get"])
    _place(document["paths"]["/api/place"]["get"])
    return document


def _query_parameters(operation: dict[str, Any]) -> None:
    for parameter in operation.get("parameters", []):
        if parameter["in"] != "query":
            continue
        schema = parameter["schema"]
        branches = [b for b in schema.pop("anyOf", []) if b != {"type": "null"}]
        if branches:
            (only,) = branches  # FastAPI's optional parameter: its type, or null
            schema.update(only)
        parameter["allowEmptyValue"] = True


def _error(description: str, media: str = "application/json") -> dict[str, Any]:
    schema = {"$ref": "#/components/schemas/Error"} if media == "application/json" else {"type": "string"}
    return {"description": description, "content": {media: {"schema": schema}}}


def _responses(path: str, operation: dict[str, Any], guarded: bool) -> None:
    responses = operation["responses"]
    page = path == "/"
    responses["422"] = _error(
        "A query parameter the route does not take, given twice, or not as described.",
        "text/html" if page else "application/json",
    )
    responses["503"] = _error("The catalog's database failed; the reason, with its URL redacted.")
    if guarded:
        responses["401"] = {
            **_error("No valid token."),
            "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
        }
    media = {"/": "text/html", "/metrics": "text/plain"}.get(path, "application/json")
    schema = ANSWERS.get(path, {"type": "string"})
    responses["200"] = {"description": "OK", "content": {media: {"schema": schema}}}
    if path == "/api/pools/{cluster_and_pool}":
        responses["404"] = _error("No live pool of that name in that cluster.")
    elif path == "/healthz":
        responses["503"] = {
            "description": "The database does not answer.",
            "content": {"application/json": {"schema": UNHEALTHY}},
        }


def _pools(operation: dict[str, Any]) -> None:
    """/api/pools' answers carry an ETag; If-None-Match with it is a 304 until the catalog changes."""
    operation["parameters"].append(
        {
            "name": "If-None-Match",
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
            "description": "An ETag of an earlier answer (or `*`): 304 while the answer is the same.",
        }
    )
    operation["responses"]["200"]["headers"] = {"ETag": {"schema": {"type": "string"}, "required": True}}
    operation["responses"]["304"] = {
        "description": "Not Modified: If-None-Match names this answer's ETag.",
        "headers": {"ETag": {"schema": {"type": "string"}, "required": True}},
    }


def _place(operation: dict[str, Any]) -> None:
    """/api/place's rules across mig, gpu_memory, gpus and gpu, as one exploded object parameter."""
    parameters = operation["parameters"]
    declared = {p["name"]: p["schema"] for p in parameters if p["name"] in PLACE_OBJECT}
    operation["parameters"] = [
        {
            "name": "request",
            "in": "query",
            "required": True,
            "style": "form",
            "explode": True,
            "description": (
                "Exactly one of `mig`, `gpu_memory` and `gpus`; `mig` a profile of the GPU `gpu` "
                "names (any GPU the tool knows if none); `gpu` a GPU model the tool knows."
            ),
            "schema": _place_request(declared),
        },
        *(p for p in parameters if p["name"] not in PLACE_OBJECT),
    ]
    operation["responses"]["404"] = {
        "description": "Nothing fits: what the closest pools offer.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NoPlacement"}}},
    }
    operation["responses"]["422"] = _error("Not a request: see `request`, or a parameter not as described.")


def _place_request(declared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from provisioner.request import MEMORY_UNITS

    known = hardware.load()
    names = _gpu_names(known)
    any_gpu = {"pattern": _one_of(list(names))}
    every_profile = sorted({p for gpu in known.gpus.values() for p in gpu.mig})
    by_profiles: dict[tuple[str, ...], list[str]] = {}
    for name, profiles in names.items():
        if profiles:
            by_profiles.setdefault(profiles, []).append(name)
    # request.parse_size's: a number more than zero, and a unit in any case
    number = r"\+?(?:\d*[1-9]\d*(?:\.\d+)?|0*\.\d*[1-9]\d*)"
    unit = _one_of([_any_case(u) for u in sorted(MEMORY_UNITS, key=len, reverse=True)], whole=False)
    size = rf"^\s*{number}\s*{unit}\s*$"
    others = {"mig": EMPTY, "gpu_memory": EMPTY, "gpus": EMPTY}
    branches = [
        {"required": ["mig"], "properties": {**others, "mig": {"enum": every_profile}, "gpu": EMPTY}},
        *(
            {
                "required": ["mig", "gpu"],
                "properties": {**others, "mig": {"enum": list(profiles)}, "gpu": {"pattern": _one_of(gpus)}},
            }
            for profiles, gpus in by_profiles.items()
        ),
        {
            "required": ["gpu_memory"],
            "properties": {**others, "gpu_memory": {"pattern": size}, "gpu": {"anyOf": [any_gpu, EMPTY]}},
        },
        {
            "required": ["gpus"],
            "properties": {**others, "gpus": {"type": "integer"}, "gpu": {"anyOf": [any_gpu, EMPTY]}},
        },
    ]
    gpus = declared["gpus"]
    return {
        "type": "object",
        "properties": {
            "mig": declared["mig"],
            "gpu_memory": {**declared["gpu_memory"], "description": "GPU memory, e.g. 4GB, 4000MB or 4GiB."},
            "gpus": {"anyOf": [{k: v for k, v in gpus.items() if k != "description"}, EMPTY], **_about(gpus)},
            "gpu": {**declared["gpu"], "description": "Only this GPU model: a key (A100-80GB) or a family."},
        },
        "additionalProperties": False,
        "oneOf": branches,
    }


def _about(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: schema[k] for k in ("description", "title") if k in schema}


def _gpu_names(known: hardware.Hardware) -> dict[str, tuple[str, ...]]:
    """Every spelling `gpu` may take, as a pattern, with the MIG profiles of the GPUs it names:
    each key exactly, and each family (the key up to its first '-') in any case."""
    names: dict[str, tuple[str, ...]] = {}
    for key in known.gpus:
        family = key.split("-")[0]
        for name, pattern in ((key, _literal(key)), (family, _any_case(family))):
            profiles = {p for gpu in known.gpus_named(name) for p in gpu.mig}
            names.setdefault(pattern, tuple(sorted(profiles)))
    return names


def _literal(text: str) -> str:
    return "".join(f"\\{c}" if c in _SYNTAX else c for c in text)


def _any_case(text: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else _literal(c) for c in text)


def _one_of(patterns: list[str], *, whole: bool = True) -> str:
    alternatives = f"(?:{'|'.join(patterns)})"
    return f"^{alternatives}$" if whole else alternatives
