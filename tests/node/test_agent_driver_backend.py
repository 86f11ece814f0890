"""The memory backend is visible where people look: a node label and a metric per GPU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node.agent_harness import NODE, Box, make_box
from tests.node.usage_scenario import scrape, value
from vgpu.core.errors import ConfigError
from vgpu.node.driver_mode import DriverLimits
from vgpu.node.grants import GrantMode, GrantSettings


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def test_a_node_without_driver_limits_labels_and_reports_its_mode(box: Box, tmp_path: Path) -> None:
    agent = box.start_agent(
        metrics_port=0,
        watchdog_s=0,
        grants=GrantSettings(mode=GrantMode.MPS),
        driver_limits=DriverLimits.AUTO,
        cgroupfs=tmp_path,  # no cgroup.controllers: cgroup v1 as far as the agent can tell
        nvml_library="libvgpu-absent-nvml.so.1",
    )
    assert not agent.memory_choice.driver_limits
    assert "cgroup v1" in agent.memory_choice.reason
    node = box.api.store.get("Node", None, NODE)
    assert node is not None
    assert node["metadata"]["labels"]["vgpu.io/gpu.memory-backend"] == "mps"
    samples = scrape(agent.metrics.port)
    for gpu in box.gpus:
        assert value(samples, "vgpu_gpu_memory_backend", gpu=gpu, backend="mps") == 1


def test_forcing_driver_limits_on_a_node_without_them_stops_the_agent(
    box: Box, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"driver-memory-limits on, but .*cgroup v1"):
        box.start_agent(
            watchdog_s=0,
            driver_limits=DriverLimits.ON,
            cgroupfs=tmp_path,
            nvml_library="libvgpu-absent-nvml.so.1",
        )
