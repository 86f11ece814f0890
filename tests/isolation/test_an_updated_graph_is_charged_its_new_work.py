"""An executable graph whose work changes is charged the new work, not its old measurements.

A graph launch is charged the smallest of its executable graph's recent measurements (events
also time whatever else the GPU ran). NVIDIA lets a program change what an executable graph runs
without a new handle: cuGraphExecUpdate, cuGraphExecKernelNodeSetParams, cuGraphExecNodeSetParams
and cuGraphExecChildGraphNodeSetParams "only affect future launches of hGraphExec" (CUDA Driver
API reference, Graph Management), and a new executable graph may get a destroyed one's address.
XLA and JAX update one executable graph every step: a program that runs short work on it, then
updates it to long work, must be held to its share, not charged the short runs' time for the
long ones. Busy time is the stand-in's device timeline (`programs/graphupdate.c` drives it)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.isolation.conftest import Build, Cluster, build_program
from tests.isolation.standins import GIB, Node, node_gpus
from tests.isolation.test_launch_paths import share_of

SECONDS = "3"
SHORT_US = "50"
LONG_US = "2000"
HOWS = ["update", "kernel", "node", "child", "recreate"]


@pytest.fixture(scope="session")
def graphupdate(plain_build: Build) -> Path:
    return build_program(plain_build, "graphupdate")


@pytest.fixture
def node(plain_build: Build) -> Iterator[Node]:
    n = Node(plain_build.standins, node_gpus(1, memory=GIB))
    try:
        yield n
    finally:
        n.close()


def lines_of(out: str) -> dict[str, int]:
    return {name: int(value) for name, value in (line.split() for line in out.splitlines())}


@pytest.mark.parametrize("how", HOWS)
def test_standin_an_updated_executable_graph_runs_its_new_work(
    node: Node, graphupdate: Path, how: str
) -> None:
    """No interposer: every step takes 8 short and 4 long kernels of device time, so each way of
    changing the executable graph reached its future launches (and only those)."""
    done = subprocess.run(
        [str(graphupdate), how, "0.2", SHORT_US, LONG_US],
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    steps = lines_of(done.stdout)["steps"]
    assert steps >= 1
    step_ns = (8 * int(SHORT_US) + 4 * int(LONG_US)) * 1000
    assert sum(node.usage().busy_ns.values()) == steps * step_ns


@pytest.mark.parametrize("how", HOWS)
def test_a_graph_updated_from_short_to_long_work_every_step_is_held_to_its_share(
    timing_cluster: Cluster, graphupdate: Path, how: str
) -> None:
    """Each step: 8 launches of one short kernel, an update to a kernel 40 times longer, 4
    launches; charged from the graph's old measurements the long launches would pass as short
    ones and the container would keep the GPU nearly always busy."""
    share, out, _ = share_of(timing_cluster, [str(graphupdate), how, SECONDS, SHORT_US, LONG_US])
    lines = lines_of(out)
    assert lines["steps"] >= 10
    if how == "recreate":  # the case it pins: the new executable graph reuses the old address
        assert lines["reused"] >= lines["steps"] // 2
    assert share == pytest.approx(30, abs=5)


def test_updating_and_destroying_executable_graphs_under_a_limit_breaks_nothing(
    cluster: Cluster,
) -> None:
    """Every update path through the interposer (plain and ASan+UBSan builds) answers as the
    driver does and the program runs to its end."""
    program = build_program(cluster.build, "graphupdate")
    container = cluster.admit([(0, 30, 256)])
    for how in HOWS:
        command = [str(program), how, "0.3", SHORT_US, LONG_US]
        done = cluster.sandbox.run(container, command, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert lines_of(done.stdout)["steps"] >= 1
