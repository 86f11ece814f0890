"""The DRA driver's memory limits on the real kubelet and scheduler: the driver publishes
`memoryBackend: driver`, and when the kubelet prepares a claim it sets the driver's limit of the
pod the scheduler reserved the claim for on that pod's cgroup; a preparation that cannot set it
fails, the kubelet reports that on the pod, and its retry succeeds once the cgroup is there. A
second pod of an already prepared claim gets no prepare call: the fake runtime runs the claim's
CDI `createRuntime` hook before each container, as containerd with runc does, and the driver
sets the pod's limit before it answers; a container whose limit cannot be set (no pod cgroup,
no driver) does not start, and the kubelet reports that on the pod and retries.

The driver runs over the stand-in NVML and a fake cgroup tree (`tests.realk8s.standin_limits`);
the cluster is `tests/realk8s/test_dra.py`'s (its `dra` fixture, a cluster of its own here)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.binary import build_interposer
from tests.realk8s.processes import wait_until
from tests.realk8s.standin_limits import LimitedGpus
from tests.realk8s.test_dra import (
    CLAIMS,
    SLICE,
    DraNode,
    allocation,
    apply,
    chart_objects,
    claim,
    claim_pod,
    dra,
    release,
    uuid_of,
)

pytestmark = pytest.mark.realk8s
__all__ = ["dra"]  # the fixture, used by name
GIB = 1 << 30


@dataclass(frozen=True)
class Hooked:
    """The driver's stand-in node, its flags, and the socket its CDI hook asks."""

    gpus: LimitedGpus
    flags: tuple[str, ...]
    socket: Path

    def restart(self, dra: DraNode) -> None:
        dra.stop_driver()
        dra.start_driver(*self.flags, gpus=str(self.gpus.inventory), env=self.gpus.env())


@pytest.fixture(scope="module")
def hooked(dra: DraNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hooked]:
    """The DRA node's driver with the driver's memory limits on (and the RBAC the chart gives
    it then) and its CDI hook built as the image builds it; the tier's driver after."""
    root = tmp_path_factory.mktemp("dra-limits")
    gpus = LimitedGpus.make(root, "node-d", "A100-SXM4-80GB", 80 * GIB)
    hook = Path(build_interposer(root / "core")).parent / "vgpu-cdi-hook"
    for obj in chart_objects("dra.driverMemoryLimits.mode=on", show=("rbac/dra-driver",)):
        apply(dra.cluster.admin, obj)
    # its periodic pass waits 10 minutes and its joiners look for a waiting pod's cgroup every
    # 10 minutes: a joining pod's limit, made after it waited, must come from the hook
    flags = (
        *gpus.flags,
        "--resync-s=600",
        "--join-poll-s=600",
        f"--cdi-hook-program={hook}",
        f"--state-dir={root / 'state'}",
    )
    driver = Hooked(gpus, flags, root / "state" / "dra" / "hook.sock")
    driver.restart(dra)
    try:
        yield driver
    finally:
        dra.stop_driver()
        dra.start_driver()
        gpus.standin.close()


@pytest.fixture(scope="module")
def limited(hooked: Hooked) -> LimitedGpus:
    return hooked.gpus


def _backends(dra: DraNode) -> set[str]:
    devices = dra.cluster.admin.get(SLICE)["spec"]["devices"]
    return {d["attributes"].get("memoryBackend", {}).get("string", "") for d in devices}


def _prepare_failures(dra: DraNode, pod: str) -> list[str]:
    """The messages of the kubelet's events saying the pod's claims could not be prepared. The
    first may be the node authorizer's "no relationship found": the kubelet can fetch the claim
    before the authorizer's graph holds the pod's edge to it (plugin/pkg/auth/authorizer/node)."""
    return [
        str(event.get("message", ""))
        for event in pods.events_for(dra.cluster.admin, pod)
        if event.get("reason") == "FailedPrepareDynamicResources"
    ]


def wait_prepare_refused(dra: DraNode, pod: str, because: str) -> None:
    """Wait until the kubelet reports the pod's prepare refused with `because` in its message."""
    wait_until(
        lambda: any(because in m for m in _prepare_failures(dra, pod)),
        90,
        f"the prepare of {pod} refused with {because!r}",
    )


def test_prepare_sets_the_reserved_pods_limit_and_a_failure_is_reported_and_retried(
    dra: DraNode, limited: LimitedGpus
) -> None:
    api = dra.cluster.admin
    wait_until(lambda: _backends(dra) == {"driver"}, 30, "the slice to say memoryBackend driver")
    api.post(CLAIMS, claim("limited", cores="30", memory="8Gi"))
    uid = api.post(pods.PODS, claim_pod("limited", "limited"))["metadata"]["uid"]
    try:
        wait_prepare_refused(dra, "limited", "no pod of the claim (limited) has a cgroup under")
        cgroup = limited.pod_cgroup(uid)  # the kubelet retries at its next sync of the pod
        pods.wait_running(api, "limited", timeout=90)
        (result,) = allocation(api, "limited")
        assert limited.hard_limit(cgroup, uuid_of(api, result["device"])) == 8 * GIB
    finally:
        release(api, "limited", "limited")


def _limit_or_zero(limited: LimitedGpus, cgroup: Path, uuid: str) -> int:
    return limited.hard_limit(cgroup, uuid) if (cgroup / "dmem.max").exists() else 0


