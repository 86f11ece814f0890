"""The agent's start in an enforcing mode: the interposer's ELF exports are checked (a build that
exports only `dlsym` is refused with one line), vgpu-core is installed into the state dir with
its preload file, and `--mode auto` picks vgpu-core exactly when the image carries it."""

from __future__ import annotations

import argparse
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.node.libs import CC, hook_libraries, needs_cc
from vgpu.core.errors import ConfigError
from vgpu.daemons.flags.mode import grant_settings
from vgpu.daemons.node_agent.cli import add_parser
from vgpu.node.elf_symbols import CUDA_HOOKS, ElfError, exported_functions, missing_hooks
from vgpu.node.grants import GrantMode
from vgpu.node.vgpucore import LIBRARY_IN_CONTAINER, VgpuCore


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if CC is None:
        pytest.skip("needs a C compiler")
    return hook_libraries(tmp_path_factory.mktemp("libs"))


@needs_cc
def test_the_dynamic_symbol_table_lists_defined_functions_only(libraries: dict[str, Path]) -> None:
    names = exported_functions(libraries["hooks"].read_bytes())
    assert set(CUDA_HOOKS) | {"dlsym_wrapper"} <= names
    assert "elsewhere" not in names and "hidden" not in names
    assert missing_hooks(libraries["release"].read_bytes()) == list(CUDA_HOOKS)


@pytest.mark.parametrize(
    "data", [b"", b"\x7fELF", b"\x7fELF\x01\x01" + bytes(64), b"MZ" + bytes(100)]
)
def test_what_is_not_a_64_bit_elf_is_a_named_error(data: bytes) -> None:
    with pytest.raises(ElfError):
        exported_functions(data)


@needs_cc
@pytest.mark.parametrize("field", ["section-table-offset", "dynsym-offset"])
def test_an_offset_past_any_index_is_a_named_error_not_an_overflow(
    libraries: dict[str, Path], field: str
) -> None:
    """Offsets are 64-bit unsigned; one of 2**63 or more cannot index bytes at all (found by
    the property below: it raised OverflowError, which stops the agent with a traceback)."""
    raw = bytearray(libraries["hooks"].read_bytes())
    huge = (1 << 64) - 8
    if field == "section-table-offset":
        raw[0x28:0x30] = huge.to_bytes(8, "little")
    else:
        (shoff,) = struct.unpack_from("<Q", raw, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", raw, 0x3A)
        for i in range(shnum):
            at = shoff + i * shentsize
            if struct.unpack_from("<I", raw, at + 4)[0] == 11:  # SHT_DYNSYM: its sh_offset
                raw[at + 24 : at + 32] = huge.to_bytes(8, "little")
    with pytest.raises(ElfError):
        exported_functions(bytes(raw))


@needs_cc
@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_damaged_library_gives_an_elf_error_or_names_never_a_crash(
    libraries: dict[str, Path], data: st.DataObject
) -> None:
    raw = bytearray(libraries["hooks"].read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        names = exported_functions(bytes(raw[:cut]))
    except ElfError as err:
        assert str(err)  # a named error, never an empty one
    else:
        assert all(isinstance(n, str) and n for n in names)


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vgpu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["node-agent", *argv])


@needs_cc
def test_auto_installs_vgpu_core_with_its_preload_file(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    grants = grant_settings(
        args("--vgpu-core-library", str(libraries["hooks"]), "--state-dir", str(state))
    )
    assert grants.mode is GrantMode.VGPU_CORE and isinstance(grants.core, VgpuCore)
    assert Path(grants.core.library).read_bytes() == libraries["hooks"].read_bytes()
    assert Path(grants.core.preload_file).read_text() == f"{LIBRARY_IN_CONTAINER}\n"
    assert Path(grants.core.library).parent == state / "lib"


def test_auto_without_the_library_is_plain(tmp_path: Path) -> None:
    grants = grant_settings(
        args("--vgpu-core-library", str(tmp_path / "absent.so"), "--state-dir", str(tmp_path))
    )
    assert grants.mode is GrantMode.PLAIN and grants.core is None


@needs_cc
def test_a_library_without_the_cuda_hooks_stops_the_agent_with_one_line(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="does not export cuMemAlloc_v2") as e:
        grant_settings(
            args(
                "--mode",
                "vgpu-core",
                "--vgpu-core-library",
                str(libraries["release"]),
                "--state-dir",
                str(tmp_path),
            )
        )
    assert "\n" not in str(e.value) and "--vgpu-core-library" in str(e.value)


def test_vgpu_core_without_the_library_stops_the_agent(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        grant_settings(
            args(
                "--mode",
                "vgpu-core",
                "--vgpu-core-library",
                str(tmp_path / "x.so"),
                "--state-dir",
                str(tmp_path),
            )
        )


@needs_cc
def test_the_real_vgpu_core_build_passes_the_agents_check(tmp_path: Path) -> None:
    """hack/build-interposer.sh's library (what the image carries) exports every hook the
    agent checks for, and installs."""
    script = Path(__file__).resolve().parents[2] / "hack" / "build-interposer.sh"
    if not script.is_file():
        pytest.skip("vgpu-core's build script is not in this tree")
    done = subprocess.run(
        ["bash", str(script), str(tmp_path / "out")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    library = Path(done.stdout.strip().splitlines()[-1])
    assert missing_hooks(library.read_bytes()) == []
    grants = grant_settings(
        args("--vgpu-core-library", str(library), "--state-dir", str(tmp_path / "state"))
    )
    assert grants.mode is GrantMode.VGPU_CORE
