"""An exported VMM descriptor is a reference to its memory: the CUDA Driver API's cuMemRelease
frees an allocation only "when all outstanding mappings to the memory are unmapped and when all
outstanding references to the handle (including its shareable counterparts) are also released",
so a POSIX file descriptor kept open (or passed to another process) after every handle was
released keeps the memory, and the container's count with it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.isolation.conftest import MIB, Build, Cluster, build_program
from tests.isolation.test_memory_held import parse

GRANT = 1024 * MIB


@pytest.fixture(scope="session")
def vmmfds(build: Build) -> Path:
    return build_program(build, "vmmfds")


def run(
    cluster: Cluster, vmmfds: Path, *args: str, mask_locks: bool = False
) -> dict[str, list[int]]:
    """vmmfds's values, run in a new container of 1 GiB on GPU 0 (with the kernel's list of
    locks, /proc/locks, masked by an empty file when `mask_locks`)."""
    container = cluster.admit([(0, 30, 1024)])
    argv = cluster.sandbox.argv(container, [str(vmmfds), *args])
    if mask_locks:
        empty = cluster.node.dir / "no-locks"
        empty.write_text("")
        at = argv.index("/dev") + 1  # after --proc /proc and --dev /dev
        argv[at:at] = ["--ro-bind", str(empty), "/proc/locks"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return parse(done.stdout.splitlines())


def test_exported_descriptors_kept_after_their_handles_were_released_stay_counted(
    cluster: Cluster, vmmfds: Path
) -> None:
    """Creating, exporting and releasing in a loop while keeping the descriptors must not hold
    more than the grant: each kept descriptor holds its allocation, never mapped."""
    got = run(cluster, vmmfds, "keep", "0", str(512 * MIB), "3")
    assert got["rc"] == [0, 0, 2]  # two kept descriptors fill the 1 GiB grant
    assert got["export"] == [0, 0]
    assert got["free_kept"] == [0]
    assert got["import"] == got["map"] == [0]  # through a kept descriptor, every handle released
    assert got["free_imported"] == [0]  # joined, not counted a second time
    assert got["unmap"] == got["release"] == [0]
    assert got["free_released"] == [0]  # the descriptors still hold both
    assert got["free_closed"] == [GRANT]


def test_a_descriptor_passed_to_another_process_stays_counted_after_its_exporter_exits(
    cluster: Cluster, vmmfds: Path
) -> None:
    """The exporter releases its handle and exits; the process it passed the descriptor to
    (over a UNIX socket) never imports it, yet holds the memory until it closes it."""
    got = run(cluster, vmmfds, "handoff", "0", str(512 * MIB), str(768 * MIB))
    assert got["exporter"] == [0]
    assert got["free_exporter_gone"] == [512 * MIB]
    assert got["other"] == [2]  # CUDA_ERROR_OUT_OF_MEMORY: 512 + 768 MiB exceed the grant
    assert got["free_closed"] == [GRANT]
    assert got["other_after"] == [0]


def test_an_export_the_container_could_not_count_is_refused(cluster: Cluster, vmmfds: Path) -> None:
    """The container's table of shared allocations holds 64: a 65th descriptor kept open would
    keep memory nothing counts once its handle is released, so its export is undone
    (CUDA_ERROR_OUT_OF_MEMORY) rather than handed out."""
    got = run(cluster, vmmfds, "keep", "0", str(2 * MIB), "66")
    assert got["rc"] == [0] * 66
    assert got["export"] == [0] * 64 + [2, 2]
    assert got["free_kept"] == [GRANT - 64 * 2 * MIB]
    assert got["free_closed"] == [GRANT]


def test_descriptors_stay_counted_when_the_kernels_list_of_locks_cannot_be_trusted(
    cluster: Cluster, vmmfds: Path
) -> None:
    """/proc/locks masked by an empty file does not list the region's own lock: whether the
    descriptors were closed cannot be told, so the memory stays counted (fail closed)."""
    got = run(cluster, vmmfds, "keep", "0", str(512 * MIB), "1", mask_locks=True)
    assert got["free_kept"] == [512 * MIB]
    assert got["free_closed"] == [512 * MIB]


SLOTS = 4


def alive_after(wanted: list[tuple[str, int]]) -> tuple[list[str], list[int]]:
    """The wanted operations the driver allows, and the free memory after each: an allocation
    lives while its handle has a reference (cuMemCreate and each import add one, cuMemRelease
    takes one), a mapping, or an open exported descriptor (CUDA Driver API, cuMemRelease)."""
    refs, maps, fds = [0] * SLOTS, [0] * SLOTS, [0] * SLOTS
    ops: list[str] = []
    free: list[int] = []
    for kind, slot in wanted:
        live = refs[slot] > 0 or maps[slot] > 0 or fds[slot] > 0
        allowed = {
            "c": not live,
            "e": refs[slot] > 0 and fds[slot] < 3,
            "i": fds[slot] > 0,
            "m": refs[slot] > 0 and maps[slot] < 4,
            "u": maps[slot] > 0,
            "r": refs[slot] > 0,
            "x": fds[slot] > 0,
        }[kind]
        if not allowed:
            continue
        refs[slot] += {"c": 1, "i": 1, "r": -1}.get(kind, 0)
        maps[slot] += {"m": 1, "u": -1}.get(kind, 0)
        fds[slot] = 0 if kind == "x" else fds[slot] + (kind == "e")
        ops.append(f"{kind}{slot}")
        held = [refs[i] > 0 or maps[i] > 0 or fds[i] > 0 for i in range(SLOTS)]
        free.append(GRANT - sum((i + 1) * 2 * MIB for i in range(SLOTS) if held[i]))
    return ops, free


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.sampled_from("ceimurx"), st.integers(0, SLOTS - 1)), max_size=40))
@example(wanted=[("c", 0), ("e", 0), ("r", 0), ("i", 0), ("x", 0), ("m", 0), ("r", 0), ("u", 0)])
@example(wanted=[("c", 1), ("m", 1), ("e", 1), ("r", 1), ("u", 1), ("e", 1), ("x", 1)])
def test_vmm_memory_is_counted_exactly_while_referenced_mapped_or_its_descriptor_is_open(
    cluster: Cluster, vmmfds: Path, wanted: list[tuple[str, int]]
) -> None:
    ops, free = alive_after(wanted)
    got = run(cluster, vmmfds, "ops", "0", *ops) if ops else {"op": []}
    assert got["op"][0::2] == [0] * len(ops)
    assert got["op"][1::2] == free
