"""A container's GPUs reach the runtime as CDI devices, never as `NVIDIA_VISIBLE_DEVICES` unless
the operator opts in: with the variable, a pod, its sidecar or its image
that sets `NVIDIA_VISIBLE_DEVICES=all` got every GPU of the node on NVIDIA's default runtime."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.node.agent_harness import CORES, Box, gpu_of, make_box
from vgpu.core.errors import ConfigError
from vgpu.daemons.flags.mode import add_mode_flags, device_list
from vgpu.node.device_list import DeviceList, DeviceListStrategy
from vgpu.node.grants import GpuLimit, GrantMode, GrantSettings, Refusal, container_grant

ENVVAR = DeviceList(DeviceListStrategy.ENVVAR)


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def test_the_allocate_answer_names_the_gpus_as_cdi_devices_and_sets_no_visible_devices(
    box: Box,
) -> None:
    box.start_agent()
    box.place("a", [("main", 30, 0)], {"main": [(1, 30)]})
    ids, response = box.kubelet.allocate(CORES, 30)
    assert gpu_of(ids) == {box.gpus[1]}
    (answer,) = response.container_responses
    assert [d.name for d in answer.cdi_devices] == [f"nvidia.com/gpu={box.gpus[1]}"]
    assert "NVIDIA_VISIBLE_DEVICES" not in answer.envs
    assert answer.envs["CUDA_VISIBLE_DEVICES"] == box.gpus[1]


def test_the_variable_is_set_only_with_the_envvar_opt_in_and_then_without_cdi_devices(
    box: Box,
) -> None:
    box.start_agent(grants=GrantSettings(devices=ENVVAR))
    box.place("a", [("main", 30, 0)], {"main": [(0, 30)]})
    _, response = box.kubelet.allocate(CORES, 30)
    (answer,) = response.container_responses
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == box.gpus[0]
    assert list(answer.cdi_devices) == []


uuids = st.lists(
    st.from_regex(r"GPU-[0-9a-f]{8}", fullmatch=True), min_size=1, max_size=4, unique=True
)


@given(uuids, st.sampled_from([GrantMode.PLAIN, GrantMode.MPS, GrantMode.HAMI]))
def test_every_mode_names_each_gpu_once_by_cdi_in_grant_order(
    gpus: list[str], mode: GrantMode
) -> None:
    grant = container_grant([GpuLimit(u, 30, 1024) for u in gpus], GrantSettings(mode))
    assert not isinstance(grant, Refusal)
    assert grant.cdi_devices == tuple(f"nvidia.com/gpu={u}" for u in gpus)
    assert not any(name.startswith("NVIDIA_") for name in grant.envs)


def _flags(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_mode_flags(p)
    return p.parse_args(list(argv))


def test_the_flags_choose_the_strategy_and_refuse_a_cdi_kind_not_vendor_class() -> None:
    assert device_list(_flags()) == DeviceList()
    assert device_list(_flags("--device-list-strategy=envvar")) == ENVVAR
    assert device_list(_flags("--cdi-kind=example.com/gpu")).cdi_devices(["G"]) == (
        "example.com/gpu=G",
    )
    with pytest.raises(ConfigError, match=r"--cdi-kind: .*vendor/class"):
        device_list(_flags("--cdi-kind=gpu"))
