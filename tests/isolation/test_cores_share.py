"""The cores share holds: a container's busy time on its GPU (the stand-in's device timeline, not
the test's wall clock) is its allowance, for every launch path, also beside a neighbour, and the
elastic allowance the agent writes into `limits` applies within one refill period."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.isolation.conftest import Cluster
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


@pytest.mark.parametrize("mode", ["ex", "coop", "graph"])
def test_extended_cooperative_and_graph_launches_are_throttled_too(
    timing_cluster: Cluster, mode: str
) -> None:
    assert share_of(timing_cluster, 30, mode) == pytest.approx(30, abs=5)


def busy_of(cluster: Cluster, pid: int) -> int:
    return sum(ns for (_, p), ns in cluster.node.usage().busy_ns.items() if p == pid)


def test_a_10_90_pair_splits_busy_time_1_to_9_within_10_percent(timing_cluster: Cluster) -> None:
    small = timing_cluster.admit([(0, 10, 256)])
    large = timing_cluster.admit([(0, 90, 256)])
    runs = [spin(timing_cluster, small), spin(timing_cluster, large)]
    outs = [r.communicate(timeout=60)[0].split() for r in runs]
    a, b = (busy_of(timing_cluster, int(out[1])) for out in outs)  # "pid N" comes first
    assert a / b == pytest.approx(1 / 9, rel=0.10)


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
    starts it is back at 20 one refill period (100 ms) after the file changes."""
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
        assert busy_rate(c, pid, 1.5) == pytest.approx(20, abs=5)
    finally:
        for p in (runner, neighbour):
            if p is not None:
                p.kill()
                p.communicate(timeout=30)
