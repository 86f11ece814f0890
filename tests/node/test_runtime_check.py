"""The agent's start-up check of the node's runtime settings (docs/isolation.md, "Runtime
settings"): every GPU must resolve as a CDI device and the NVIDIA runtime must ignore
NVIDIA_VISIBLE_DEVICES in unprivileged containers; what the agent cannot read is reported as not
verified, never as fine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.node.agent_harness import Box, make_box
from vgpu.adapters.runtime_settings import cdi_device_names, toolkit_config
from vgpu.node.device_list import DeviceList, DeviceListStrategy
from vgpu.node.runtime_check import ENVVAR_WHEN_UNPRIVILEGED, runtime_problems

U0, U1 = "GPU-aaaa", "GPU-bbbb"
BOTH = frozenset({f"nvidia.com/gpu={U0}", f"nvidia.com/gpu={U1}", "nvidia.com/gpu=all"})
SAFE = {ENVVAR_WHEN_UNPRIVILEGED: False}


def test_every_gpu_named_and_the_variable_ignored_is_no_problem() -> None:
    assert runtime_problems([U0, U1], DeviceList(), BOTH, SAFE) == []


def test_a_gpu_without_a_cdi_device_is_named() -> None:
    (problem,) = runtime_problems([U0, U1], DeviceList(), frozenset({f"nvidia.com/gpu={U0}"}), SAFE)
    assert f"nvidia.com/gpu={U1}" in problem and U0 not in problem


@pytest.mark.parametrize("toolkit", [{}, {ENVVAR_WHEN_UNPRIVILEGED: True}])
def test_the_nvidia_runtime_default_honours_the_variable_and_is_reported(
    toolkit: dict[str, bool],
) -> None:
    (problem,) = runtime_problems([U0], DeviceList(), BOTH, toolkit)
    assert "set it to false" in problem


def test_what_cannot_be_read_is_not_verified_never_fine() -> None:
    problems = runtime_problems([U0], DeviceList(), None, None)
    assert len(problems) == 2 and all(p.startswith("not verified") for p in problems)


def test_the_envvar_strategy_is_always_reported() -> None:
    (problem,) = runtime_problems([U0], DeviceList(DeviceListStrategy.ENVVAR), BOTH, SAFE)
    assert "NVIDIA_VISIBLE_DEVICES" in problem


def test_spec_files_json_and_yaml_are_read_and_broken_ones_skipped(tmp_path: Path) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    for d in (etc, run):
        d.mkdir()
    spec = {"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": [{"name": U0}]}
    (etc / "nvidia.yaml").write_text(yaml.safe_dump(spec))
    (run / "other.json").write_text(json.dumps({**spec, "devices": [{"name": U1}]}))
    (run / "broken.yaml").write_text("kind: [")
    (run / "notes.txt").write_text("kind: nvidia.com/gpu")
    assert cdi_device_names([etc, run, tmp_path / "absent"]) == frozenset(
        {f"nvidia.com/gpu={U0}", f"nvidia.com/gpu={U1}"}
    )
    assert cdi_device_names([tmp_path / "absent"]) is None


def test_the_toolkit_config_is_read_as_toml(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"{ENVVAR_WHEN_UNPRIVILEGED} = false\n[nvidia-container-cli]\nldconfig = 'x'\n")
    assert toolkit_config(path) == {**SAFE, "nvidia-container-cli": {"ldconfig": "x"}}
    path.write_text("not = toml = at all")
    assert toolkit_config(path) is None and toolkit_config(tmp_path / "absent") is None


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def test_the_agent_checks_its_nodes_gpus_at_start(box: Box, tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    names = [{"name": uuid} for uuid in box.gpus]
    (cdi / "nvidia.yaml").write_text(yaml.safe_dump({"kind": "nvidia.com/gpu", "devices": names}))
    toolkit = tmp_path / "config.toml"
    toolkit.write_text(f"{ENVVAR_WHEN_UNPRIVILEGED} = false\n")
    agent = box.start_agent(cdi_spec_dirs=(cdi,), toolkit_config=toolkit)
    assert agent.runtime_problems == []
    toolkit.write_text("")
    (cdi / "nvidia.yaml").write_text(
        yaml.safe_dump({"kind": "nvidia.com/gpu", "devices": names[:1]})
    )
    agent.stop()
    again = box.start_agent(cdi_spec_dirs=(cdi,), toolkit_config=toolkit)
    assert len(again.runtime_problems) == 2
    assert f"nvidia.com/gpu={box.gpus[1]}" in again.runtime_problems[0]
