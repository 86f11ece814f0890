"""The cores share holds: a container's busy time on its GPU (the stand-in's device timeline, not
the test's wall clock) is its allowance, for every launch path; the elastic allowance the agent
writes into `limits` applies within one refill period; and busy neighbours, whose events also
time each other's turns on the time-sliced GPU, each get their guarantee with the agent's
outer loop running."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.isolation.conftest import ROOT, Cluster
from tests.isolation.sandbox import Container
from vgpu.core.elastic import ElasticShare, allowances
from vgpu.node.limits_file import DeviceLimit, render_limits

SECONDS = "3"
KERNEL_US = "2000"


def busy_ns(cluster: Cluster, uuid: str) -> int:
    return sum(ns for (gpu, _), ns in cluster.node.usage().busy_ns.items() if gpu == uuid)


def spin(cluster: Cluster, container: Container, mode: str = "kernel") -> subprocess.Popen[str]:
    command = ["nice", "-n", "5", str(cluster.build.cuload), "spin", "0", SECONDS, KERNEL_US, mode]
    return cluster.sandbox.popen(container, command)


def window_ns(process: subprocess.Popen[str]) -> int:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, out + err
    return int(out.split()[-1])


def share_of(cluster: Cluster, cores: int, mode: str = "kernel") -> float:
    container = cluster.admit([(0, cores, 256)])
    window = window_ns(spin(cluster, container, mode))
    return 100 * busy_ns(cluster, cluster.uuids[0]) / window


@pytest.mark.parametrize("cores", [10, 30, 50, 70, 90])
def test_a_cores_share_is_held_within_5_points_of_busy_time(
    timing_cluster: Cluster, cores: int
) -> None:
    assert share_of(timing_cluster, cores) == pytest.approx(cores, abs=5)


@pytest.mark.parametrize("mode", ["streams", "streams8"])
def test_kernels_on_several_streams_at_once_are_charged_their_time_on_the_gpu_once(
    timing_cluster: Cluster, mode: str
) -> None:
    """Four or eight streams' spans overlap on the GPU; charged whole, each stream's span charged
    the shared time once per stream, so a 30 % share got about 11 on four streams and less on
    eight without the agent's outer loop to make up for it. Charging only what no earlier launch
    covered holds the share by itself, as for one stream."""
    assert share_of(timing_cluster, 30, mode) == pytest.approx(30, abs=5)


@pytest.mark.parametrize("mode", ["ex", "coop", "graph"])
def test_extended_cooperative_and_graph_launches_are_throttled_too(
    timing_cluster: Cluster, mode: str
) -> None:
    assert share_of(timing_cluster, 30, mode) == pytest.approx(30, abs=5)


def busy_of(cluster: Cluster, pid: int) -> int:
    return sum(ns for (_, p), ns in cluster.node.usage().busy_ns.items() if p == pid)


def limits_text(c: Cluster, share: ElasticShare, allowance: int) -> str:
    """The limits file the agent writes for a container holding `share` on GPU 0."""
    return render_limits([DeviceLimit(c.uuids[0], 256 << 20, share.cores, share.limit, allowance)])


def busy_rate(c: Cluster, pid: int, seconds: float) -> float:
    """Percent of the GPU a process kept busy over the next `seconds`."""
    start, t0 = busy_of(c, pid), time.monotonic()
    time.sleep(seconds)
    return 100 * (busy_of(c, pid) - start) / ((time.monotonic() - t0) * 1e9)


def test_elastic_limit_is_reached_alone_and_given_back_within_one_period(
    timing_cluster: Cluster,
) -> None:
    """Allowances from the agent's pure rule (vgpu.core.elastic), written as the agent writes
    them: alone, a 20-core container with cores-limit 60 gets 60; when its 80-core neighbour
    starts it is back at no more than 20 one refill period (100 ms) after the file changes."""
    c = timing_cluster
    mine, theirs = ElasticShare("a", 20, 60, True), ElasticShare("b", 80, 80, False)
    a, b = c.admit([(0, 20, 256)], cores_limit=60), c.admit([(0, 80, 256)])
    alone = allowances([mine, theirs])
    assert alone == {"a": 60, "b": 80}
    a.write_limits(limits_text(c, mine, alone["a"]))
    runner = c.sandbox.popen(a, [str(c.build.cuload), "spin", "0", "4", KERNEL_US, "kernel"])
    neighbour = None
    try:
        assert runner.stdout is not None
        pid = int(runner.stdout.readline().split()[1])
        time.sleep(0.3)
        assert busy_rate(c, pid, 1.0) == pytest.approx(60, abs=5)
        both = allowances([mine, ElasticShare("b", 80, 80, True)])
        assert both == {"a": 20, "b": 80}
        a.write_limits(limits_text(c, mine, both["a"]))
        b.write_limits(limits_text(c, theirs, both["b"]))
        neighbour = spin(c, b)
        time.sleep(0.1)  # one refill period
        # at most 20: its events also time the neighbour's turns, so without the agent's outer
        # loop (test_busy_neighbours_each_get_their_guarantee_...) it gets less, never more
        assert busy_rate(c, pid, 1.5) <= 20 + 5
    finally:
        for p in (runner, neighbour):
            if p is not None:
                p.kill()
                p.communicate(timeout=30)


CORRECT_S = "0.3"  # the agent's correction period, scaled down from 0.5 s to keep the test short
SETTLE_S = 3.5
WINDOWS = 3  # measuring windows after the settling time, for a loaded machine
MEASURE_S = 2.0


@contextmanager
def elastic_agent(c: Cluster, correct_s: str = CORRECT_S) -> Iterator[None]:
    """The agent's elastic duty with its NVML outer loop (`off`: without), on the simulated
    node."""
    agent = subprocess.Popen(
        [sys.executable, "-m", "tests.isolation.elastic_agent", str(c.state), correct_s],
        env=c.node.env({"PYTHONPATH": str(ROOT)}),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout is not None and agent.stdout.readline().strip() == "ready"
        yield
    finally:
        agent.communicate(timeout=30)  # closing stdin stops it


def busy_rates(c: Cluster, pids: list[int], seconds: float) -> tuple[list[float], float]:
    """Percent of GPU 0 each process kept busy over the next `seconds` (the kernels that ran on
    its timeline then), and the percent it was idle."""
    t0 = time.monotonic_ns()  # CLOCK_MONOTONIC, the stand-in's clock
    time.sleep(seconds)  # a measuring window, not a wait for an event
    t1 = time.monotonic_ns()
    out = c.node.ctl("window", c.uuids[0], str(t0), str(t1), *map(str, pids)).split()
    *each, total = (100 * int(ns) / (t1 - t0) for ns in out)
    return each, 100 - total


def container_rates(
    c: Cluster, pids: list[int], owners: list[int], seconds: float
) -> tuple[list[float], float]:
    """As `busy_rates`, summed per container: process i belongs to container `owners[i]`."""
    each, idle = busy_rates(c, pids, seconds)
    per = [0.0] * (max(owners) + 1)
    for rate, owner in zip(each, owners, strict=True):
        per[owner] += rate
    return per, idle


def held(split: tuple[int, ...], shares: list[float], idle: float) -> bool:
    """Each container within 3 points of its guarantee (or above) and the GPU idle under 5 %;
    a container alone, within 3 points of its allowance either way (the GPU idles the rest)."""
    if len(split) == 1:
        return abs(shares[0] - split[0]) <= 3
    return idle < 5 and all(g >= want - 3 for g, want in zip(shares, split, strict=True))


def settled_shares(
    c: Cluster, split: tuple[int, ...], modes: tuple[str, ...], processes: int = 1
) -> tuple[list[float], float]:
    """Busy containers of these guarantees, container i launching as cuload's `modes[i]` from
    `processes` processes (the first container; the others from one), beside the agent's outer
    loop: their shares and the idle percent once settled. On a loaded machine convergence takes
    longer: the first of a few windows in a row that holds counts, and the last one is reported
    when none does."""
    containers = [c.admit([(0, cores, 256)]) for cores in split]
    seconds = str(SETTLE_S + WINDOWS * MEASURE_S + 1)
    owners = [0] * processes + list(range(1, len(split)))  # each process's container
    with elastic_agent(c):
        argvs = [[str(c.build.cuload), "spin", "0", seconds, KERNEL_US, modes[i]] for i in owners]
        runs = [c.sandbox.popen(containers[i], argv) for i, argv in zip(owners, argvs, strict=True)]
        try:
            pids = [int(r.stdout.readline().split()[1]) for r in runs if r.stdout is not None]
            time.sleep(SETTLE_S)  # the outer loop converges (about ten corrections)
            for _ in range(WINDOWS):
                shares, idle = container_rates(c, pids, owners, MEASURE_S)
                if held(split, shares, idle):
                    break
        finally:
            for r in runs:
                r.kill()
                r.communicate(timeout=30)
    return shares, idle


@pytest.mark.parametrize("split", [(30, 70), (50, 50), (10, 90), (20, 30, 50)])
def test_busy_neighbours_each_get_their_guarantee_and_the_gpu_does_not_idle(
    timing_cluster: Cluster, split: tuple[int, ...]
) -> None:
    """Their events also time each other's turns on the GPU (time-sliced, as without MPS); the
    agent's outer loop corrects each container's scale from its real (NVML) share, so each gets
    its guarantee within 3 points and the GPU idles under 5 % of the time: the issue's four
    splits, 50/50 among them (the worst before the outer loop: about 30/30, the GPU 40 % idle)."""
    shares, idle = settled_shares(timing_cluster, split, ("kernel",) * len(split))
    for got, guaranteed in zip(shares, split, strict=True):
        assert got >= guaranteed - 3, (split, shares, idle)
    assert idle < 5, (split, shares, idle)


def test_a_container_launching_cuda_graphs_beside_a_busy_neighbour_gets_its_guarantee(
    timing_cluster: Cluster,
) -> None:
    """As PyTorch and vLLM run once captured: each cuGraphLaunch is measured and charged as a
    kernel launch is, and the outer loop corrects it the same (without it: about 18 / 57, the
    GPU 24 % idle)."""
    split = (30, 70)
    shares, idle = settled_shares(timing_cluster, split, ("graph", "kernel"))
    assert held(split, shares, idle), (split, shares, idle)


def test_a_container_of_two_busy_processes_beside_a_busy_neighbour_gets_its_guarantee(
    timing_cluster: Cluster,
) -> None:
    """Two processes are two contexts, time-sliced between themselves as well as with the
    neighbour, and share one budget: each one's events time the other's turns too. The agent
    sums NVML's per-process shares per container, so the container as a whole is corrected."""
    split = (30, 70)
    shares, idle = settled_shares(timing_cluster, split, ("kernel", "kernel"), processes=2)
    assert held(split, shares, idle), (split, shares, idle)


