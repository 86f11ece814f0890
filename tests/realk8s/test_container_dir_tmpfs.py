"""Each container directory on a tmpfs of its own (`--container-dir-tmpfs`, the chart's
`nodeAgent.containerDirs.perContainerTmpfs`), with the real kubelet and API server: the agent
mounts the tmpfs in the host's mount namespace when the kubelet's Allocate makes the directory,
a container that fills its shared files gets ENOSPC while its neighbour still rewrites its own
`state`, and the mount is gone once the kubelet let the container go: the kubelet drops a pod
that is no longer active from its checkpoint at its next Allocate
(pkg/kubelet/cm/devicemanager/manager.go: `allocateContainerResources` calls
`UpdateAllocatedDevices`, then `writeCheckpoint`), and the agent's next collect frees the
directory (`ContainerDirs.collect`).

The pods are a tenant's: a ServiceAccount that may only edit pods in its own namespace. The
test cluster's runtime is a stand-in that starts no process, so the container's writes are made
here, to the host paths of the shared mounts the runtime was given (what a container writes
through those mounts lands there); whether a real runtime's bind mount reaches the tmpfs (mount
propagation from the agent's namespace) is not shown."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.binary import build_interposer
from tests.realk8s.cluster import RealCluster
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Obj, Rest
from tests.realk8s.test_admission import _user
from vgpu.adapters.dir_mounts import unmount
from vgpu.node.shared_bound import STATE_BYTES
from vgpu.node.vgpucore import STATE_IN_CONTAINER

pytestmark = pytest.mark.realk8s

NODE = "node-b"
POD_EDITOR: list[Obj] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]}
]


def _tmpfs_mounts(under: Path) -> dict[Path, str]:
    """The tmpfs mounts below `under` in this (the host's) mount namespace: mount point →
    super options (proc(5), /proc/self/mountinfo: field 5 the mount point, after " - " the
    type, the source and the super options)."""
    found: dict[Path, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        kind, _source, options = rest.split(" ", 2)
        point = Path(fields.split(" ")[4].replace("\\040", " "))
        if kind == "tmpfs" and point.is_relative_to(under):
            found[point] = options
    return found


@pytest.fixture(scope="module")
def mounting(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """NODE's agent in mode vgpu-core with a tmpfs per container directory. Yields the state
    directory; restores the node and detaches whatever is still mounted below it."""
    out = tmp_path_factory.mktemp("dir-tmpfs")
    library = build_interposer(out / "lib")
    state = out / "state"
    original = real_cluster.nodes[NODE]
    pods.delete_all(real_cluster.admin)
    flags = (
        "--mode=vgpu-core",
        f"--vgpu-core-library={library}",
        f"--state-dir={state}",
        "--container-dir-tmpfs",
    )
    real_cluster.restart_node(replace(original, agent_flags=original.agent_flags + flags))
    try:
        yield state
    finally:
        pods.delete_all(real_cluster.admin)
        real_cluster.restart_node(original)
        for point in sorted(_tmpfs_mounts(state), reverse=True):
            unmount(point)


@pytest.fixture
def editor(real_cluster: RealCluster) -> Iterator[Rest]:
    rest = _user(real_cluster, "dir-filler", POD_EDITOR)
    yield rest
    rest.close()


def _post(editor: Rest, name: str) -> None:
    pod = pods.pod(name, pods.container("main", 30))
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    editor.post(pods.PODS, pod)


def _names(editor: Rest) -> set[str]:
    return {item["metadata"]["name"] for item in editor.get(pods.PODS).get("items", [])}


def _state_file(cluster: RealCluster, name: str) -> Path:
    """The host path of the `state` file the runtime was given for the pod's container (in
    `<container directory>/shared/`: the tmpfs is mounted over the container directory)."""
    record = cluster.container(name, "main")
    assert record is not None, name
    (path,) = [
        m["host_path"] for m in record["mounts"] if m["container_path"] == STATE_IN_CONTAINER
    ]
    return Path(path)


def _fill(path: Path) -> int:
    """Append to `path` until the file system says no room; the bytes written."""
    written = 0
    with path.open("ab", buffering=0) as f:
        while written < 64 << 20:  # past any per-container tmpfs: the bound did not hold
            try:
                written += f.write(b"\xff" * 65536)
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
                return written
    raise AssertionError(f"{written} bytes written to {path} without ENOSPC")


def test_a_container_filling_its_directory_leaves_its_neighbours_room(
    real_cluster: RealCluster, mounting: Path, editor: Rest
) -> None:
    for name in ("filler", "neighbour"):
        _post(editor, name)
    for name in ("filler", "neighbour"):
        pods.wait_running(editor, name, timeout=90)
    filler, neighbour = (_state_file(real_cluster, n) for n in ("filler", "neighbour"))
    filler_dir, neighbour_dir = filler.parents[1], neighbour.parents[1]
    mounts = _tmpfs_mounts(mounting)
    assert filler_dir in mounts and neighbour_dir in mounts, (filler, neighbour, mounts)
    assert filler_dir != neighbour_dir
    assert "size=" in mounts[filler_dir], mounts[filler_dir]

    assert _fill(filler) < 1 << 20  # the tmpfs is sized for the files it holds
    fd = os.open(neighbour, os.O_WRONLY)
    try:  # the neighbour's library lays out its whole state, as at its first CUDA call
        assert os.pwrite(fd, b"\1" * STATE_BYTES, 0) == STATE_BYTES
        os.fsync(fd)
    finally:
        os.close(fd)

    gone = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    editor.request("DELETE", f"{pods.PODS}/filler", gone)
    wait_until(lambda: "filler" not in _names(editor), 30, "the filler pod to be gone")
    _post(editor, "next")  # the kubelet frees a gone pod's devices at its next Allocate
    pods.wait_running(editor, "next", timeout=90)
    wait_until(
        lambda: filler_dir not in _tmpfs_mounts(mounting),
        60,
        "the agent to unmount the deleted pod's directory",
    )
    assert neighbour_dir in _tmpfs_mounts(mounting)
