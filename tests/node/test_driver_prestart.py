"""The driver memory backend's PreStartContainer: the plugin asks the kubelet for it, sets the
pod's limit on its cgroup at every container start, and a failure fails the start."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.handoff.pods import GPUS, KEY, NODE, UNIT_MIB, agent, ids
from tests.handoff.pods import pod as bound_pod
from tests.kubelet_standin.kubelet import FakeKubelet
from tests.node.conftest import MEMORY, start_plugins
from tests.node.test_handoff_pure import pod, signed
from vgpu.adapters._proto.deviceplugin.v1beta1 import api_pb2
from vgpu.adapters.dmem import LimitError
from vgpu.adapters.fakegpu import parse_spec
from vgpu.adapters.kubelet.device_plugin import PluginOptions
from vgpu.agent.config import AgentConfig
from vgpu.agent.driver_limits import DriverLimitHook
from vgpu.agent.mode import handoff_policy
from vgpu.core.ids import GpuUUID, PodKey
from vgpu.core.kubelet_reuse import Role
from vgpu.core.model import GpuShare
from vgpu.node.devices import ResourceNames, UnitKind
from vgpu.node.driver_limits import PreStartRefused, pod_memory
from vgpu.node.grants import Refusal
from vgpu.node.handoff.admissions import Handoff
from vgpu.node.podspec import pod_info

UID = "0b5e-77"
GPU = GpuUUID("GPU-a")
MIB = 1 << 20


class RecordingLimits:
    """NVML's setter, recorded; `fail` makes it answer as a driver that refuses."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[tuple[str, Path, int, int]] = []
        self.fail = fail

    def set(self, uuid: str, cgroup: Path, *, hard: int, soft: int = 0) -> None:
        if self.fail:
            raise LimitError(self.fail)
        self.calls.append((uuid, cgroup, hard, soft))


def lookup(
    kind: UnitKind, ids: Sequence[str]
) -> list[tuple[str, list[tuple[Role, tuple[GpuShare, ...]]]]]:
    if list(ids) != [f"{GPU}::m0"]:
        return []
    return [(UID, [(Role.APP, (GpuShare(GPU, 10, 2048 * 1000),))])]


@pytest.fixture
def cgroupfs() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="vgcg"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def pod_dir(root: Path, layout: str) -> Path:
    path = root / layout.lstrip("/")
    path.mkdir(parents=True)
    return path


@pytest.mark.parametrize(
    "layout",
    [
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b5e_77.slice",
        "/kubepods/besteffort/pod0b5e-77",
        "/kubepods/pod0b5e-77",
    ],
)
def test_prestart_sets_the_pods_hard_limit_on_its_cgroup_every_start(
    cgroupfs: Path, layout: str
) -> None:
    path = pod_dir(cgroupfs, layout)
    limits = RecordingLimits()
    hook = DriverLimitHook(lookup, limits, ResourceNames(), cgroupfs=cgroupfs)
    hook(MEMORY, [f"{GPU}::m0"])
    hook(MEMORY, [f"{GPU}::m0"])  # the container restarted: set again
    assert limits.calls == [(GPU, path, 2048 * MIB, 0)] * 2


def test_prestart_without_the_pods_cgroup_is_refused(cgroupfs: Path) -> None:
    hook = DriverLimitHook(lookup, RecordingLimits(), ResourceNames(), cgroupfs=cgroupfs)
    with pytest.raises(Exception, match="no cgroup under"):
        hook(MEMORY, [f"{GPU}::m0"])


def test_prestart_for_devices_no_pod_holds_is_refused(cgroupfs: Path) -> None:
    hook = DriverLimitHook(lookup, RecordingLimits(), ResourceNames(), cgroupfs=cgroupfs)
    with pytest.raises(Exception, match="no pod in the agent's records"):
        hook(MEMORY, ["GPU-b::m3"])


def test_a_limit_the_driver_refuses_fails_prestart_through_the_kubelet(cgroupfs: Path) -> None:
    pod_dir(cgroupfs, "/kubepods/pod0b5e-77")
    limits = RecordingLimits(fail="NVML nvmlDeviceSetMemoryLimits_v1 failed: Not Supported")
    hook = DriverLimitHook(lookup, limits, ResourceNames(), cgroupfs=cgroupfs)
    sockdir = Path(tempfile.mkdtemp(prefix="vg"))
    kubelet = FakeKubelet(sockdir)
    kubelet.start()
    options = PluginOptions(
        plugin_dir=sockdir, register_timeout_s=2.0, stop_grace_s=0.2, pre_start=hook
    )
    plugins = start_plugins(parse_spec("1xT4"), options)
    try:
        assert kubelet.wait_for(lambda: len(kubelet.registrations) >= 2, 15)
        assert all(r.options.pre_start_required for r in kubelet.registrations)
        conn = kubelet.connection(MEMORY)
        assert conn.options.pre_start_required
        request = api_pb2.PreStartContainerRequest(devices_ids=[f"{GPU}::m0"])
        with pytest.raises(grpc.RpcError) as refused:
            conn.stub.PreStartContainer(request)
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "Not Supported" in str(refused.value.details())
        assert f"GPU {GPU}" in str(refused.value.details())
    finally:
        plugins.manager.stop(0.2)
        kubelet.stop()
        shutil.rmtree(sockdir, ignore_errors=True)