def _start_error(dra: DraNode, pod: str) -> str:
    """The message of the app container's failed start as the kubelet reports it on the pod
    (the runtime's StartError, in the container's state or last state), or ""."""
    for status in pods.get(dra.cluster.admin, pod).get("status", {}).get("containerStatuses", []):
        for state in (status.get("state", {}), status.get("lastState", {})):
            ended = state.get("terminated") or {}
            if ended.get("reason") == "StartError":
                return str(ended.get("message", ""))
    return ""


def _app_running(dra: DraNode, pod: str) -> bool:
    """The app container runs (the pod's phase stays Running while it is restarted)."""
    statuses = pods.get(dra.cluster.admin, pod).get("status", {}).get("containerStatuses", [])
    return any("running" in s.get("state", {}) for s in statuses)


def test_a_pod_joining_a_prepared_shared_claim_starts_only_once_its_limit_is_set(
    dra: DraNode, limited: LimitedGpus
) -> None:
    """The real scheduler reserves the shared claim for the second pod and the real kubelet
    starts it without preparing the claim again. Its container's creation runs the claim's
    hook, which fails while the pod has no cgroup (the tier's kubelet makes none): the kubelet
    reports the runtime's StartError with the driver's cause and retries; once the cgroup is
    there, the container runs with its limit already set, which only the hook can have set here
    (the joiners and the periodic pass wait 10 minutes). The claim is a whole GPU: a claim of
    part of one is used by one pod at a time (`vgpu.dra.pod_limits`, `sharing_refusal`)."""
    api = dra.cluster.admin
    wait_until(lambda: _backends(dra) == {"driver"}, 30, "the slice to say memoryBackend driver")
    api.post(CLAIMS, claim("shared"))
    first = api.post(pods.PODS, claim_pod("first", "shared"))["metadata"]["uid"]
    second = ""
    try:
        limited.pod_cgroup(first)
        pods.wait_running(api, "first", timeout=90)
        second = api.post(pods.PODS, claim_pod("second", "shared"))["metadata"]["uid"]
        refused = wait_until(lambda: _start_error(dra, "second"), 60, "the hook to refuse")
        assert "has no cgroup under" in refused and "vgpu-cdi-hook" in refused, refused
        assert not _prepare_failures(dra, "second")  # no prepare call: the claim is prepared
        uuid = uuid_of(api, allocation(api, "shared")[0]["device"])
        cgroup = limited.pod_cgroup(second)  # as the kubelet's EnsureExists would
        wait_until(lambda: _app_running(dra, "second"), 90, "the kubelet's retry to start it")
        assert _limit_or_zero(limited, cgroup, uuid) == 80 * GIB
    finally:
        release(api, "second")
        release(api, "first", "shared")


def test_a_claim_of_part_of_a_gpu_is_used_by_one_pod_at_a_time(
    dra: DraNode, limited: LimitedGpus
) -> None:
    """Each pod's cgroup gets the claim's whole memory (pods have no common cgroup to limit),
    so pods sharing a claim of part of a GPU once used N times it. The real kubelet starts the
    second pod of a shared 30-core, 8 GiB claim without preparing it again; its container's
    hook refuses it while the first pod's cgroup is there, naming that pod, and the kubelet
    shows the runtime's StartError and retries: once the first pod is gone (its cgroup removed,
    as the kubelet's cleanup does), the second starts with the claim's 8 GiB."""
    api = dra.cluster.admin
    wait_until(lambda: _backends(dra) == {"driver"}, 30, "the slice to say memoryBackend driver")
    api.post(CLAIMS, claim("part", cores="30", memory="8Gi"))
    first = api.post(pods.PODS, claim_pod("first", "part"))["metadata"]["uid"]
    try:
        first_cgroup = limited.pod_cgroup(first)
        pods.wait_running(api, "first", timeout=90)
        second = api.post(pods.PODS, claim_pod("second", "part"))["metadata"]["uid"]
        cgroup = limited.pod_cgroup(second)
        refused = wait_until(lambda: _start_error(dra, "second"), 60, "the hook to refuse")
        assert "pod first" in refused and "one pod at a time" in refused, refused
        assert not _app_running(dra, "second")
        release(api, "first")
        shutil.rmtree(first_cgroup)
        wait_until(lambda: _app_running(dra, "second"), 90, "the kubelet's retry to start it")
        uuid = uuid_of(api, allocation(api, "part")[0]["device"])
        assert _limit_or_zero(limited, cgroup, uuid) == 8 * GIB
    finally:
        release(api, "second")
        release(api, "first", "part")


def test_without_the_drivers_socket_a_claims_container_does_not_start(
    dra: DraNode, hooked: Hooked
) -> None:
    """Fail closed: the hook cannot reach the driver, so the runtime does not start the
    container; the kubelet shows the cause on the pod and starts it once the driver is back."""
    api = dra.cluster.admin
    wait_until(lambda: _backends(dra) == {"driver"}, 30, "the slice to say memoryBackend driver")
    hooked.socket.unlink()  # the driver's socket gone, as with the driver down
    api.post(CLAIMS, claim("alone", cores="30", memory="8Gi"))
    uid = api.post(pods.PODS, claim_pod("alone", "alone"))["metadata"]["uid"]
    try:
        hooked.gpus.pod_cgroup(uid)
        refused = wait_until(lambda: _start_error(dra, "alone"), 90, "the hook to fail")
        assert "cannot reach the vgpu DRA driver" in refused, refused
        hooked.restart(dra)
        wait_until(lambda: _app_running(dra, "alone"), 90, "the kubelet's retry to start it")
    finally:
        release(api, "alone", "alone")
