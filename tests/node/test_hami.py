"""`hami` mode with HAMi-core on the node: its library is mounted and preloaded in the container
(what makes the limit variables bite); without it the mode passes limits only. Flags are checked."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.node.libs import hook_libraries, needs_cc
from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.core.errors import ConfigError
from vgpu.daemons.flags.mode import grant_settings, hami_core
from vgpu.daemons.node_agent.cli import add_parser
from vgpu.node.container_dirs import DirBounds, DirOwner
from vgpu.node.grants import (
    ContainerGrant,
    GpuLimit,
    GrantMode,
    GrantSettings,
    Mount,
    Refusal,
    container_grant,
)
from vgpu.node.hami import (
    CACHE_DIR_IN_CONTAINER,
    CACHE_FILE,
    LIBRARY_IN_CONTAINER,
    PRELOAD_IN_CONTAINER,
    HamiCore,
)

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


@needs_cc
def test_flags_build_the_setting_with_a_checked_library(tmp_path: Path) -> None:
    libs = hook_libraries(tmp_path)
    assert hami_core(_args("--mode", "hami")) is None
    state = ["--state-dir", str(tmp_path / "state")]
    hami = hami_core(_args("--mode", "hami", "--hami-core-library", str(libs["hooks"]), *state))
    assert hami is not None and hami.library == str(libs["hooks"]) and hami.dirs is not None
    with pytest.raises(ConfigError, match=r"does not export cuMemAlloc_v2.*Release build"):
        grant_settings(_args("--mode", "hami", "--hami-core-library", str(libs["release"]), *state))
    hooked = ["--mode", "hami", "--hami-core-library", str(libs["hooks"]), *state]
    assert grant_settings(_args(*hooked)).hami is not None


U0, U1 = "GPU-aaaa", "GPU-bbbb"


def test_devices_go_by_index_with_per_gpu_limits_as_hami_core_reads_them() -> None:
    """HAMi-core maps each CUDA_VISIBLE_DEVICES entry with atoi: UUIDs all became device 0 and
    the second GPU of a grant went unlimited. The runtime still picks devices by UUID."""
    gpus = [GpuLimit(U0, 100, 16384), GpuLimit(U1, 100, 8192)]
    grant = container_grant(gpus, GrantSettings(GrantMode.HAMI))
    assert isinstance(grant, ContainerGrant)
    assert grant.cdi_devices == (f"nvidia.com/gpu={U0}", f"nvidia.com/gpu={U1}")
    assert grant.envs["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert (grant.envs["CUDA_DEVICE_MEMORY_LIMIT_0"], grant.envs["CUDA_DEVICE_MEMORY_LIMIT_1"]) == (
        "16384m",
        "8192m",
    )
    assert grant.envs["CUDA_DEVICE_SM_LIMIT_0"] == grant.envs["CUDA_DEVICE_SM_LIMIT_1"] == "100"
    limited = container_grant(
        [GpuLimit(U0, 30, 4096)], GrantSettings(GrantMode.HAMI), cores_limit=60
    )
    assert isinstance(limited, ContainerGrant) and limited.envs["CUDA_DEVICE_SM_LIMIT_0"] == "60"


def test_each_container_gets_its_own_writable_cache(tmp_path: Path) -> None:
    """Without a writable cache file every CUDA process under HAMi-core exits at its first
    call: a read-only root with no writable /tmp could not use CUDA at all."""
    settings = GrantSettings(GrantMode.HAMI, hami=HamiCore(LIB, dirs=ContainerDirs(tmp_path)))
    a = container_grant([GpuLimit(U0, 30, 4096)], settings)
    b = container_grant([GpuLimit(U0, 30, 4096)], settings)
    assert isinstance(a, ContainerGrant) and isinstance(b, ContainerGrant)
    assert a.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == CACHE_FILE
    caches = [[m for m in g.mounts if m.container_path == CACHE_DIR_IN_CONTAINER] for g in (a, b)]
    assert all(len(c) == 1 and not c[0].read_only for c in caches)
    assert caches[0][0].host_path != caches[1][0].host_path
    assert all(Path(c[0].host_path).is_dir() for c in caches)


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


def test_the_dra_driver_flags_give_hami_core_per_claim_caches_apart_from_the_agents(
    tmp_path: Path,
) -> None:
    """`vgpu dra-driver` shares the enforcement flags; its caches go under <state dir>/dra."""
    from vgpu.adapters.container_dirs import claim_dirs
    from vgpu.daemons.dra_driver import cli as dra_cli

    parser = argparse.ArgumentParser(prog="vgpu")
    dra_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    argv = [
        "dra-driver",
        "--mode",
        "hami",
        "--hami-core-library",
        LIB,
        "--state-dir",
        str(tmp_path),
    ]
    args = parser.parse_args(argv)
    hami = hami_core(args, claim_dirs(args.state_dir))
    assert hami is not None and hami.library == LIB and hami.dirs is not None
    assert hami.dirs.root == tmp_path / "dra" / "containers"


def test_the_cache_directories_are_bounded_per_pod_like_vgpu_cores(tmp_path: Path) -> None:
    """The per-pod bound holds for mode hami's cache directories too."""
    dirs = ContainerDirs(tmp_path, bounds=DirBounds(namespace=4, pod=1))
    settings = GrantSettings(GrantMode.HAMI, hami=HamiCore(LIB, dirs=dirs))
    gpus = [GpuLimit(U0, 30, 1024)]
    first = container_grant(gpus, settings, owner=DirOwner("t", "uid-a", "c0"))
    assert isinstance(first, ContainerGrant)
    second = container_grant(gpus, settings, owner=DirOwner("t", "uid-a", "c1"))
    assert isinstance(second, Refusal) and "per pod" in second.reason
