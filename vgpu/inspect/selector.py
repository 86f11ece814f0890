"""`-l/--selector`: Kubernetes label selectors, matched against saved snapshots too.

A live read passes the selector to the API server; a `--fake-cluster` file has no server, so the
report matches the nodes itself with the same grammar kubectl accepts: `key=value`, `key==value`,
`key!=value`, `key`, `!key`, `key in (a,b)` and `key notin (a,b)`, joined by commas. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from vgpu.core.errors import VgpuError

Labels = Mapping[str, str]
Test = Callable[[Labels], bool]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_TERM = re.compile(
    rf"\s*(?:(?P<not>!)\s*(?P<absent>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|=|!=)\s*(?P<value>{_VALUE})"
    rf"|\s+(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?)\s*(?:,|$)"
)


class SelectorError(VgpuError):
    """A label selector that cannot be parsed; the message shows where."""


def parse_selector(text: str) -> Test:
    """A predicate over a node's labels, or `SelectorError` naming the bad part."""
    tests: list[Test] = []
    position = 0
    while position < len(text):
        match = _TERM.match(text, position)
        if match is None or match.end() == position:
            raise SelectorError(
                f"--selector: cannot read {text[position:]!r}; use e.g. "
                "'gpu=a100,zone in (a,b),!spot'"
            )
        tests.append(_test(match))
        position = match.end()
    if not tests:
        raise SelectorError("--selector: empty; use e.g. 'nvidia.com/gpu.product=A100'")
    return lambda labels: all(test(labels) for test in tests)


def _test(match: re.Match[str]) -> Test:
    if match["absent"]:
        absent = match["absent"]
        return lambda labels: absent not in labels
    key, op = match["key"], match["op"] or match["set"]
    if op is None:
        return lambda labels: key in labels
    if op in ("in", "notin"):
        values = {v.strip() for v in match["values"].split(",") if v.strip()}
        wanted = op == "in"
        return lambda labels: (key in labels and labels[key] in values) == wanted
    value = match["value"]
    if op == "!=":
        return lambda labels: labels.get(key) != value
    return lambda labels: labels.get(key) == value
