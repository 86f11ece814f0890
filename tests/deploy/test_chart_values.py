"""`helm show values` is the chart's reference: every value says in one comment what it does (and
its unit and why the default), and every script or document it cites exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "charts" / "vgpu" / "values.yaml"

DATA_KEYS = frozenset({"nodeSelector", "resources", "labels", "annotations"})
"""Keys whose children are Kubernetes data (a node label, a resource quantity), not chart values:
the key itself is explained, its children need not be."""

KEY = re.compile(r"^(?P<indent> *)(?P<dash>- )?(?P<key>[A-Za-z_][\w./-]*):(?P<rest>.*)$")


def uncommented(lines: list[str]) -> list[str]:
    """Dotted names of values with neither a comment just above (same indentation) nor one on
    their line. A key holding only further keys is a section: its keys carry the comments."""
    missing: list[str] = []
    stack: list[tuple[int, str, bool]] = []  # (indentation, key, inside data or a list item)
    for i, line in enumerate(lines):
        match = KEY.match(line)
        if match is None or line.lstrip().startswith("#"):
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        exempt = bool(match["dash"]) or bool(stack and (stack[-1][2] or stack[-1][1] in DATA_KEYS))
        stack.append((indent, match["key"], exempt))
        if exempt or _is_section(lines, i, match):
            continue
        above = lines[i - 1] if i else ""
        if "#" not in match["rest"] and not above.startswith(match["indent"] + "#"):
            missing.append(".".join(key for _, key, _ in stack))
    return missing


def _is_section(lines: list[str], i: int, match: re.Match[str]) -> bool:
    if match["rest"].strip() or match["key"] in DATA_KEYS:
        return False
    following = next(
        (x for x in lines[i + 1 :] if x.strip() and not x.lstrip().startswith("#")), ""
    )
    return not following.lstrip().startswith("- ")


def test_every_value_has_a_comment() -> None:
    assert uncommented(VALUES.read_text().splitlines()) == []


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("a:\n  # why\n  b: 1\n  c: 2\n", ["a.c"]),
        ("# why\nlist:\n  - {x: 1}\nn: 3  # why\n", []),
        ("r:\n  # why\n  resources:\n    limits:\n      cpu: 1\nq:\n  - 1\n", ["q"]),
    ],
)
def test_the_comment_check_finds_a_bare_value(text: str, missing: list[str]) -> None:
    assert uncommented(text.splitlines()) == missing


def test_every_path_the_values_cite_exists() -> None:
    cited = re.findall(r"\b((?:hack|docs|charts|daemonset|bench)/[\w./-]*\w)", VALUES.read_text())
    assert cited, "the pattern no longer finds the values' references"
    assert [path for path in cited if not (ROOT / path).exists()] == []
