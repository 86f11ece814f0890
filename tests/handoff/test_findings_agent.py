"""Issue 10's findings 4, 6 and 7 against a running `NodeAgent` (real gRPC, real HTTP), and the
flag checks of `vgpu node-agent`. Each failed before the fix."""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubelet_standin.kubelet import FakeKubelet
from tests.node.agent_harness import CORES, KEY, NODE, Box, make_box, wait
from vgpu.adapters.fakegpu import FakeGpuBackend, parse_spec
from vgpu.adapters.kube import KubeApi
from vgpu.core.errors import ConfigError
from vgpu.daemons import node_cli
from vgpu.daemons.node_agent import AgentConfig, NodeAgent


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


@pytest.fixture
def sockdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vg"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _kubeless(sockdir: Path, **overrides: object) -> tuple[FakeKubelet, NodeAgent]:
    kubelet = FakeKubelet(sockdir)
    kubelet.start()
    config = AgentConfig(
        node_name=NODE,
        assignment_key=KEY,
        plugin_dir=sockdir,
        memory_unit_mib=1024,
        stop_grace_s=0.2,
        **overrides,  # type: ignore[arg-type]
    )
    backend = FakeGpuBackend(parse_spec("2xT4", seed=NODE, numa_nodes=2))
    return kubelet, NodeAgent(config, backend, None)


@pytest.mark.xfail(strict=True, reason="issue 10 finding 6: not fixed yet")
def test_finding6_without_an_assignment_source_allocate_is_refused(
    sockdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    kubelet, agent = _kubeless(sockdir)
    try:
        agent.start()
        assert kubelet.wait_for(lambda: len(kubelet.devices(CORES)) == 200)
        with pytest.raises(Exception, match="allow-unassigned"):
            kubelet.allocate(CORES, 40)
        assert "fail closed" in caplog.text.lower()
    finally:
        agent.stop()
        kubelet.stop()


@pytest.mark.xfail(strict=True, reason="issue 10 finding 4: not fixed yet")
def test_finding4_devices_report_no_numa_node_unless_asked(sockdir: Path) -> None:
    """Under a topology manager policy the kubelet narrows the devices it offers to the hinted
    NUMA node, so a GPU the extender chose elsewhere would never be offered. By default the
    agent reports no topology (the kubelet never narrows); `report_numa` turns it on."""
    kubelet, agent = _kubeless(sockdir, allow_unassigned=True)
    try:
        agent.start()
        assert kubelet.wait_for(lambda: len(kubelet.devices(CORES)) == 200)
        conns = [c for c in kubelet._plugins.values() if c.resource == CORES]
        assert conns and not conns[0].numa, "devices carry a NUMA node the kubelet narrows by"
    finally:
        agent.stop()
        kubelet.stop()


@pytest.mark.xfail(strict=True, reason="issue 10 finding 7: not fixed yet")
def test_finding7_api_failures_back_off_from_the_first_request(box: Box) -> None:
    box.api.inject("GET", f"/nodes/{NODE}", status=500, times=None)
    box.api.inject("GET", "/pods", status=403, times=None)
    client = box.api.api_client()
    box.clients.append(client)
    config = AgentConfig(
        node_name=NODE,
        assignment_key=KEY,
        plugin_dir=box.dir,
        pod_resources_socket=box.dir / "podres.sock",
        memory_unit_mib=1024,
        retry_s=0.1,
        stop_grace_s=0.2,
    )
    agent = NodeAgent(config, FakeGpuBackend.from_spec("2xT4", seed=NODE), KubeApi(client))
    box.agents.append(agent)
    box.api.clear_requests()
    agent.start()
    time.sleep(2.0)
    gets = [r for r in box.api.requests if r.method == "GET" and r.path.endswith(f"/nodes/{NODE}")]
    # Capped exponential backoff from 0.1 s: about 0.1 + 0.2 + 0.4 + 0.8 within 2 s.
    assert len(gets) <= 8, f"{len(gets)} GET node requests in 2 s"
    assert wait(lambda: True)


def _flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    node_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["node-agent", "--fake-gpus", "1xT4", *argv])


@pytest.mark.xfail(strict=True, reason="issue 10 finding 7: not fixed yet")
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--reconcile-s", "0"), "--reconcile-s"),
        (("--reconcile-s", "-1"), "--reconcile-s"),
        (("--memory-unit-mib", "1"), "4 MiB"),
    ],
)
@pytest.mark.xfail(strict=True, reason="issue 10 finding 7: not fixed yet")
def test_finding7_absurd_flags_are_refused_naming_the_limit(
    argv: tuple[str, ...], needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle):
        node_cli.build(_flags(*argv))
