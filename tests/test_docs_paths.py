"""Every repository path and module the docs name exists, and every link between the pages lands.

Pages went stale as files moved and nothing failed: one named a module after it was renamed,
another a results file that was never written. Here every `vgpu/...`, `tests/...`, `bench/...`,
`hack/...`, `docs/...` (and the other top-level folders') path in README.md, the pages under
docs/ and the folders' READMEs must exist, a `<trace>`-style placeholder standing for any name;
every `vgpu.x.y` they name must import (or be an attribute of what does); and every relative
link must reach its file and, with a `#fragment`, a heading of that page.
"""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted(ROOT.glob("*/README.md")),
    *sorted(ROOT.glob("charts/*/README.md")),
]

FOLDERS = ("vgpu", "tests", "bench", "hack", "docs", "vgpu-core", "charts", "daemonset", "examples")
PATH = re.compile(rf"(?<![\w./<>-])((?:{'|'.join(FOLDERS)})/[\w./<>*-]*[\w>*])")
NOT_PATHS = {
    "vgpu/vgpu": "the image's name (`kustomize edit set image`, the chart's image.repository)",
    "daemonset/vgpu-node-agent": "a kubectl kind/name (`kubectl rollout restart`)",
}
MODULE = re.compile(r"(?<![\w./-])(vgpu(?:\.[A-Za-z_]\w*)+)")
NOT_MODULES = ("vgpu.io",)  # the annotations' and resources' domain
FILE_SUFFIXES = {"yaml", "yml", "json", "md", "py", "sh", "csv", "conf"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(text: str) -> list[tuple[int, str, bool]]:
    """(line number, line, inside a code block) for each line of a page."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        out.append((number, line, fenced))
    return out


def named_paths(text: str) -> list[tuple[int, str]]:
    """The repository paths a page names, with their lines (code blocks included: a command
    naming a missing script is as stale as a sentence)."""
    return [
        (number, m.group(1).rstrip("."))
        for number, line, _ in prose(text)
        for m in PATH.finditer(line)
        if m.group(1).rstrip(".") not in NOT_PATHS
    ]


def named_modules(text: str) -> list[tuple[int, str]]:
    """The dotted `vgpu.` names a page uses, with their lines (a file name such as `vgpu.yaml`
    and the `vgpu.io` domain are not modules)."""
    return [
        (number, name)
        for number, line, _ in prose(text)
        for name in (m.group(1).rstrip(".") for m in MODULE.finditer(line))
        if not name.startswith(NOT_MODULES) and name.rsplit(".", 1)[-1] not in FILE_SUFFIXES
    ]


def resolves(name: str) -> bool:
    """Whether `name` is a module, or an attribute chain of the longest module it starts with."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for attribute in parts[end:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def exists(path: str) -> bool:
    """Whether `path` (relative to the repository, `<name>` and `*` standing for any name) is
    there."""
    pattern = re.sub(r"<[^>]*>", "*", path)
    if "*" in pattern:
        return any(ROOT.glob(pattern))
    return (ROOT / pattern).exists()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@functools.cache
def anchors(page: Path) -> set[str]:
    """The fragments a link to `page` may name (a repeated heading gets `-1`, `-2`, ...)."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    for _, line, fenced in prose(page.read_text()):
        if fenced or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(f"{base}-{n}" if n else base)
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Relative links of `page` whose file or heading is missing, named from `root`."""
    out = []
    for number, line, fenced in prose(page.read_text()):
        for m in [] if fenced else LINK.finditer(line):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:: outside the repository
            file, _, fragment = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                out.append(f"{page.relative_to(root)}:{number}: {target} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                out.append(f"{page.relative_to(root)}:{number}: {target} (no such heading)")
    return out


def test_every_path_the_docs_name_exists() -> None:
    named = [(page, n, p) for page in PAGES for n, p in named_paths(page.read_text())]
    assert len(named) > 100  # the pattern still finds the docs' paths
    missing = [f"{page.relative_to(ROOT)}:{n}: {p}" for page, n, p in named if not exists(p)]
    assert missing == [], "paths named in the docs that do not exist:\n" + "\n".join(missing)


def test_every_module_the_docs_name_imports() -> None:
    named = [(page, n, m) for page in PAGES for n, m in named_modules(page.read_text())]
    assert named  # the pattern still finds the docs' modules
    missing = [f"{page.relative_to(ROOT)}:{n}: {m}" for page, n, m in named if not resolves(m)]
    assert missing == [], "modules named in the docs that do not import:\n" + "\n".join(missing)


def test_every_relative_link_between_the_docs_lands() -> None:
    broken = [hit for page in PAGES for hit in broken_links(page)]
    assert broken == [], "links that land nowhere:\n" + "\n".join(broken)


def test_the_checks_tell_a_moved_file_a_placeholder_and_a_missing_heading_apart(
    tmp_path: Path,
) -> None:
    """The checks themselves: a path that moved is reported, a placeholder matches real files,
    a link to a missing heading or file is reported and one to a real heading is not."""
    text = "`vgpu/extender/views.py`, docs/results/claims_<trace>.json, image `vgpu/vgpu`.\n"
    named = [p for _, p in named_paths(text)]
    assert named == ["vgpu/extender/views.py", "docs/results/claims_<trace>.json"]
    assert not exists(named[0]) and exists(named[1])
    modules = "`vgpu.extender.views`, `vgpu.extender.answers.AnswerBook`, vgpu.yaml, vgpu.io/x"
    assert [m for _, m in named_modules(modules)] == [
        "vgpu.extender.views",
        "vgpu.extender.answers.AnswerBook",
    ]
    assert not resolves("vgpu.extender.views") and resolves("vgpu.extender.answers.AnswerBook")
    page = tmp_path / "page.md"
    page.write_text(
        "# HTTP/2 attacks, measured\n\n```sh\n# a comment, not a heading\n```\n"
        "[a](#nope) [b](#http2-attacks-measured) [c](gone.md)\n"
    )
    assert anchors(page) == {"http2-attacks-measured"}
    assert broken_links(page, tmp_path) == [
        "page.md:6: #nope (no such heading)",
        "page.md:6: gone.md (no such file)",
    ]