def test_the_handoff_records_name_the_pod_of_a_containers_device_ids() -> None:
    handoff = Handoff("n", b"k", clock=lambda: 0.0)
    for name, uid, gpu in (("a", "uid-a", "G0"), ("b", "uid-b", "G1")):
        shares = {"c": (gpu, 30)}
        handoff.observe(pod_info(pod(name, uid, [("c", 30)], **signed(name, uid, shares))))
    handoff.admit(PodKey("ns/b"), "c", UnitKind.CORES, ["G1::c0", "G1::c1"])
    found = handoff.pods_holding(UnitKind.CORES, ["G1::c1", "G1::c0"])
    assert found == [("uid-b", [(Role.APP, (GpuShare(GpuUUID("G1"), 30, 30000),))])]
    assert handoff.pods_holding(UnitKind.MEMORY, ["G1::c1", "G1::c0"]) == []
    assert handoff.pods_holding(UnitKind.CORES, ["G1::c0"]) == []


def test_while_an_attribution_is_unsure_prestart_limits_every_pod_that_may_be_the_caller(
    cgroupfs: Path,
) -> None:
    """Found by a tenant-side review: two interchangeable pods of two namespaces wait on one
    GPU; the kubelet admits the attacker's first and the agent records the call as the
    victim's (unsure until its next reconcile, about a second). PreStart then set the driver's
    limit on the victim's cgroup only, and the attacker's first container ran without one."""
    handoff = Handoff("n", b"k", clock=lambda: 0.0)
    for name, uid in (("victim", "uid-v"), ("attacker", "uid-x")):
        shares = {"c": ("G0", 30)}
        handoff.observe(pod_info(pod(name, uid, [("c", 30)], **signed(name, uid, shares))))
        pod_dir(cgroupfs, f"/kubepods/pod{uid}")
    ids = ["G0::c0", "G0::c1"]
    handoff.admit(PodKey("ns/victim"), "c", UnitKind.CORES, ids, unsure=True)
    limits = RecordingLimits()
    hook = DriverLimitHook(handoff.pods_holding, limits, ResourceNames(), cgroupfs=cgroupfs)
    hook("vgpu.io/cores", ids)
    limited = {cgroup.name for _, cgroup, _, _ in limits.calls}
    assert limited == {"poduid-v", "poduid-x"}  # each its own grant, whichever called
    assert {hard for _, _, hard, _ in limits.calls} == {30 * MIB}


def test_while_an_attribution_is_unsure_a_pod_not_started_yet_is_left_to_its_own_start(
    cgroupfs: Path,
) -> None:
    handoff = Handoff("n", b"k", clock=lambda: 0.0)
    for name, uid in (("victim", "uid-v"), ("attacker", "uid-x")):
        shares = {"c": ("G0", 30)}
        handoff.observe(pod_info(pod(name, uid, [("c", 30)], **signed(name, uid, shares))))
    ids = ["G0::c0", "G0::c1"]
    handoff.admit(PodKey("ns/victim"), "c", UnitKind.CORES, ids, unsure=True)
    limits = RecordingLimits()
    hook = DriverLimitHook(handoff.pods_holding, limits, ResourceNames(), cgroupfs=cgroupfs)
    with pytest.raises(Exception, match="none of the pods that may hold"):
        hook("vgpu.io/cores", ids)  # no cgroup at all: fail closed
    pod_dir(cgroupfs, "/kubepods/poduid-x")
    hook("vgpu.io/cores", ids)
    assert [cgroup.name for _, cgroup, _, _ in limits.calls] == ["poduid-x"]


@given(
    st.lists(
        st.tuples(st.sampled_from(list(Role)), st.sampled_from(["G0", "G1"]), st.integers(1, 4096)),
        max_size=6,
    )
)
def test_a_pods_limit_covers_each_container_and_never_the_sum_of_init_and_app(
    containers: list[tuple[Role, str, int]],
) -> None:
    shaped = [(role, (GpuShare(GpuUUID(g), 1, mib * 1000),)) for role, g, mib in containers]
    limits = pod_memory(shaped)
    for gpu in {g for _, g, _ in containers}:
        app = sum(m for r, g, m in containers if g == gpu and r is not Role.INIT) * MIB
        inits = [m * MIB for r, g, m in containers if g == gpu and r is Role.INIT]
        assert limits[gpu] >= max([app, *inits])
        assert limits[gpu] <= app + max(inits, default=0)


