"""Every way a process starts GPU work is charged to its cores share, and measuring never breaks
the program: CUDA graph capture in every mode, launches after a primary-context reset and in a
process's many contexts, memsets, the deprecated cuLaunchGrid, and a driver that cannot create
events. Busy time is the stand-in's device timeline (`programs/launchpaths.c` drives it)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.isolation.conftest import PROGRAMS, Build
from tests.isolation.standins import GIB, Node, Standins, node_gpus

SECONDS = "3"
KERNEL_US = "2000"
UNSUPPORTED, INVALIDATED, CAPTURED_EVENT = 900, 901, 907


def compile_launchpaths(built: Standins, out: Path) -> Path:
    source = PROGRAMS / "launchpaths.c"
    flags = ["-Wall", "-Wextra", "-Werror", "-O1", "-o", str(out), str(source)]
    subprocess.run(["cc", *flags, f"-L{built.dir}", "-l:libcuda.so.1", "-lpthread"], check=True)
    return out


@pytest.fixture(scope="session")
def launchpaths(plain_build: Build) -> Path:
    """The program, next to cuload (a path the sandbox shows)."""
    return compile_launchpaths(plain_build.standins, plain_build.cuload.parent / "launchpaths")


@pytest.fixture
def node(plain_build: Build) -> Iterator[Node]:
    n = Node(plain_build.standins, node_gpus(1, memory=GIB))
    try:
        yield n
    finally:
        n.close()


# ---- the stand-in's stream capture, against the documented rules (no interposer) ----


@pytest.mark.parametrize(
    ("capture", "thread", "who", "query", "ended"),
    [
        ("global", "global", "same", UNSUPPORTED, INVALIDATED),
        ("thread", "global", "same", UNSUPPORTED, INVALIDATED),
        ("relaxed", "global", "same", 0, 0),
        ("global", "relaxed", "same", 0, 0),
        ("global", "global", "other", UNSUPPORTED, INVALIDATED),
        ("global", "thread", "other", 0, 0),
        ("thread", "global", "other", 0, 0),
        ("global", "relaxed", "other", 0, 0),
        ("relaxed", "relaxed", "captured", CAPTURED_EVENT, INVALIDATED),
    ],
)
def test_standin_event_query_during_capture_follows_the_interaction_modes(
    node: Node, launchpaths: Path, capture: str, thread: str, who: str, query: int, ended: int
) -> None:
    """cuThreadExchangeStreamCaptureMode's rules: a potentially unsafe call is prohibited by the
    thread's own non-relaxed capture, and in GLOBAL mode by another thread's GLOBAL capture; a
    prohibited call invalidates the capture; a captured event conflicts in every mode."""
    done = subprocess.run(
        [str(launchpaths), "query", capture, thread, who],
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = dict(line.split() for line in done.stdout.splitlines())
    assert (int(lines["query"]), int(lines["capture"])) == (query, ended)
