"""Tiny shared libraries built by the test's C compiler, for the agent's interposer checks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vgpu.node.elf_symbols import CUDA_HOOKS

CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler to build a test library")


def build_library(directory: Path, name: str, functions: list[str]) -> Path:
    """A shared library defining `functions` (and one undefined reference, one static)."""
    source = directory / f"{name}.c"
    body = "".join(f"int {f}(void) {{ return {n}; }}\n" for n, f in enumerate(functions))
    source.write_text(
        body + "extern int elsewhere(void);\nstatic int hidden(void) { return elsewhere(); }\n"
        "int (*keep)(void) = hidden;\n"
    )
    out = directory / f"{name}.so"
    assert CC is not None
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(out), str(source)], check=True)
    return out


def hook_libraries(directory: Path) -> dict[str, Path]:
    """`hooks`: exports the CUDA calls an interposer hooks; `release`: only `dlsym`."""
    return {
        "hooks": build_library(directory, "libhooks", [*CUDA_HOOKS, "dlsym_wrapper"]),
        "release": build_library(directory, "librelease", ["dlsym"]),
    }
