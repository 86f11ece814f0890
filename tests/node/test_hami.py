"""`hami` mode with HAMi-core on the node: its library is mounted and preloaded in the container
(what makes the limit variables bite); without it the mode passes limits only. Flags are checked."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.errors import ConfigError
from vgpu.daemons.node_cli import add_parser, hami_core
from vgpu.node.grants import GpuLimit, GrantMode, GrantSettings, Mount, Refusal, container_grant
from vgpu.node.hami import LIBRARY_IN_CONTAINER, PRELOAD_IN_CONTAINER, HamiCore

LIB = "/usr/local/vgpu/libvgpu.so"
gpu_limits = st.lists(
    st.builds(
        GpuLimit, st.sampled_from(["G0", "G1", "G2"]), st.integers(1, 100), st.integers(1, 81920)
    ),
    min_size=1,
    max_size=3,
)


@given(
    gpu_limits,
    st.sampled_from([m for m in GrantMode if m is not GrantMode.VGPU_CORE]),
    st.booleans(),
)
def test_only_hami_mode_with_the_library_preloads_it(
    gpus: list[GpuLimit], mode: GrantMode, with_file: bool
) -> None:
    hami = HamiCore(LIB, "/usr/local/vgpu/ld.so.preload" if with_file else None)
    grant = container_grant(gpus, GrantSettings(mode, hami=hami))
    plain = container_grant(gpus, GrantSettings(mode))
    assert not isinstance(grant, Refusal) and not isinstance(plain, Refusal)
    if mode is not GrantMode.HAMI:
        assert grant == plain
        return
    assert grant.envs["LD_PRELOAD"] == LIBRARY_IN_CONTAINER
    assert {k: v for k, v in grant.envs.items() if k != "LD_PRELOAD"} == plain.envs
    assert Mount(LIBRARY_IN_CONTAINER, LIB, read_only=True) in grant.mounts
    preloads = [m for m in grant.mounts if m.container_path == PRELOAD_IN_CONTAINER]
    assert len(preloads) == int(with_file) and all(m.read_only for m in preloads)
    assert "LD_PRELOAD" not in plain.envs and plain.mounts == ()


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vgpu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["node-agent", *argv])


def test_flags_build_the_setting() -> None:
    assert hami_core(_args("--mode", "hami")) is None
    assert hami_core(_args("--mode", "hami", "--hami-core-library", LIB)) == HamiCore(LIB)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--mode", "plain", "--hami-core-library", LIB], "is for --mode hami"),
        (["--mode", "hami", "--hami-core-library", "libvgpu.so"], "must be an absolute path"),
        (["--mode", "hami", "--hami-core-library", "/usr/local/vgpu"], "not a shared library"),
        (["--mode", "hami", "--hami-preload-file", "/x"], "needs --hami-core-library"),
        (
            ["--mode", "hami", "--hami-core-library", LIB, "--hami-preload-file", "ld.so.preload"],
            "--hami-preload-file: 'ld.so.preload' must be an absolute path",
        ),
    ],
)
def test_bad_flags_are_named(argv: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        hami_core(_args(*argv))


def test_the_kubelet_receives_the_mounts_over_the_device_plugin_socket() -> None:
    from tests.node.agent_harness import CORES, make_box

    for box in make_box():
        box.start_agent(grants=GrantSettings(GrantMode.HAMI, hami=HamiCore(LIB, "/etc/hami.pre")))
        box.place("h", [("main", 30, 0)], {"main": [(0, 30)]})
        _, response = box.kubelet.allocate(CORES, 30)
        grant = response.container_responses[0]
        assert grant.envs["LD_PRELOAD"] == LIBRARY_IN_CONTAINER
        assert grant.envs["CUDA_DEVICE_SM_LIMIT"] == "30"
        assert [(m.container_path, m.host_path, m.read_only) for m in grant.mounts] == [
            (LIBRARY_IN_CONTAINER, LIB, True),
            (PRELOAD_IN_CONTAINER, "/etc/hami.pre", True),
        ]
