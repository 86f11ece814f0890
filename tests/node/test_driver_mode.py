"""The node's memory backend: the driver's per-cgroup limits where every GPU has them, else the
interposer, announced in one log line that says why; `on` refuses a node without them."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.adapters.dmem import gather_facts, memory_backend
from vgpu.adapters.fakegpu import parse_spec
from vgpu.adapters.vgpu_core_install import choose_mode
from vgpu.core.errors import ConfigError
from vgpu.daemons.flags.driver import add_driver_flags, driver_settings
from vgpu.node.driver_limits import dmem_region
from vgpu.node.driver_mode import (
    DriverLimits,
    DriverLimitsUnavailable,
    GpuFacts,
    NodeFacts,
    choose,
    gaps,
)
from vgpu.node.grants import GrantMode

REGION = "nvidia/0000:3b:00.0/vidmem"
READY = NodeFacts("615.71.09", True, True, True, (GpuFacts("GPU-a", REGION, False, True),))


def test_a_node_with_everything_uses_the_driver_limits() -> None:
    choice = choose(DriverLimits.AUTO, READY)
    assert choice.driver_limits
    assert "driver 615.71.09" in choice.reason and "dmem" in choice.reason


@pytest.mark.parametrize(
    ("facts", "cause"),
    [
        (replace(READY, driver_version="580.95.05"), "driver 580.95.05 < r615"),
        (replace(READY, nvml_limits=False), "lacks nvmlDeviceSetMemoryLimits_v1"),
        (replace(READY, cgroup_v2=False), "cgroup v1"),
        (replace(READY, gpus=(GpuFacts("GPU-a", REGION, True, True),)), "GPU-a has MIG on"),
        (replace(READY, gpus=(GpuFacts("GPU-a", REGION, False, False),)), "does not list"),
        (replace(READY, gpus=()), "no GPU"),
        (replace(READY, kubepods=False), "no kubepods cgroup"),
    ],
)
def test_a_missing_capability_falls_back_with_one_log_line(
    facts: NodeFacts, cause: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vgpu.adapters.dmem")
    choice = memory_backend(DriverLimits.AUTO, facts, "vgpu-core")
    assert not choice.driver_limits
    lines = [r.getMessage() for r in caplog.records if r.name == "vgpu.adapters.dmem"]
    assert len(lines) == 1
    assert lines[0].startswith("memory backend: vgpu-core, cores: vgpu-core")
    assert cause in lines[0]


def test_forcing_the_driver_limits_on_a_node_without_them_names_what_is_missing() -> None:
    with pytest.raises(ConfigError, match=r"--driver-memory-limits on, but driver 550\.1 < r615"):
        memory_backend(DriverLimits.ON, replace(READY, driver_version="550.1"), "vgpu-core")


def test_without_dmem_the_drivers_internal_backend_needs_no_capacity_line() -> None:
    facts = replace(READY, dmem=False, gpus=(GpuFacts("GPU-a", REGION, False, False),))
    choice = choose(DriverLimits.AUTO, facts)
    assert choice.driver_limits and "internal backend" in choice.reason


@given(
    major=st.integers(0, 999),
    nvml=st.booleans(),
    v2=st.booleans(),
    migs=st.lists(st.booleans(), max_size=4),
)
def test_driver_limits_only_where_every_requirement_holds(
    major: int, nvml: bool, v2: bool, migs: list[bool]
) -> None:
    gpus = tuple(GpuFacts(f"GPU-{i}", REGION, mig, True) for i, mig in enumerate(migs))
    facts = NodeFacts(f"{major}.1", nvml, v2, True, gpus)
    chosen = choose(DriverLimits.AUTO, facts).driver_limits
    assert chosen == (major >= 615 and nvml and v2 and bool(migs) and not any(migs))
    assert chosen == (not gaps(facts))
    assert not choose(DriverLimits.OFF, facts).driver_limits


def test_facts_come_from_the_cgroup_v2_files(tmp_path: Path) -> None:
    inventory = parse_spec("2xT4")
    regions = [dmem_region(g.pci_bus_id) for g in inventory.gpus]
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids dmem\n")
    (tmp_path / "dmem.capacity").write_text(f"{regions[0]} 16106127360\n")
    assert not gather_facts(inventory, True, tmp_path).kubepods  # a container's own view
    (tmp_path / "kubepods.slice").mkdir()
    facts = gather_facts(inventory, True, tmp_path)
    assert facts.cgroup_v2 and facts.dmem and facts.kubepods
    assert [g.listed for g in facts.gpus] == [True, False]
    v1 = gather_facts(inventory, True, tmp_path / "absent")
    assert not v1.cgroup_v2 and not v1.dmem


def test_operators_force_the_backend_with_a_flag() -> None:
    parser = argparse.ArgumentParser()
    add_driver_flags(parser)
    assert driver_settings(parser.parse_args([]))["driver_limits"] is DriverLimits.AUTO
    forced = driver_settings(parser.parse_args(["--driver-memory-limits", "on"]))
    assert forced["driver_limits"] is DriverLimits.ON
    with pytest.raises(SystemExit):
        parser.parse_args(["--driver-memory-limits", "mps"])


def test_without_hand_off_records_auto_says_so_and_on_refuses() -> None:
    """The agent without cluster credentials cannot tell a container's pod: the reason names
    that, not the driver's library."""
    facts = replace(READY, pods_known=False)
    choice = choose(DriverLimits.AUTO, facts)
    assert not choice.driver_limits
    assert "no hand-off records" in choice.reason and "libnvidia-ml" not in choice.reason
    with pytest.raises(DriverLimitsUnavailable, match="no hand-off records"):
        choose(DriverLimits.ON, facts)


def test_the_one_line_says_how_mode_auto_chose_the_cores_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--mode auto` picks vgpu-core where its library is installed, else plain; the node's one
    start-up line says that choice and its reason beside the memory backend's."""
    library = tmp_path / "libvgpu-core.so"
    assert choose_mode("auto", library) == (
        GrantMode.PLAIN,
        f"--mode auto: {library} is not in this image, so plain",
    )
    library.write_bytes(b"")
    mode, why = choose_mode("auto", library)
    assert mode is GrantMode.VGPU_CORE and why == f"--mode auto: {library} is installed"
    assert choose_mode("vgpu-core", library) == (GrantMode.VGPU_CORE, "")
    caplog.set_level(logging.INFO, logger="vgpu.adapters.dmem")
    memory_backend(DriverLimits.AUTO, replace(READY, cgroup_v2=False), mode.value, why)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "vgpu.adapters.dmem"]
    assert line.startswith("memory backend: vgpu-core, cores: vgpu-core (")
    assert "cgroup v1" in line and line.endswith(f"; {why})"), line
