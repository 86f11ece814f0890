"""Memory is counted for as long as the driver really holds it, on the GPU that holds it: VMM
memory until its handle is released and its last mapping unmapped, what a pool keeps after a
free, graph memory nodes, pools used from another GPU's context, and the entry points that would
go around the hooks (the 32-bit v1 ABI, a library opened with RTLD_DEEPBIND)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.isolation.conftest import MIB, PROGRAMS, Build, Cluster, build_program

NOT_SUPPORTED = 801


@pytest.fixture(scope="session")
def memload(build: Build) -> Path:
    return build_memload(build)


def build_memload(build: Build) -> Path:
    """memload and the library it opens with RTLD_DEEPBIND, built next to cuload (visible in the
    sandbox), linked against the stand-in driver."""
    out = build.cuload.parent
    if not (out / "memload").exists():
        link = [f"-L{build.standins.dir}", "-l:libcuda.so.1"]
        warn = ["-Wall", "-Wextra", "-Werror", "-O1"]
        lib = [str(out / "libmemlib.so"), str(PROGRAMS / "memlib.c")]
        subprocess.run(["cc", *warn, "-shared", "-fPIC", "-o", *lib, *link], check=True)
        program = [str(out / "memload"), str(PROGRAMS / "memload.c")]
        subprocess.run(["cc", *warn, "-o", *program, *link, "-ldl"], check=True)
    return out / "memload"


@pytest.fixture(scope="session")
def fdshare(build: Build) -> Path:
    """fdshare (VMM memory handed to another container over a UNIX socket), next to cuload."""
    return build_program(build, "fdshare")


def run(cluster: Cluster, container: object, memload: Path, *args: str) -> dict[str, list[int]]:
    """memload's "NAME VALUE..." lines: the values by name, in order."""
    done = cluster.sandbox.run(container, [str(memload), *args])  # type: ignore[arg-type]
    assert done.returncode == 0, done.stdout + done.stderr
    return parse(done.stdout.splitlines())


def parse(lines: list[str]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for line in lines:
        name, *values = line.split()
        found.setdefault(name, []).extend(int(v) for v in values)
    return found


def test_vmm_memory_released_but_still_mapped_counts_against_the_grant(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "vmm", "0", str(512 * MIB), "3")
    assert got["rc"] == [0, 0, 2]  # two mapped 512 MiB allocations fill 1 GiB


def test_vmm_memory_is_given_back_when_its_last_mapping_is_unmapped(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "vmm", "0", str(512 * MIB), "1")
    assert got["free_mapped"] == [512 * MIB]
    assert got["unmap"] == [0]
    assert got["free_unmapped"] == [1024 * MIB]


def valid_ops(wanted: list[tuple[str, int]]) -> tuple[list[str], list[int]]:
    """The wanted VMM operations the driver allows, and the bytes alive after each: an allocation
    lives while its handle has a reference (cuMemCreate and cuMemRetainAllocationHandle add one,
    cuMemRelease takes one) or a mapping (CUDA Driver API, cuMemRelease and cuMemUnmap)."""
    refs = [0] * 8
    maps = [0] * 8
    ops: list[str] = []
    alive: list[int] = []
    for kind, slot in wanted:
        live = refs[slot] > 0 or maps[slot] > 0
        allowed = {
            "c": not live,
            "m": refs[slot] > 0 and maps[slot] < 8,
            "u": maps[slot] > 0,
            "r": refs[slot] > 0,
            "t": maps[slot] > 0,
        }[kind]
        if not allowed:
            continue
        refs[slot] += {"c": 1, "r": -1, "t": 1}.get(kind, 0)
        maps[slot] += {"m": 1, "u": -1}.get(kind, 0)
        ops.append(f"{kind}{slot}")
        alive.append(sum((i + 1) * 2 * MIB for i in range(8) if refs[i] > 0 or maps[i] > 0))
    return ops, alive


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.sampled_from("cmurt"), st.integers(0, 3)), max_size=40))
@example(wanted=[("c", 0), ("m", 0), ("r", 0), ("t", 0), ("r", 0), ("u", 0)])
@example(wanted=[("c", 0), ("m", 0), ("t", 0), ("r", 0), ("u", 0), ("r", 0)])
def test_vmm_memory_is_counted_exactly_while_referenced_or_mapped(
    cluster: Cluster, memload: Path, wanted: list[tuple[str, int]]
) -> None:
    ops, alive = valid_ops(wanted)
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "vmmops", "0", *ops) if ops else {"op": []}
    assert got["op"][0::2] == [0] * len(ops)
    assert got["op"][1::2] == [1024 * MIB - used for used in alive]


