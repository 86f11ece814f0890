"""Run a vgpu console script in a child process that behaves like a plain `pip install vgpu`.

The optional extras' packages are hidden by a meta-path finder installed before vgpu is
imported, so each import of them fails exactly as it does when they are not installed.
"""

from __future__ import annotations

import subprocess
import sys

EXTRAS = (
    "kubernetes",
    "grpc",
    "google",
    "yaml",
    "prometheus_client",
    "pynvml",
    "orjson",
    "h2",
    "hpack",
    "hyperframe",
)

_PRELUDE = f"""
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRAS!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
"""

SCRIPTS = {"vgpu": "vgpu.cli.main", "kubectl-inspect-vgpu": "vgpu.inspect.cli"}


def run_plain(script: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run `script ARGV` without the extras; returns the finished process (text output)."""
    code = _PRELUDE + f"from {SCRIPTS[script]} import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60
    )
