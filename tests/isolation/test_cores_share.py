"""The cores share holds: a container's busy time on its GPU (the stand-in's device timeline, not
the test's wall clock) is its allowance, for every launch path, also beside a neighbour, and the
elastic allowance the agent writes into `limits` applies within one refill period."""

from __future__ import annotations

import subprocess

import pytest

from tests.isolation.conftest import Cluster
from tests.isolation.sandbox import Container

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
