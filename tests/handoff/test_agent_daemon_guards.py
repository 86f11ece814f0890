"""A running `NodeAgent`'s guards (real gRPC, real HTTP), each failing before its fix:
Allocate is refused without an assignment source, devices report no NUMA node unless asked, API
failures back off from the first request; and the flag checks of `vgpu node-agent` (a reconcile
interval below the minimum, a device list beyond gRPC's message size)."""

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
from tests.node.agent_harness import CORES, KEY, NODE, Box, make_box
from vgpu.adapters.fakegpu import FakeGpuBackend, parse_spec
from vgpu.adapters.kube.calls import KubeApi
from vgpu.agent.agent import NodeAgent
from vgpu.agent.config import AgentConfig
from vgpu.core.errors import ConfigError
from vgpu.daemons.node_agent import cli as node_cli


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


def test_without_an_assignment_source_allocate_is_refused(
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


def test_devices_report_no_numa_node_unless_asked(sockdir: Path) -> None:
    """Under a topology manager policy the kubelet narrows the devices it offers to the hinted
    NUMA node, so a GPU the extender chose elsewhere would never be offered. By default the
    agent reports no topology (the kubelet never narrows); `report_numa` turns it on."""
    for report, expected in ((False, set()), (True, {0, 1})):
        kubelet, agent = _kubeless(sockdir, allow_unassigned=True, report_numa=report)
        try:
            agent.start()
            seen = kubelet
            assert seen.wait_for(lambda: len(seen.devices(CORES)) == 200)  # noqa: B023
            conns = [c for c in kubelet._plugins.values() if c.resource == CORES]
            numa = {n for nodes in conns[0].numa.values() for n in nodes}
            assert numa == expected, f"report_numa={report}: devices carry NUMA nodes {numa}"
        finally:
            agent.stop()
            kubelet.stop()


def test_api_failures_back_off_from_the_first_request(box: Box) -> None:
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
    time.sleep(2.0)  # a window to count requests in, not a wait for an event
    gets = [r for r in box.api.requests if r.method == "GET" and r.path.endswith(f"/nodes/{NODE}")]
    # Capped exponential backoff from 0.1 s, each delay jittered down to half: the first four
    # delays are 0.05-0.1, 0.1-0.2, 0.2-0.4 and 0.4-0.8 s, so 4 to 6 reads fit in 2 s; it retries,
    # and does not hammer.
    assert 3 <= len(gets) <= 8, f"{len(gets)} GET node requests in 2 s"


def _flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    node_cli.add_parser(parser.add_subparsers(dest="command"))
    base = ["node-agent", "--fake-gpus", "1xT4", "--metrics-port", "0"]
    return parser.parse_args([*base, "--insecure-development-key", *argv])


@pytest.mark.parametrize("value", ["0", "-1", "0.5"])
def test_reconcile_interval_below_the_minimum_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match=r"--reconcile-s: .* minimum of 1 s"):
        node_cli.build(_flags("--reconcile-s", value))


@pytest.mark.parametrize("value", ["inf", "1e300"])
def test_reconcile_interval_no_wait_can_take_is_refused(value: str) -> None:
    """`Event.wait` raises OverflowError past the platform's time_t: the maintenance loop would
    end at its first wait (a traceback, then /healthz red) instead of the flag being refused."""
    with pytest.raises(ConfigError, match=r"--reconcile-s: .* at most 86400 s"):
        node_cli.build(_flags("--reconcile-s", value))


@pytest.mark.parametrize("value", ["inf", "1e300", "nan", "-1"])
def test_watchdog_interval_no_wait_can_take_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match=r"--watchdog-s: "):
        node_cli.build(_flags("--watchdog-s", value))


def test_a_device_list_beyond_grpc_message_size_is_refused(sockdir: Path) -> None:
    args = _flags("--memory-unit-mib", "1", "--device-plugin-dir", str(sockdir))
    args.fake_gpus = "8xH200"
    agent = node_cli.build(args)
    try:
        with pytest.raises(ConfigError, match="beyond the 4 MiB gRPC message limit"):
            agent.start()
    finally:
        agent.stop()
    args.memory_unit_mib = 256  # the default fits
    agent = node_cli.build(args)
    try:
        agent.start()
    finally:
        agent.stop()
