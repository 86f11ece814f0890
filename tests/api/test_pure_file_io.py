"""The pure packages do no file I/O: files are read and written by adapters at the edges.

The pure packages are those `.importlinter`'s `pure-core` contract names, so a new one is scanned
as soon as it is declared pure. The scan reads each module's syntax tree and fails on any call
that opens, reads, writes, lists, inspects or removes a file: the builtin `open`; the `os` and
`os.path` functions that touch the file system; the `pathlib` methods that do (named so that no
string or dataclass method shares the name); modules whose use is file work (`tempfile`,
`shutil`, `glob`, `fileinput`, `mmap`, `importlib.resources`); and matplotlib's `savefig`.
`.importlinter` keeps the I/O libraries out; this keeps the standard library's file calls out,
which no import contract can see.

No allow-list: every pure module passes without one. A file's name (`Path`, `PurePosixPath`
arithmetic) is not I/O and is allowed.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

OS_FILE_FUNCTIONS = frozenset(
    [
        "open",
        "fdopen",
        "read",
        "write",
        "close",
        "replace",
        "rename",
        "renames",
        "remove",
        "unlink",
        "rmdir",
        "removedirs",
        "mkdir",
        "makedirs",
        "listdir",
        "scandir",
        "walk",
        "fwalk",
        "stat",
        "lstat",
        "fstat",
        "fsync",
        "fdatasync",
        "chmod",
        "chown",
        "lchown",
        "link",
        "symlink",
        "readlink",
        "truncate",
        "ftruncate",
        "access",
        "utime",
        "mkfifo",
        "mknod",
        "statvfs",
    ]
)
OS_PATH_FUNCTIONS = frozenset(
    [
        "exists",
        "lexists",
        "isfile",
        "isdir",
        "islink",
        "ismount",
        "getsize",
        "getmtime",
        "getatime",
        "getctime",
        "samefile",
        "realpath",
    ]
)
PATH_METHODS = frozenset(
    [
        "open",
        "read_text",
        "write_text",
        "read_bytes",
        "write_bytes",
        "mkdir",
        "rmdir",
        "unlink",
        "touch",
        "iterdir",
        "glob",
        "rglob",
        "walk",
        "stat",
        "lstat",
        "exists",
        "is_file",
        "is_dir",
        "is_symlink",
        "is_mount",
        "is_socket",
        "is_fifo",
        "chmod",
        "lchmod",
        "symlink_to",
        "hardlink_to",
        "readlink",
        "samefile",
        "resolve",
        "savefig",
    ]
)
"""Method names that only file-touching calls have in these packages. Left out because other
types share them: `replace` (`str`, `dataclasses`), `rename`, and `owner`/`group` (`re.Match`);
`os.replace` and `os.rename` are caught as `os` functions."""
FILE_MODULES = frozenset({"tempfile", "shutil", "glob", "fileinput", "mmap", "importlib.resources"})


def pure_packages() -> list[str]:
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    return config["importlinter:contract:pure-core"]["source_modules"].split()


def _dotted(node: ast.expr) -> str:
    """`a.b.c` for an attribute chain on a name; "" for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _call_problem(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return "open()" if func.id == "open" else None
    if not isinstance(func, ast.Attribute):
        return None
    dotted = _dotted(func)
    if dotted.startswith("os.path.") and func.attr in OS_PATH_FUNCTIONS:
        return dotted + "()"
    if dotted.startswith("os.") and dotted.count(".") == 1 and func.attr in OS_FILE_FUNCTIONS:
        return dotted + "()"
    if func.attr in PATH_METHODS:
        return f".{func.attr}()"
    return None


def _import_problems(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [f"import {a.name}" for a in node.names if a.name in FILE_MODULES]
    module = node.module or ""
    names = [a.name for a in node.names]
    if module in FILE_MODULES:
        return [f"from {module} import ..."]
    if module == "importlib" and "resources" in names:
        return ["from importlib import resources"]
    if module == "os":
        return [f"from os import {n}" for n in names if n in OS_FILE_FUNCTIONS]
    return []


def file_io(source: str) -> list[tuple[int, str]]:
    """Every file-touching call or import in `source`: (line, what)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            problem = _call_problem(node)
            if problem is not None:
                found.append((node.lineno, problem))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found.extend((node.lineno, p) for p in _import_problems(node))
    return found


@pytest.mark.parametrize(
    "snippet",
    [
        "open('f')",
        "import os\nos.replace(a, b)",
        "import os\nos.fsync(f)",
        "import os\nos.listdir(d)",
        "import os\nos.scandir(d)",
        "import os\nos.path.exists(p)",
        "path.read_text()",
        "path.write_bytes(b'')",
        "Path('x').open('rb')",
        "(root / 'a').mkdir(parents=True)",
        "root.glob('*.csv')",
        "p.stat().st_mtime",
        "p.parent.is_dir()",
        "fig.savefig(path)",
        "import tempfile",
        "import shutil",
        "from importlib import resources",
        "from os import replace",
    ],
)
def test_the_scan_finds_each_kind_of_file_call(snippet: str) -> None:
    assert file_io(snippet), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "text.replace('a', 'b')",
        "from dataclasses import replace\nreplace(x, a=1)",
        "Path('/run') / 'vgpu'",
        "PurePosixPath(p).is_absolute()",
        "import os\nos.cpu_count()",
        "import os\nos.sched_getaffinity(0)",
        "text.splitlines()",
    ],
)
def test_the_scan_lets_names_and_strings_be(snippet: str) -> None:
    assert file_io(snippet) == [], snippet


def test_the_pure_packages_are_the_contracts() -> None:
    assert {"vgpu.core", "vgpu.api", "vgpu.sim", "vgpu.node", "vgpu.dra"} <= set(pure_packages())


@pytest.mark.parametrize("package", pure_packages())
def test_a_pure_package_does_no_file_io(package: str) -> None:
    root = REPO / package.replace(".", "/")
    found = [
        f"{path.relative_to(REPO)}:{line} {what}"
        for path in sorted(root.rglob("*.py"))
        for line, what in file_io(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "file I/O belongs in an adapter (docs/architecture.md): " + str(found)
