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


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels ANDed with matchExpressions: In, NotIn, Exists,
    DoesNotExist) against `labels` (LabelSelectorAsSelector). None matches nothing; {} everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = set(expression.get("values") or [])
        present = key in labels
        if not {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(operator, False):
            return False
    return True


def selector_is_empty(selector: Mapping[str, Any] | None) -> bool:
    """labels.Selector.Empty of LabelSelectorAsSelector: no requirement at all (nil or {})."""
    return not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions"))


def selector_text(selector: Mapping[str, Any] | None) -> str:
    """The selector as labels.Selector.String writes it (a Scale's status.selector, kubectl's
    SELECTOR column): requirements sorted by key, `k=v`, `k in (a,b)`, `k`, `!k`."""
    terms: list[tuple[str, str]] = [
        (k, f"{k}={v}") for k, v in (selector or {}).get("matchLabels", {}).items()
    ]
    for expression in (selector or {}).get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = ",".join(sorted(expression.get("values") or []))
        written = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key}
        terms.append((key, written.get(operator, f"!{key}")))
    return ",".join(text for _, text in sorted(terms))