def test_devices_a_finished_pod_still_holds_in_the_records_limit_the_pod_now_holding_them(
    cgroupfs: Path,
) -> None:
    """Found by a tenant-side review: pod `done` finished (the kubelet frees its devices at its
    next Allocate) before the pod watch showed it, and the kubelet gave the same IDs to pod
    `next`. Both ledger entries held them; PreStart took the first and set the driver's limit
    on the finished pod's cgroup (still there until the kubelet's housekeeping), and `next`'s
    container started without one."""
    handoff, policy, _ = agent(bound_pod("done", [("c", 30, 0, "G0")]))
    devices = ids("G0", "c", 30)
    assert not isinstance(policy.allocate("vgpu.io/cores", [devices]), Refusal)
    handoff.observe(pod_info(bound_pod("next", [("c", 30, 0, "G0")])))
    assert not isinstance(policy.allocate("vgpu.io/cores", [devices]), Refusal)
    for uid in ("uid-done", "uid-next"):
        pod_dir(cgroupfs, f"/kubepods/pod{uid}")
    limits = RecordingLimits()
    hook = DriverLimitHook(handoff.pods_holding, limits, ResourceNames(), cgroupfs=cgroupfs)
    hook("vgpu.io/cores", devices)
    limited = {cgroup.name: hard for _, cgroup, hard, _ in limits.calls}
    assert limited["poduid-next"] == 30 * 16384 // 100 * MIB  # its own grant


@pytest.mark.parametrize(
    "shares",
    [
        (),  # the records give the container no share at all
        (GpuShare(GpuUUID("GPU-b"), 10, 2048 * 1000),),  # its share is on another GPU
    ],
)
def test_prestart_refuses_a_container_whose_devices_gpu_gets_no_limit(
    cgroupfs: Path, shares: tuple[GpuShare, ...]
) -> None:
    """Found by the issue-32 audit: PreStart set the limits the pod's records name and answered
    ok, whatever GPU the container's device IDs are on. A pod recorded with no share, or with
    its share on another GPU than the devices it holds, started with no driver limit on the
    GPU it was given."""
    pod_dir(cgroupfs, "/kubepods/pod0b5e-77")
    limits = RecordingLimits()
    hook = DriverLimitHook(
        lambda kind, ids: [(UID, [(Role.APP, shares)])], limits, ResourceNames(), cgroupfs=cgroupfs
    )
    with pytest.raises(PreStartRefused, match=f"no driver memory limit on GPU {GPU}"):
        hook(MEMORY, [f"{GPU}::m0"])


def test_under_the_driver_backend_an_unassigned_container_gets_no_devices(cgroupfs: Path) -> None:
    """Found by the issue-32 audit: with `--allow-unassigned`, pod `done` finished and the
    kubelet gave its freed devices to the unassigned pod `free` before the pod watch showed
    `done` finished. The default policy admitted `free` with no record; PreStart found only
    `done` holding those IDs, set the limit on its cgroup (still there until the kubelet's
    housekeeping) and answered ok, so `free` started with no driver limit. Under the driver
    backend an unassigned container could never be limited (it has no grant): it is refused
    at Allocate, naming why, and never holds the devices."""
    handoff = Handoff(NODE, KEY, clock=lambda: 0.0, grace_s=5.0)
    handoff.observe(pod_info(bound_pod("done", [("c", 30, 0, "G0")])))
    cfg = AgentConfig(NODE, KEY, memory_unit_mib=UNIT_MIB, allow_unassigned=True)
    policy = handoff_policy(
        cfg,
        ResourceNames(),
        GPUS,
        handoff,
        on_admit=lambda: None,
        refresh=lambda: None,
        driver_limits=True,
    )
    devices = ids("G0", "c", 30)
    assert not isinstance(policy.allocate("vgpu.io/cores", [devices]), Refusal)
    handoff.observe(pod_info(bound_pod("free", [("c", 30, 0, "G0")], sign=False)))
    refused = policy.allocate("vgpu.io/cores", [devices])
    assert isinstance(refused, Refusal)
    assert "driver's per-pod memory limits" in refused.reason
    # without the refusal, the PreStart hook would have limited `done` only
    for uid in ("uid-done", "uid-free"):
        pod_dir(cgroupfs, f"/kubepods/pod{uid}")
    limits = RecordingLimits()
    hook = DriverLimitHook(handoff.pods_holding, limits, ResourceNames(), cgroupfs=cgroupfs)
    hook("vgpu.io/cores", devices)
    assert [cgroup.name for _, cgroup, _, _ in limits.calls] == ["poduid-done"]
