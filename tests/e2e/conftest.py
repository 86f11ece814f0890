"""Fixtures for the end-to-end tests: a started cluster per test, stopped afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.driver import SchedulerDriver
from vgpu.api.resources import ResourceNames

ClusterFactory = Callable[..., tuple[Cluster, SchedulerDriver]]


@pytest.fixture
def make_cluster() -> Iterator[ClusterFactory]:
    """Start a cluster of {node name: fake GPU spec} with its scheduler driver."""
    started: list[tuple[Cluster, SchedulerDriver]] = []

    def make(
        nodes: dict[str, str], names: ResourceNames | None = None
    ) -> tuple[Cluster, SchedulerDriver]:
        cluster = Cluster(nodes, names=names)
        try:
            cluster.start()
        except BaseException:
            cluster.stop()
            raise
        pair = (cluster, SchedulerDriver(cluster))
        started.append(pair)
        return pair

    try:
        yield make
    finally:
        for cluster, driver in started:
            driver.close()
            cluster.stop()
