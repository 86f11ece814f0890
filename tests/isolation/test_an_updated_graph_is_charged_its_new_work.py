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

from pathlib import Path

import pytest

from tests.isolation.conftest import Build, Cluster, build_program
from tests.isolation.test_launch_paths import share_of

SECONDS = "3"
SHORT_US = "50"
LONG_US = "2000"


@pytest.fixture(scope="session")
def graphupdate(plain_build: Build) -> Path:
    return build_program(plain_build, "graphupdate")


@pytest.mark.parametrize("how", ["update", "kernel", "node", "child", "recreate"])
def test_a_graph_updated_from_short_to_long_work_every_step_is_held_to_its_share(
    timing_cluster: Cluster, graphupdate: Path, how: str
) -> None:
    """Each step: 8 launches of one short kernel, an update to a kernel 40 times longer, 4
    launches; charged from the graph's old measurements the long launches would pass as short
    ones and the container would keep the GPU nearly always busy."""
    share, out, _ = share_of(timing_cluster, [str(graphupdate), how, SECONDS, SHORT_US, LONG_US])
    lines = dict(line.split() for line in out.splitlines())
    assert int(lines["steps"]) >= 10
    if how == "recreate":  # the case it pins: the new executable graph reuses the old address
        assert int(lines["reused"]) >= int(lines["steps"]) // 2
    assert share == pytest.approx(30, abs=5)
