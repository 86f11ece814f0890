"""Mode vgpu-core on the real kubelet and API server: the runtime receives exactly the library,
preload, limits and shared mounts from the agent's Allocate answer (recorded by the fake CRI
runtime as the kubelet sent them), the limits file holds the signed grant, and the shipped
`vgpu-protect-enforcement` policy refuses a vGPU pod that sets LD_PRELOAD or a limit variable, or
mounts over an enforcement path, and the API server accepts the policy's CEL within its cost
budget. The refusals need only the API server (`-k refused` starts no nodes).

The node's agent runs with a tmpfs per container directory (`--container-dir-tmpfs`, the chart's
`nodeAgent.containerDirs.perContainerTmpfs`, on by default): it mounts the tmpfs in the host's
mount namespace when the kubelet's Allocate makes the directory; a container that fills its
shared files gets ENOSPC while its neighbour still rewrites its own `state`, and the mount is
gone once the kubelet let the container go: the kubelet drops a pod that is no longer active
from its checkpoint at its next Allocate (pkg/kubelet/cm/devicemanager/manager.go:
`allocateContainerResources` calls `UpdateAllocatedDevices`, then `writeCheckpoint`), and the
agent's next collect frees the directory (`ContainerDirs.collect`). Those pods are a tenant's (a
ServiceAccount that may only edit pods in its own namespace). The test cluster's runtime is a
stand-in that starts no process, so the container's writes are made here, to the host paths of
the shared mounts the runtime was given; whether a real runtime's bind mount reaches the tmpfs
(mount propagation from the agent's namespace) is not shown."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.realk8s import manifests, pods
from tests.realk8s.binary import build_interposer
from tests.realk8s.cluster import RealCluster
from tests.realk8s.grants import granted
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Obj, Rest
from tests.realk8s.test_admission import _user
from vgpu.adapters.container_dirs import read_limits
from vgpu.adapters.dir_mounts import unmount
from vgpu.node.shared_bound import STATE_BYTES
from vgpu.node.vgpucore import (
    ACTIVITY_IN_CONTAINER,
    LIBRARY_IN_CONTAINER,
    LIMITS_IN_CONTAINER,
    PRELOAD_IN_CONTAINER,
    STATE_IN_CONTAINER,
)

pytestmark = pytest.mark.realk8s

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "daemonset" / "enforcement-policy.yaml"
NODE = "node-b"
ENFORCEMENT = {
    LIBRARY_IN_CONTAINER,
    PRELOAD_IN_CONTAINER,
    LIMITS_IN_CONTAINER,
    STATE_IN_CONTAINER,
    ACTIVITY_IN_CONTAINER,
}
SHARED = {STATE_IN_CONTAINER, ACTIVITY_IN_CONTAINER}


def _pinned(name: str, cores: int, **container: object) -> Obj:
    pod = pods.pod(name, {**pods.container("main", cores), **container})
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    return pod


def _refused(cluster: RealCluster, pod: Obj) -> str:
    try:
        cluster.admin.post(pods.PODS, pod)
    except ApiError as err:
        assert err.status in (403, 422), err
        return err.message
    cluster.admin.delete(f"{pods.PODS}/{pod['metadata']['name']}")
    return ""


def _apply_policy(cluster: RealCluster) -> list[Obj]:
    """The shipped policy, accepted by the API server (its CEL compiles within the cost
    budget), and in force (a probe pod is refused)."""
    applied = manifests.apply_file(cluster.admin, POLICY)
    probe = _pinned("probe", 10, env=[{"name": "LD_PRELOAD", "value": "x"}])
    wait_until(lambda: bool(_refused(cluster, probe)), 60, "the policy to take effect")
    policy = cluster.admin.get(
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/vgpu-protect-enforcement"
    )
    warnings = (policy.get("status", {}).get("typeChecking") or {}).get("expressionWarnings")
    assert not warnings, warnings
    return applied


def _remove(cluster: RealCluster, applied: list[Obj]) -> None:
    for obj in reversed(applied):
        cluster.admin.delete(manifests.object_path(obj))


@pytest.fixture(scope="module")
def policed(real_apiserver: RealCluster) -> Iterator[RealCluster]:
    """The API server alone, with the shipped policy (pods stay pending: no nodes)."""
    applied = _apply_policy(real_apiserver)
    try:
        yield real_apiserver
    finally:
        _remove(real_apiserver, applied)


@pytest.fixture(scope="module")
def enforcing(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """NODE's agent in mode vgpu-core with the real library and a tmpfs per container
    directory; the shipped policy applied. Yields the agent's state dir; restores the node,
    removes the policy and detaches whatever is still mounted below the state dir afterwards."""
    out = tmp_path_factory.mktemp("vgpu-core")
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
    applied = _apply_policy(real_cluster)
    try:
        yield state
    finally:
        pods.delete_all(real_cluster.admin)
        _remove(real_cluster, applied)
        real_cluster.restart_node(original)
        for point in sorted(_tmpfs_mounts(state), reverse=True):
            unmount(point)


def test_the_runtime_gets_exactly_the_enforcement_mounts(
    real_cluster: RealCluster, enforcing: Path
) -> None:
    real_cluster.admin.post(pods.PODS, _pinned("enforced", 30))
    pod = pods.wait_running(real_cluster.admin, "enforced", timeout=90)
    record = real_cluster.container("enforced", "main")
    assert record is not None
    mounts = {m["container_path"]: m for m in record["mounts"] or []}
    ours = {path: m for path, m in mounts.items() if path in ENFORCEMENT}
    assert set(ours) == ENFORCEMENT, mounts
    assert all(m.get("readonly") for p, m in ours.items() if p not in SHARED)
    assert not any(ours[p].get("readonly") for p in SHARED)
    for path, m in ours.items():
        assert m["host_path"].startswith(str(enforcing)), (path, m["host_path"])
    assert record["envs"]["LD_PRELOAD"] == LIBRARY_IN_CONTAINER
    (device,) = read_limits(Path(ours[LIMITS_IN_CONTAINER]["host_path"]))
    want = granted(pod)["main"]
    assert (device.uuid, str(device.cores), str(device.memory >> 20)) == (
        want["GPUS"],
        want["VGPU_CORES"],
        want["VGPU_MEMORY_LIMIT_MIB"],
    )


@pytest.mark.parametrize(
    "container",
    [
        {"env": [{"name": "LD_PRELOAD", "value": "/tmp/mine.so"}]},
        {"env": [{"name": "CUDA_DEVICE_MEMORY_LIMIT_0", "value": "80g"}]},
        {"env": [{"name": "VGPU_MEMORY_LIMIT_BYTES", "value": "1"}]},
        {"envFrom": [{"configMapRef": {"name": "anything"}}]},
        {"volumeMounts": [{"name": "v", "mountPath": "/run/vgpu"}]},
    ],
    ids=["ld-preload", "hami-limit", "vgpu-var", "env-from", "mount"],
)
def test_a_pod_overriding_its_enforcement_is_refused(policed: RealCluster, container: Obj) -> None:
    pod = _pinned("override", 10, **container)
    pod["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
    message = _refused(policed, pod)
    assert "vGPU pod" in message, message


def test_a_pod_without_vgpu_may_set_ld_preload(policed: RealCluster) -> None:
    pod = pods.pod("jemalloc", pods.container("main"))
    pod["spec"]["containers"][0]["env"] = [{"name": "LD_PRELOAD", "value": "libjemalloc.so.2"}]
    assert _refused(policed, pod) == ""


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
    real_cluster: RealCluster, enforcing: Path, editor: Rest
) -> None:
    for name in ("filler", "neighbour"):
        _post(editor, name)
    for name in ("filler", "neighbour"):
        pods.wait_running(editor, name, timeout=90)
    filler, neighbour = (_state_file(real_cluster, n) for n in ("filler", "neighbour"))
    filler_dir, neighbour_dir = filler.parents[1], neighbour.parents[1]
    mounts = _tmpfs_mounts(enforcing)
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
        lambda: filler_dir not in _tmpfs_mounts(enforcing),
        60,
        "the agent to unmount the deleted pod's directory",
    )
    assert neighbour_dir in _tmpfs_mounts(enforcing)
