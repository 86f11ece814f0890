"""Legacy CUDA IPC (cuIpcGetMemHandle / cuIpcOpenMemHandle / cuIpcCloseMemHandle, what
torch.multiprocessing uses to share CUDA tensors): memory is counted once inside a container while
any of its processes holds it, the exporter's free included (freeing before the importer closes is
undefined in the Driver API reference, so the memory is taken to stay), and charged to an importer
in another container, refused past its grant."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, PROGRAMS, Build, Cluster
from tests.isolation.test_memory_held import parse, serve_and_fetch

OUT_OF_MEMORY = 2


@pytest.fixture(scope="session")
def ipcshare(build: Build) -> Path:
    """ipcshare, next to cuload (visible in the sandbox), linked against the stand-in driver."""
    out = build.cuload.parent / "ipcshare"
    if not out.exists():
        source = [str(PROGRAMS / "ipcshare.c"), f"-L{build.standins.dir}", "-l:libcuda.so.1"]
        subprocess.run(
            ["cc", "-Wall", "-Wextra", "-Werror", "-O1", "-o", str(out), *source], check=True
        )
    return out


def pair(cluster: Cluster, ipcshare: Path, how: str) -> dict[str, list[int]]:
    container = cluster.admit([(0, 30, 1024)])
    args = [str(ipcshare), "pair", "0", str(512 * MIB), str(768 * MIB), how]
    done = cluster.sandbox.run(container, args)
    assert done.returncode == 0, done.stdout + done.stderr
    return parse(done.stdout.splitlines())


@pytest.mark.parametrize("how", ["free", "freeasync", "kill"])
def test_ipc_memory_stays_counted_while_an_importer_of_the_container_holds_it(
    cluster: Cluster, ipcshare: Path, how: str
) -> None:
    """Counted once while both hold it; after the exporter freed it (cuMemFree or cuMemFreeAsync,
    living on) or was SIGKILLed holding it, the importer's open mapping keeps it counted until
    its last close, and then nothing of it is."""
    got = pair(cluster, ipcshare, how)
    assert got["open"] == got["reopen"] == [0]
    assert got["same"] == [1]  # the same context opening again gets the same pointer
    assert got["free_opened"] == [512 * MIB]  # not counted a second time by the importer
    if how != "kill":
        assert got["free"] == [0]
    assert got["free_exporter_gone"] == [512 * MIB]  # still held, by the importer
    assert got["other"] == [OUT_OF_MEMORY]  # 512 + 768 MiB exceed the grant
    assert got["close"] == [0, 0]
    assert got["free_closed_once"] == [512 * MIB]  # one reference left
    assert got["free_closed"] == [1024 * MIB]
    assert got["other_after"] == [0]


def across_containers(
    cluster: Cluster, ipcshare: Path, importer_mib: int
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """512 MiB exported by a container of 1 GiB to one of `importer_mib`, which opens it and then
    asks for 768 MiB more: what each of them printed."""
    sock = str(cluster.node.dir / "ipc.sock")
    serve = [str(ipcshare), "serve", "0", str(512 * MIB), sock]
    fetch = [str(ipcshare), "fetch", "0", sock, str(768 * MIB)]
    return serve_and_fetch(cluster, [(0, 30, 1024)], [(0, 30, importer_mib)], serve, fetch)


def test_ipc_memory_opened_from_another_container_is_charged_to_the_importer(
    cluster: Cluster, ipcshare: Path
) -> None:
    got, served = across_containers(cluster, ipcshare, 1024)
    assert got["open"] == [0]
    assert got["free_opened"] == [512 * MIB]
    assert got["range"] == [0] and got["size"] == [512 * MIB]
    assert got["other"] == [OUT_OF_MEMORY]  # 512 + 768 MiB exceed the importer's grant
    assert got["close"] == [0]
    assert got["free_closed"] == [1024 * MIB]
    assert served["free_served"] == [512 * MIB]  # the exporter's own count, unchanged
    assert served["free"] == [0]


def test_opening_ipc_memory_from_another_container_past_the_grant_is_refused(
    cluster: Cluster, ipcshare: Path
) -> None:
    got, served = across_containers(cluster, ipcshare, 256)
    assert got["open"] == [OUT_OF_MEMORY]  # 512 MiB opened on a 256 MiB grant
    assert served["free"] == [0]


def test_ipc_memory_opened_through_peer_access_is_charged_to_the_gpu_that_holds_it(
    cluster: Cluster, ipcshare: Path
) -> None:
    """Opened on GPU 0's context, memory of GPU 1 (peer access, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
    is charged on GPU 1, as cuPointerGetAttribute's device ordinal says, not on GPU 0."""
    sock = str(cluster.node.dir / "ipc.sock")
    serve = [str(ipcshare), "serve", "1", str(512 * MIB), sock]
    fetch = [str(ipcshare), "fetch", "0", sock, str(768 * MIB), "1"]
    both = [(0, 30, 1024), (1, 30, 1024)]
    got, served = serve_and_fetch(cluster, [(1, 30, 1024)], both, serve, fetch)
    assert got["open"] == [0]
    assert got["free_holder"] == [512 * MIB]  # GPU 1 holds it
    assert got["free_opened"] == [1024 * MIB]  # GPU 0 does not
    assert got["other"] == [0]  # 768 MiB on GPU 0 fit
    assert got["free_closed"] == [1024 * MIB]
    assert served["free"] == [0]
