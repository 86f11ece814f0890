"""No code, test or page cites an issue by its number: each states the reason instead.

A citation of a tracker's issue and finding numbers sends the reader somewhere they may not be
able to go, and says nothing once there; the sentence that says what went wrong, or what a rule
protects, needs no tracker (docs/testing.md, "Adding a test").
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("vgpu", "tests", "docs", "vgpu-core", "bench", "hack")
SUFFIXES = {".py", ".md", ".c", ".h", ".sh", ".yaml", ".txt"}
CITATION = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)


def citations(text: str) -> list[tuple[int, str]]:
    """(line number, line) for each line of `text` citing an issue by number."""
    return [
        (n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if CITATION.search(line)
    ]


def sources() -> list[Path]:
    """The project's own text files under FOLDERS, plus the top-level README."""
    found = [ROOT / "README.md"]
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            parts = path.relative_to(ROOT).parts
            if path.suffix in SUFFIXES and not any(p.startswith((".", "__")) for p in parts):
                found.append(path)
    return found


def test_no_file_cites_an_issue_by_number() -> None:
    files = sources()
    assert len(files) > 500
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line}"
        for path in files
        for n, line in citations(path.read_text(errors="replace"))
    ]
    assert hits == [], "state the reason instead of the issue number:\n" + "\n".join(hits)


def test_a_citation_is_found_in_any_spelling() -> None:
    number = "2" + "5"  # spelled apart, so this file cites nothing itself
    text = f"a (Issue {number}, finding 7)\nb issues {number}\nc #{number}\nd the issue is 5 s\n"
    assert [n for n, _ in citations(text)] == [1, 2]