def test_a_pool_on_another_gpu_is_charged_to_the_pools_gpu(cluster: Cluster, memload: Path) -> None:
    container = cluster.admit([(0, 30, 1024), (1, 30, 1024)])
    got = run(cluster, container, memload, "pool", "1", "0", str(768 * MIB), "2")
    assert got["rc"] == [0, 2]  # 2 x 768 MiB exceed GPU 1's grant
    assert got["free0"] == [1024 * MIB]
    assert got["free1"] == [256 * MIB]


def test_the_gpu_that_holds_a_pools_memory_is_the_one_charged(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024), (1, 30, 1024)])
    args = [str(memload), "pool", "1", "0", str(768 * MIB), "1", "hold"]
    holder = cluster.sandbox.popen(container, args)
    try:
        assert holder.stdout is not None
        lines = list(iter(holder.stdout.readline, "done\n"))
        got = parse(lines)
        used = cluster.node.usage().used  # what the stand-in driver really holds, per GPU
        assert got["rc"] == [0]
        assert used[cluster.uuids[1]] - used.get(cluster.uuids[0], 0) >= 768 * MIB
        assert got["free1"] == [256 * MIB]  # charged where it is held
        assert got["free0"] == [1024 * MIB]
    finally:
        holder.kill()
        holder.wait(10)


@pytest.mark.parametrize("free", ["async", "sync"])  # cuMemFreeAsync, cuMemFree
def test_memory_a_pool_keeps_after_a_free_stays_counted_until_it_is_trimmed(
    cluster: Cluster, memload: Path, free: str
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "kept", "0", str(768 * MIB), str(2**64 - 1), free)
    assert got["free"] == [0]
    assert got["rc_kept"] == [2]  # the pool still holds 768 MiB of the 1 GiB grant
    assert got["rc_trimmed"] == [0]


def test_memory_a_pool_released_at_synchronize_is_no_longer_counted(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "kept", "0", str(768 * MIB), "0", "async")
    assert got["rc_kept"] == [0]  # the default threshold (0) released it at cuCtxSynchronize


def test_stream_ordered_pairs_that_the_pool_serves_from_its_reserve_leave_no_charge_behind(
    cluster: Cluster,
) -> None:
    """3,000 cuMemAllocAsync/cuMemFreeAsync pairs of 1 MiB on one stream under a 1 GiB grant: the
    pool serves all but the first from memory it already reserves, and each allocation's own
    reservation (taken before the driver is called) must be given back as the pool's charge is
    updated, or the grant runs out after about a thousand pairs."""
    container = cluster.admit([(0, 30, 1024)])
    done = cluster.cuload(container, "bench", "0", "3000", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "async_pair_ns" in done.stdout


@pytest.mark.parametrize("how", ["graph", "graphnode"])  # cuGraphAddMemAllocNode, cuGraphAddNode
def test_a_graph_memory_node_past_the_grant_is_refused(
    cluster: Cluster, memload: Path, how: str
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, how, "0", str(768 * MIB), "2")
    assert got["add"] == [0, 2]


def test_graph_memory_stays_counted_after_its_graph_is_destroyed_until_trimmed(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "graphlife", "0", str(768 * MIB), str(512 * MIB))
    assert got["add"] == got["launch"] == got["free"] == got["destroy"] == [0]
    assert got["rc_cached"] == [2]  # the freed block is still cached for graphs
    assert got["trim"] == [0]
    assert got["rc_trimmed"] == [0]


def test_v1_cumemalloc_is_refused_directly_and_through_cugetprocaddress(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "v1", str(2048 * MIB))
    assert got["direct"] == [NOT_SUPPORTED]
    assert got["proc"] == [NOT_SUPPORTED]


def test_a_library_opened_with_rtld_deepbind_is_still_held(
    deepbind_build: Build, tmp_path: Path
) -> None:
    """In the sanitized tier this runs under UBSan alone (`deepbind_build`: ASan refuses the flag)."""
    cluster = Cluster(deepbind_build, 2, tmp_path)
    memload = build_memload(deepbind_build)
    container = cluster.admit([(0, 30, 1024)])
    lib = str(memload.parent / "libmemlib.so")
    got = run(cluster, container, memload, "deepbind", lib, str(512 * MIB), "3")
    assert got["rc"] == [0, 0, 2]


def test_cumemallocasync_is_charged_to_the_streams_gpu_not_the_current_contexts(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024), (1, 30, 1024)])
    got = run(cluster, container, memload, "asyncdev", "1", "0", str(768 * MIB), "2")
    assert got["rc"] == [0, 2]  # 2 x 768 MiB exceed GPU 1's grant, where the stream allocates
    assert got["free1"] == [256 * MIB]
    assert got["free0"] == [1024 * MIB]


