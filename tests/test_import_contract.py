"""The pure core stays pure: an AST check equivalent to the import-linter contract.

`.importlinter` enforces the same rule in CI through `lint-imports`; this test keeps the rule in the
test suite too, and fails with the offending file and line.
"""

import ast
from pathlib import Path

import pytest

FORBIDDEN = (
    "grpc",
    "google.protobuf",
    "kubernetes",
    "pynvml",
    "prometheus_client",
    "http.server",
    "socketserver",
    "aiohttp",
    "urllib3",
    "requests",
    "socket",
    "subprocess",
)
PURE = ("vgpu/core", "vgpu/sim", "vgpu/node")
ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_import_no_io_libraries(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
            if name.startswith("vgpu.") and name.split(".")[1] in (
                "adapters",
                "daemons",
                "extender",
                "cli",
                "inspect",
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name} (an outer layer)")
    assert offenders == []


def test_the_check_detects_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom kubernetes import client\n")
    assert (2, "kubernetes") in _imports(bad)
