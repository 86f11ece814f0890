"""A simulated node per test over the stand-in libraries, and the child processes driven on it.

Shared by the stand-ins' own tests (`tests/isolation/test_standin_*.py`) and the node agent's
NVML tests (`tests/node/test_nvml_standin.py`), which used to set the same node up twice. A
Python child loads the stand-ins by name through `LD_LIBRARY_PATH` (as pynvml and ctypes do), so
the test process itself never loads any CUDA or NVML library.
"""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.isolation.standins import Node, StandinGpu, cached_build

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def simulated_node(
    root: Path,
    gpus: Sequence[StandinGpu],
    *,
    sanitize: bool = False,
    omit: Sequence[str] = (),
) -> Iterator[Node]:
    """A fresh node of `gpus` over the build cached under `root` (one build per variant and
    process, so every test module shares it); its config and state are removed on exit."""
    node = Node(cached_build(root, sanitize=sanitize, omit=omit), list(gpus))
    try:
        yield node
    finally:
        node.close()


@contextmanager
def holding(
    node: Node, *steps: str, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A `cuprobe` that ran `steps` and holds what they took until the block ends; then
    SIGKILL, as the stand-in must give a killed process's memory back by itself. `env` adds
    to its environment (a stand-in knob such as VGPU_STANDIN_CONTEXT)."""
    proc = subprocess.Popen(
        [str(node.built.cuprobe), *steps, "hold"],
        env=node.env(env),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if not any(line.startswith("holding") for line in proc.stdout):
            raise AssertionError("cuprobe exited before holding")
        yield proc
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def python_child(
    node: Node, program: str, *args: str, stdin: bool = False
) -> subprocess.Popen[str]:
    """`program` in a child that sees the node's stand-ins and this checkout's `vgpu`."""
    return subprocess.Popen(
        [sys.executable, "-c", program, *args],
        env=node.env({"PYTHONPATH": str(ROOT)}),
        cwd=ROOT,
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(child: subprocess.Popen[str], timeout: float = 60) -> tuple[dict[str, Any], str]:
    """The child's printed `repr` of a dict, read back, and its stderr; it must exit 0."""
    out, err = child.communicate(timeout=timeout)
    assert child.returncode == 0, err
    result: dict[str, Any] = ast.literal_eval(out)
    return result, err


def run_python(node: Node, program: str, *args: str) -> tuple[dict[str, Any], str]:
    """`program` run to its end on the node (`python_child`, then `finished`)."""
    return finished(python_child(node, program, *args))


def with_xid(
    node: Node, child: subprocess.Popen[str], uuid: str, xid: int
) -> tuple[dict[str, Any], str]:
    """Inject `xid` on `uuid` once `child` prints "registered" (its event set exists, so the
    event cannot be missed), let it go on with a line on stdin, and read what it printed."""
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "registered"
    node.inject_xid(uuid, xid)
    child.stdin.write("\n")
    child.stdin.flush()
    return finished(child, timeout=30)