@pytest.mark.parametrize("ctx_dev", ["1", "0"])  # the stream's own context current, or another
def test_a_captured_cumemallocasync_is_charged_at_capture_and_refused_past_the_grant(
    cluster: Cluster, memload: Path, ctx_dev: str
) -> None:
    container = cluster.admit([(0, 30, 1024), (1, 30, 1024)])
    args = ["capture", "1", ctx_dev, str(768 * MIB), "2", "launch", str(512 * MIB)]
    got = run(cluster, container, memload, *args)
    assert got["rc"] == [0, 2]  # a graph memory node each, on the stream's GPU
    assert got["free_captured"] == [256 * MIB]  # counted before anything runs
    assert got["end"] == got["launch"] == [0]
    assert got["free_launched"] == [256 * MIB]  # launching does not count it twice
    assert got["other"] == [2]


def test_a_captured_allocation_of_an_invalidated_capture_is_given_back(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    args = ["capture", "0", "0", str(768 * MIB), "1", "invalid", str(768 * MIB)]
    got = run(cluster, container, memload, *args)
    assert got["rc"] == [0]
    assert got["end"] == [901]  # CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: the graph is destroyed
    assert got["other"] == [0]  # nothing of it was ever launched: the driver holds none


def test_an_invalidated_capture_ended_by_the_per_thread_stream_variant_is_given_back(
    cluster: Cluster, memload: Path
) -> None:
    """Programs built for the per-thread default stream end their captures with
    cuStreamEndCapture_ptsz: its invalidated graph's memory nodes are retired the same way."""
    container = cluster.admit([(0, 30, 1024)])
    args = ["capture", "0", "0", str(768 * MIB), "1", "invalid-ptsz", str(768 * MIB)]
    got = run(cluster, container, memload, *args)
    assert got["end"] == [901]  # CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
    assert got["other"] == [0]


def test_a_vmm_allocation_shared_with_another_process_is_counted_once_by_its_exporter(
    cluster: Cluster, memload: Path
) -> None:
    """The rule for imported handles: the exporter paid from cuMemCreate until its own release
    and unmap; an importer's handle and mappings cost nothing more (the container would otherwise
    count one allocation twice)."""
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "share", "0", str(512 * MIB))
    assert got["export"] == got["import"] == got["map"] == got["importer"] == [0]
    assert got["free_exporter"] == [512 * MIB]
    assert got["free_importer"] == [512 * MIB]  # not counted a second time
    assert got["free_imported_gone"] == [512 * MIB]  # still the exporter's
    assert got["unmap"] == got["release"] == [0, 0]  # the importer's, then the exporter's
    assert got["free_released"] == [1024 * MIB]


