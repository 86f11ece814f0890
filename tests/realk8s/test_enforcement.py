"""Mode vgpu-core on the real kubelet and API server: the runtime receives exactly the library,
preload, limits and shared mounts from the agent's Allocate answer (recorded by the fake CRI
runtime as the kubelet sent them), the limits file holds the signed grant, and the shipped
`vgpu-protect-enforcement` policy refuses a vGPU pod that sets LD_PRELOAD or a limit variable, or
mounts over an enforcement path, and the API server accepts the policy's CEL within its cost
budget. The refusals need only the API server (`-k refused` starts no nodes)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.realk8s import manifests, pods
from tests.realk8s.binary import build_interposer
from tests.realk8s.cluster import RealCluster
from tests.realk8s.grants import granted
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Obj
from vgpu.adapters.container_dirs import read_limits
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
    """NODE's agent in mode vgpu-core with the real library; the shipped policy applied. Yields
    the agent's state dir; restores the node and removes the policy afterwards."""
    out = tmp_path_factory.mktemp("vgpu-core")
    library = build_interposer(out / "lib")
    state = out / "state"
    original = real_cluster.nodes[NODE]
    pods.delete_all(real_cluster.admin)
    flags = ("--mode=vgpu-core", f"--vgpu-core-library={library}", f"--state-dir={state}")
    real_cluster.restart_node(replace(original, agent_flags=original.agent_flags + flags))
    applied = _apply_policy(real_cluster)
    try:
        yield state
    finally:
        pods.delete_all(real_cluster.admin)
        _remove(real_cluster, applied)
        real_cluster.restart_node(original)


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
