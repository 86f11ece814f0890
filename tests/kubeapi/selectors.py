"""Label and field selectors with the API server's grammar and its 400 answers.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by
commas. Field selectors: `path=v`, `path==v`, `path!=v`, joined by commas; a path the resource
does not index is rejected like the real server does ("field label not supported").
A missing field compares as the empty string, so `spec.nodeName=` finds unbound pods.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from tests.kubeapi.resources import ApiError, Resource

Predicate = Callable[[Mapping[str, Any]], bool]

_SET_TERM = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_TERM = re.compile(r"^\s*([\w./-]+)\s*(==|!=|=)\s*([\w./-]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([\w./-]+)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[Mapping[str, str]], bool]:
    if m := _SET_TERM.match(term):
        key, op, raw = m.group(1), m.group(2), m.group(3)
        values = {v.strip() for v in raw.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQ_TERM.match(term):
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS_TERM.match(term):
        negate, key = m.group(1) == "!", m.group(2)
        return lambda labels: (key in labels) != negate
    raise ApiError(400, f"unable to parse requirement: invalid label selector term {term!r}")


def label_selector(text: str | None) -> Predicate:
    """Compile a label selector into a predicate over whole objects."""
    checks = [_label_term(t) for t in _split_terms(text or "")]

    def match(obj: Mapping[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(check(labels) for check in checks)

    return match


def field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return ""
        node = node[part]
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


def field_selector(text: str | None, res: Resource) -> Predicate:
    """Compile a field selector, rejecting paths this resource does not index."""
    checks: list[tuple[str, bool, str]] = []
    for term in _split_terms(text or ""):
        m = _EQ_TERM.match(term)
        if not m:
            raise ApiError(400, f"invalid field selector term {term!r}")
        path, op, value = m.groups()
        if not res.supports_field(path):
            raise ApiError(400, f'field label not supported: "{path}"')
        checks.append((path, op == "!=", value))

    def match(obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, p) == v) != neg for p, neg, v in checks)

    return match