def test_a_container_on_four_streams_at_once_beside_a_busy_neighbour_gets_its_guarantee(
    timing_cluster: Cluster,
) -> None:
    """Its streams' spans overlap and also hold the neighbour's turns; the overlap is charged
    once and the outer loop's scale makes up for the turns, as for one stream."""
    split = (50, 50)
    shares, idle = settled_shares(timing_cluster, split, ("streams", "kernel"))
    assert held(split, shares, idle), (split, shares, idle)


def test_a_container_alone_on_four_streams_at_once_reaches_its_allowance_not_past_it(
    timing_cluster: Cluster,
) -> None:
    """With the agent's outer loop running too: its allowance within 3 points, never past it
    (when each stream's span was charged whole, the loop's scale had to make up for it)."""
    shares, _ = settled_shares(timing_cluster, (30,), ("streams",))
    assert 30 - 3 <= shares[0] <= 30 + 3, shares


def test_a_container_on_eight_streams_at_once_beside_a_busy_neighbour_gets_its_guarantee(
    timing_cluster: Cluster,
) -> None:
    """With each stream's span charged whole it would have needed twice the largest scale the
    `limits` contract allows (it got 36 of 50, the GPU 13 % idle); charged once, eight streams
    need the same correction as one."""
    split = (50, 50)
    shares, idle = settled_shares(timing_cluster, split, ("streams8", "kernel"))
    assert held(split, shares, idle), (split, shares, idle)


def test_a_container_alone_on_eight_streams_at_once_reaches_its_allowance_too(
    timing_cluster: Cluster,
) -> None:
    """With the agent's outer loop running too: its allowance within 3 points (when each
    stream's span was charged whole, it took a scale of 8,000, the contract's largest)."""
    shares, _ = settled_shares(timing_cluster, (30,), ("streams8",))
    assert 30 - 3 <= shares[0] <= 30 + 3, shares
