"""A claim prepared by vgpu's DRA driver in mode vgpu-core is held to its share in the container.

The driver runs in-process as `vgpu dra-driver --mode vgpu-core` builds it (vgpu-core installed,
its claim directories), over the fake API server, and prepares the claim when the test, playing
the kubelet, calls `NodePrepareResources` over its gRPC socket. The CDI spec it writes is read
back from the CDI directory and its device's container edits are applied in the sandbox as a
CDI-enabled runtime applies them: the `env` entries and the `mounts` (`ro` or `rw`). Every
container that uses the claim gets the same edits, so they share the claim's memory as one
container's processes share a device-plugin grant, also when each container has its own PID
namespace (as pods do) and their processes have the same pids. The stand-in driver's GPUs are
the DRA driver's own inventory.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dra.test_driver import Env, share
from tests.isolation.conftest import MIB, Build, Cluster
from tests.isolation.sandbox import Container
from tests.isolation.test_chain import standin_gpus
from tests.isolation.test_memory_grant import codes
from tests.kubeapi.server import FakeApiServer
from vgpu.adapters.container_dirs import claim_dirs
from vgpu.adapters.vgpu_core_install import install_vgpu_core
from vgpu.node.grants import ContainerGrant, GrantMode, GrantSettings, Mount


def cdi_container(spec: dict[str, Any]) -> Container:
    """The container edits of the claim's one CDI device, as the runtime applies them."""
    (device,) = spec["devices"]
    edits = device["containerEdits"]
    envs = dict(e.split("=", 1) for e in edits["env"])
    mounts = tuple(
        Mount(m["containerPath"], m["hostPath"], read_only="ro" in m["options"])
        for m in edits.get("mounts") or ()
    )
    return Container(ContainerGrant(envs=envs, mounts=mounts))


class Driver:
    """The DRA driver in mode vgpu-core on the stand-in node."""

    def __init__(self, env: Env, cluster: Cluster) -> None:
        self.env, self.cluster = env, cluster
        state = cluster.state
        core = install_vgpu_core(cluster.build.library, state, claim_dirs(state))
        grants = GrantSettings(GrantMode.VGPU_CORE, core=core)
        env.start(grants=grants, dirs=claim_dirs(state))

    def prepared(self, name: str, cores: str, memory: str) -> Container:
        """A claim for a share of GPU 0, prepared as the kubelet asks; what the runtime applies."""
        uid = self.env.put_claim(name, share("gpu-0", cores, memory))
        assert self.env.prepare(name, uid).error == ""
        spec = json.loads((self.env.root / "cdi" / f"vgpu.io-{uid}.json").read_text())
        return cdi_container(spec)


@pytest.fixture
def driver(build: Build, tmp_path: Path) -> Iterator[Driver]:
    with tempfile.TemporaryDirectory(prefix="vgpu-dra-", dir="/tmp") as d, FakeApiServer() as api:
        env = Env(Path(d), api)
        cluster = Cluster(build, standin_gpus(env.backend), tmp_path)
        try:
            yield Driver(env, cluster)
        finally:
            for started in env.drivers:
                started.stop()
            for client in env.clients:
                client.close()


def test_a_prepared_claim_is_held_to_its_memory_share(driver: Driver) -> None:
    cluster, container = driver.cluster, driver.prepared("c1", "30", "1Gi")
    info = cluster.cuload(container, "info")
    fields = info.stdout.splitlines()[0].split()
    assert len(fields) > 2 and fields[2] == cluster.uuids[0], info.stdout + info.stderr
    values = dict(zip(fields[3::2], fields[4::2], strict=False))
    assert int(values["total"]) == int(values["info_total"]) == 1024 * MIB, info.stdout
    done = cluster.cuload(container, "alloc", "0", "mem", str(256 * MIB), "5")
    assert codes(done.stdout) == [0, 0, 0, 0, 2], done.stdout + done.stderr


def test_the_containers_of_one_claim_share_its_memory(driver: Driver) -> None:
    cluster, container = driver.cluster, driver.prepared("c1", "30", "1Gi")
    holder = cluster.sandbox.popen(
        container, [str(cluster.build.cuload), "alloc", "0", "mem", str(768 * MIB), "1", "hold"]
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "rc 0"
        other = cluster.cuload(container, "alloc", "0", "mem", str(512 * MIB), "1")
        assert codes(other.stdout) == [2]  # 768 + 512 MiB > the claim's 1 GiB
    finally:
        holder.kill()
        holder.wait(10)


def own_pid_namespace(cluster: Cluster, container: Container, *args: str) -> subprocess.Popen[str]:
    """cuload in a container of its own PID namespace, as a second pod using the claim runs (its
    first process has the same pid as the first container's)."""
    argv = cluster.sandbox.argv(container, [str(cluster.build.cuload), *args])
    assert argv[0] == "bwrap"
    argv.insert(1, "--unshare-pid")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (a container's processes, whatever their pid inside)."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        try:
            stat = Path(entry.path, "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if stat:
            parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], {pid}
    while frontier:
        frontier = {child for child, p in parent.items() if p in frontier}
        found += sorted(frontier)
    return found


def kill_container(process: subprocess.Popen[str]) -> None:
    """SIGKILL a container and return once every process of it has exited."""
    pidfds = []
    for pid in descendants(process.pid):
        try:
            pidfds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    try:
        for fd in pidfds:
            assert select.select([fd], [], [], 10)[0], "a process of the container outlived it"
    finally:
        for fd in pidfds:
            os.close(fd)


def test_containers_of_one_claim_in_their_own_pid_namespaces_share_its_memory(
    driver: Driver,
) -> None:
    cluster, container = driver.cluster, driver.prepared("c1", "30", "1Gi")
    holder = own_pid_namespace(cluster, container, "alloc", "0", "mem", str(768 * MIB), "1", "hold")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "rc 0"
        other = own_pid_namespace(cluster, container, "alloc", "0", "mem", str(256 * MIB), "2")
        out, err = other.communicate(timeout=60)
        assert codes(out) == [0, 2], out + err  # 768 + 256 MiB fill the claim's 1 GiB exactly
        kill_container(holder)
        after = own_pid_namespace(cluster, container, "alloc", "0", "mem", str(1024 * MIB), "1")
        out, err = after.communicate(timeout=60)
        assert codes(out) == [0], out + err  # the killed container's 768 MiB came back
    finally:
        holder.kill()
        holder.wait(10)