def test_shared_vmm_memory_stays_counted_while_an_importer_holds_it_after_the_exporter_let_go(
    cluster: Cluster, memload: Path
) -> None:
    """The driver frees shared memory only when every process released and unmapped it: the
    importer's mapping keeps it, so the container is charged until that one lets go too."""
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "handover", "0", str(512 * MIB), str(768 * MIB))
    assert got["import"] == got["map"] == got["importer"] == [0]
    assert got["unmap"] == got["release"] == [0, 0]  # the exporter's, then the importer's
    assert got["free_handed_over"] == [512 * MIB]  # still held, by the importer
    assert got["other"] == [2]  # CUDA_ERROR_OUT_OF_MEMORY: 512 + 768 MiB exceed the grant
    assert got["free_let_go"] == [1024 * MIB]
    assert got["other_after"] == [0]


def across_containers(
    cluster: Cluster, fdshare: Path, importer_mib: int
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """512 MiB exported by a container of 1 GiB to one of `importer_mib`, which maps it and then
    asks for 768 MiB more: what each of them printed."""
    sock = str(cluster.node.dir / "vmm.sock")
    serve = [str(fdshare), "serve", "0", str(512 * MIB), sock]
    fetch = [str(fdshare), "fetch", "0", str(512 * MIB), sock, str(768 * MIB)]
    return serve_and_fetch(cluster, [(0, 30, 1024)], [(0, 30, importer_mib)], serve, fetch)


Grants = list[tuple[int, int, int]]


def serve_and_fetch(
    cluster: Cluster, exporter_grants: Grants, importer_grants: Grants, *programs: list[str]
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Runs the first program in a container of `exporter_grants` until it prints "listening",
    then the second in one of `importer_grants`: what the second and the first printed."""
    serve, fetch = programs
    exporter, importer = cluster.admit(exporter_grants), cluster.admit(importer_grants)
    server = cluster.sandbox.popen(exporter, serve)
    try:
        assert server.stdout is not None and server.stdout.readline() == "listening\n"
        done = cluster.sandbox.run(importer, fetch)
        served, err = server.communicate(timeout=30)
    finally:
        server.kill()
    assert done.returncode == 0 and server.returncode == 0, done.stdout + done.stderr + err
    return parse(done.stdout.splitlines()), parse(served.splitlines())


def test_vmm_memory_imported_from_another_container_is_charged_to_the_importer(
    cluster: Cluster, fdshare: Path
) -> None:
    """The importing container holds the memory (the driver frees it only when the importer let
    go too) and the exporting container's entry is not its own: it pays by its mapping."""
    got, served = across_containers(cluster, fdshare, 1024)
    assert got["import"] == got["map"] == [0]
    assert got["free_imported"] == [512 * MIB]
    assert got["other"] == [2]  # 512 + 768 MiB exceed the importer's grant
    assert got["unmap"] == got["release"] == [0]
    assert got["free_let_go"] == [1024 * MIB]
    assert served["free_served"] == [512 * MIB]  # the exporter's own count, unchanged
    assert served["unmap"] == served["release"] == [0]


def test_mapping_memory_imported_from_another_container_past_the_grant_is_refused(
    cluster: Cluster, fdshare: Path
) -> None:
    got, served = across_containers(cluster, fdshare, 256)
    assert got["import"] == [0]
    assert got["map"] == [2]  # CUDA_ERROR_OUT_OF_MEMORY: 512 MiB mapped past a 256 MiB grant
    assert served["unmap"] == served["release"] == [0]


def test_shared_vmm_memory_stays_counted_when_its_exporter_is_killed_holding_it(
    cluster: Cluster, fdshare: Path
) -> None:
    """A SIGKILLed exporter's slot is given back, but not the memory its importer still holds."""
    container = cluster.admit([(0, 30, 1024)])
    done = cluster.sandbox.run(
        container, [str(fdshare), "orphan", "0", str(512 * MIB), str(768 * MIB)]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = parse(done.stdout.splitlines())
    assert got["import"] == got["map"] == [0]
    assert got["free_exporter_killed"] == [512 * MIB]
    assert got["other"] == [2]
    assert got["unmap"] == got["release"] == [0]
    assert got["free_let_go"] == [1024 * MIB]
    assert got["other_after"] == [0]
