"""Label and field selectors as the API server parses them (k8s.io/apimachinery pkg/labels
selector.go, pkg/fields selector.go): label selectors take =, ==, !=, in, notin, exists and !key;
field selectors =, == and != on the fields each kind supports."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from provisioner.sandbox.kube.exceptions import BadRequest

Predicate = Callable[[Mapping[str, str]], bool]
_SET = re.compile(r"^(?P<key>[^\s!=]+)\s+(?P<op>in|notin)\s+\((?P<values>[^)]*)\)$")
_EQUALITY = re.compile(r"^(?P<key>[^\s!=]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s,]*)$")


def _terms(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        terms.append(current.strip())
    return terms


def label_selector(selector: str) -> Predicate:
    tests: list[Predicate] = []
    for term in _terms(selector):
        if found := _SET.match(term):
            key, values = found["key"], {v.strip() for v in found["values"].split(",") if v.strip()}
            if found["op"] == "in":
                tests.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                tests.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif found := _EQUALITY.match(term):
            key, value = found["key"], found["value"]
            if found["op"] == "!=":
                tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif re.fullmatch(r"![^\s!=(),]+", term):
            tests.append(lambda labels, k=term[1:]: k not in labels)
        elif re.fullmatch(r"[^\s!=(),]+", term):
            tests.append(lambda labels, k=term: k in labels)
        else:
            raise BadRequest(f"unable to parse requirement: {term!r}")
    return lambda labels: all(test(labels) for test in tests)


def field_selector(
    selector: str, kind: str, known: tuple[str, ...], fields: Callable[[dict[str, Any]], dict[str, str]]
) -> Callable[[dict[str, Any]], bool]:
    """A predicate on objects of `kind`, whose selectable fields are `known` (values: `fields`)."""
    tests: list[tuple[str, bool, str]] = []
    for term in _terms(selector):
        found = _EQUALITY.match(term)
        if not found:
            raise BadRequest(f"invalid selector: '{selector}'; can't understand '{term}'")
        if found["key"] not in known:
            raise BadRequest(f"field label not supported: {found['key']}")
        tests.append((found["key"], found["op"] != "!=", found["value"]))
    if not tests:
        return lambda obj: True

    def matches(obj: dict[str, Any]) -> bool:
        values = fields(obj)
        return all((values[key] == value) == equal for key, equal, value in tests)

    return matches
