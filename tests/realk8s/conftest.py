"""The session's real test cluster, and when the tier runs.

The tier runs when asked for (`pytest -m realk8s`, or VGPU_REALK8S=1) and always in CI (CI=true).
Elsewhere it is skipped with the reason. Without Go, or as a non-root user, it is skipped locally;
in CI the same conditions fail the run: CI must never pass by skipping the real cluster.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests.realk8s import pods
from tests.realk8s.binary import Unavailable, build
from tests.realk8s.cluster import NodeSpec, RealCluster
from tests.realk8s.processes import free_port
from tests.realk8s.proxy import ServiceProxy

NODES = [NodeSpec("node-a"), NodeSpec("node-b")]
# The first test of the tier also starts the cluster (and builds the binary if needed).
TIER_TIMEOUT_S = 1800


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("realk8s"):
            item.add_marker(pytest.mark.timeout(TIER_TIMEOUT_S))


def _wanted(config: pytest.Config) -> bool:
    markexpr = str(config.getoption("markexpr") or "")
    asked = "realk8s" in markexpr and "not realk8s" not in markexpr
    return asked or os.environ.get("VGPU_REALK8S") == "1" or os.environ.get("CI") == "true"


def _unusable() -> str | None:
    if shutil.which("go") is None:
        return "Go (>= 1.26) is not on PATH; it builds the real components (hack/testcluster)"
    if os.geteuid() != 0:
        return "the kubelets need root (mount namespaces over /var/lib/kubelet)"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is missing"
    return None


def _not_available(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"realk8s tier cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"realk8s tier: {reason}")


@pytest.fixture(scope="session")
def realk8s_binary(request: pytest.FixtureRequest) -> Path:
    """The built hack/testcluster binary, or the tier's skip (locally) or failure (CI)."""
    if not _wanted(request.config):
        pytest.skip("realk8s tier runs with `pytest -m realk8s`, VGPU_REALK8S=1 or CI=true")
    reason = _unusable()
    if reason:
        _not_available(reason)
    try:
        binary, seconds = build()
    except Unavailable as err:
        _not_available(str(err))
    print(f"\nrealk8s: hack/testcluster built in {seconds:.1f}s", file=sys.stderr)
    return binary


def _session_cluster(binary: Path, nodes: list[NodeSpec], api_only: bool) -> Iterator[RealCluster]:
    root = Path(tempfile.mkdtemp(prefix="vk8s-"))
    cluster = RealCluster(root, binary, nodes)
    try:
        cluster.up(api_only=api_only)
        # CI's log names the version each run tested, as the API server reports it
        print(
            f"\nrealk8s: Kubernetes {cluster.admin.get('/version')['gitVersion']}", file=sys.stderr
        )
        yield cluster
    finally:
        cluster.down()
        if os.environ.get("VGPU_REALK8S_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def real_cluster(realk8s_binary: Path) -> Iterator[RealCluster]:
    """The whole cluster: API server, vgpu-scheduler, two kubelets with node agents, extender."""
    yield from _session_cluster(realk8s_binary, NODES, api_only=False)


@pytest.fixture(scope="session")
def real_apiserver(realk8s_binary: Path) -> Iterator[RealCluster]:
    """etcd and kube-apiserver alone (no nodes, no scheduler), for the fake's contract tests."""
    yield from _session_cluster(realk8s_binary, [], api_only=True)


@pytest.fixture
def two_replicas(real_cluster: RealCluster) -> Iterator[tuple[RealCluster, ServiceProxy]]:
    """extender-0 (leading) and extender-1 (following), kube-scheduler calling them through a
    proxy that sends new connections to the lease holder; afterwards the usual set-up again."""
    cluster = real_cluster
    pods.delete_all(cluster.admin)
    ports = {"extender-0": cluster.ports["extender"], "extender-1": free_port()}
    cluster.start_extender("extender-1", port=ports["extender-1"])

    def ready() -> int | None:
        leader = cluster.extender_leader()
        return ports.get(leader) if leader else None

    proxy = ServiceProxy(free_port(), ready).start()
    cluster.start_scheduler(extender_port=proxy.port)
    yield cluster, proxy
    pods.delete_all(cluster.admin)
    cluster.procs.stop("extender-1")
    proxy.stop()
    if not cluster.procs.alive("extender-0"):
        cluster.start_extender("extender-0")
    cluster.start_scheduler()
