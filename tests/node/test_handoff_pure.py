"""Pure parts of the hand-off: reading pods, verifying assignments, matching order, grants."""

from __future__ import annotations

import logging

import pytest

from tests.pods import Obj, container, pod_obj
from vgpu.api.assignment import binding_annotations
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare
from vgpu.node.devices import UnitKind
from vgpu.node.grants import GpuLimit, GrantMode, GrantSettings, Refusal, container_grant
from vgpu.node.handoff.admissions import Handoff, HeldDevices, check_assignment
from vgpu.node.podspec import pod_info

KEY = b"k"


def pod(name: str, uid: str, containers: list[tuple[str, int]], **annotations: str) -> Obj:
    return pod_obj(
        name,
        [container(c, cores=k) for c, k in containers],
        namespace="ns",
        uid=uid,
        annotations=annotations,
        node="n",
        phase="Pending",
        kind=False,
    )


def signed(
    name: str, uid: str, shares: dict[str, tuple[str, int]], node: str = "n"
) -> dict[str, str]:
    assignment = Assignment(
        PodKey(f"ns/{name}"),
        NodeName(node),
        containers=tuple(
            ContainerAssignment(c, (GpuShare(GpuUUID(g), k, k * 1000),))
            for c, (g, k) in shares.items()
        ),
        uid=uid,
    )
    return binding_annotations(assignment, KEY)


def test_pod_info_orders_init_first_and_reports_bad_quantities() -> None:
    raw = pod("p", "u", [("main", 30)])
    raw["spec"]["initContainers"] = [
        {"name": "init", "resources": {"limits": {"vgpu.io/cores": "100", "vgpu.io/memory": "x"}}}
    ]
    info = pod_info(raw)
    assert [(c.name, c.init) for c in info.containers] == [("init", True), ("main", False)]
    assert info.problems and "not a whole number" in info.problems[0]


def test_check_assignment_names_each_kind_of_bad_assignment() -> None:
    good = pod_info(pod("a", "u1", [("c", 30)], **signed("a", "u1", {"c": ("G0", 30)})))
    assignment, problem = check_assignment(good, "n", KEY)
    assert assignment is not None and assignment.uid == "u1" and problem is None
    cases = {
        "no vgpu.io/assignment": pod("a", "u1", [("c", 30)]),
        "forged": pod(
            "a",
            "u1",
            [("c", 30)],
            **signed("a", "u1", {"c": ("G0", 30)}) | {"vgpu.io/assignment-signature": "00"},
        ),
        "copied": pod("b", "u2", [("c", 30)], **signed("a", "u1", {"c": ("G0", 30)})),
        "not ns/a on n": pod("a", "u1", [("c", 30)], **signed("a", "u1", {"c": ("G0", 30)}, "m")),
        "asks 40 cores": pod("a", "u1", [("c", 40)], **signed("a", "u1", {"c": ("G0", 30)})),
    }
    for needle, raw in cases.items():
        assignment, problem = check_assignment(pod_info(raw), "n", KEY)
        assert assignment is None and problem is not None and needle in problem, needle


def test_candidates_follow_spec_order_and_reconcile_rebuilds() -> None:
    now = [0.0]
    handoff = Handoff("n", KEY, clock=lambda: now[0], grace_s=5.0)
    raw = pod(
        "p", "u", [("c1", 30), ("c2", 30)], **signed("p", "u", {"c1": ("G0", 30), "c2": ("G1", 30)})
    )
    assert handoff.observe(pod_info(raw)) is None
    (first,) = handoff.candidates(UnitKind.CORES, 30)
    assert first.container.name == "c1" and first.gpus == {"G0"}
    handoff.admit(first.pod, "c1", UnitKind.CORES, ["G0::c0"])
    (second,) = handoff.candidates(UnitKind.CORES, 30)
    assert second.container.name == "c2" and second.in_progress
    now[0] = 10.0  # past the grace period: only what the kubelet reports survives
    reports = handoff.reconcile([HeldDevices(first.pod, "c2", UnitKind.CORES, ("G0::c1",) * 30)])
    assert handoff.admitted_containers(first.pod) == ["c2"]
    assert reports and "G0" in reports[0][1] and "G1" in reports[0][1]


def test_hami_grant_and_cores_limit_below_ask() -> None:
    gpus = [GpuLimit("G0", 30, 4096)]
    grant = container_grant(gpus, GrantSettings(GrantMode.HAMI), cores_limit=None)
    assert not isinstance(grant, Refusal)
    assert grant.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "4096m"
    assert grant.envs["CUDA_DEVICE_SM_LIMIT"] == "30"
    assert grant.envs["VGPU_MEMORY_LIMIT_BYTES"] == str(4096 * 1024 * 1024)
    refused = container_grant(gpus, GrantSettings(), cores_limit=20)
    assert isinstance(refused, Refusal) and "below the 30 cores" in refused.reason


def test_allocate_catches_up_with_a_pod_the_watch_has_not_shown_yet() -> None:
    """The kubelet may admit a bound pod before the agent's watch delivers it: the policy asks
    for a refresh once, then matches; without one it would refuse."""
    from vgpu.node.handoff.allocate import HandoffPolicy
    from vgpu.node.model import GpuInfo

    handoff = Handoff("n", KEY, clock=lambda: 0.0, grace_s=5.0)
    late = pod_info(pod("late", "u9", [("c", 30)], **signed("late", "u9", {"c": ("G0", 30)})))
    refreshes: list[int] = []

    def refresh() -> None:
        refreshes.append(1)
        handoff.observe(late)

    gpus = [GpuInfo("G0", 0, "Tesla T4", 16384)]
    ids = [f"G0::c{k}" for k in range(30)]
    blind = HandoffPolicy(
        Handoff("n", KEY, clock=lambda: 0.0, grace_s=5.0), gpus, memory_unit_mib=256
    )
    assert isinstance(blind.allocate("vgpu.io/cores", [ids]), Refusal)
    policy = HandoffPolicy(handoff, gpus, memory_unit_mib=256, refresh=refresh)
    grants = policy.allocate("vgpu.io/cores", [ids])
    assert not isinstance(grants, Refusal)
    assert grants[0].envs["CUDA_VISIBLE_DEVICES"] == "G0"
    assert refreshes == [1]


def test_reconcile_moves_an_interchangeable_admission_to_the_real_holder() -> None:
    """Two equal pods pending on one GPU are interchangeable at Allocate; when the kubelet's
    record says the *other* pod holds the IDs, the snapshot wins within the grace period too,
    so the first pod is pending again and its own Allocate still matches."""
    handoff = Handoff("n", KEY, clock=lambda: 0.0, grace_s=5.0)
    for name, uid in (("a", "ua"), ("b", "ub")):
        raw = pod(name, uid, [("main", 25)], **signed(name, uid, {"main": ("G0", 25)}))
        assert handoff.observe(pod_info(raw)) is None
    ids = tuple(f"G0::c{k}" for k in range(25))
    chosen = handoff.candidates(UnitKind.CORES, 25)[0]
    handoff.admit(chosen.pod, "main", UnitKind.CORES, ids)  # attributed to one of the two
    other = PodKey("ns/b") if chosen.pod == PodKey("ns/a") else PodKey("ns/a")
    handoff.reconcile([HeldDevices(other, "main", UnitKind.CORES, ids)])  # the kubelet knows better
    assert handoff.admitted_containers(other) == ["main"]
    assert handoff.admitted_containers(chosen.pod) == []
    assert [c.pod for c in handoff.candidates(UnitKind.CORES, 25)] == [chosen.pod]


def test_preferred_catches_up_with_a_pod_the_watch_has_not_shown_yet() -> None:
    """The kubelet learns of the bind from its own watch and calls GetPreferredAllocation before
    Allocate (pkg/kubelet/cm/devicemanager/manager.go, devicesToAllocate): if the agent's watch
    is behind there too, binpacking steers the call to G0 while the extender chose G1, and the
    Allocate that follows is refused however much it refreshes. Seen on the real cluster."""
    from vgpu.node.handoff.allocate import HandoffPolicy
    from vgpu.node.model import GpuInfo

    handoff = Handoff("n", KEY, clock=lambda: 0.0, grace_s=5.0)
    late = pod_info(pod("late", "u9", [("c", 30)], **signed("late", "u9", {"c": ("G1", 30)})))
    gpus = [GpuInfo("G0", 0, "Tesla T4", 16384), GpuInfo("G1", 1, "Tesla T4", 16384)]

    def refresh() -> None:
        handoff.observe(late)

    policy = HandoffPolicy(handoff, gpus, memory_unit_mib=256, refresh=refresh)
    available = [f"G{g}::c{k}" for g in (0, 1) for k in range(100)]
    ids = policy.preferred("vgpu.io/cores", available, [], 30)
    assert {i.split("::")[0] for i in ids} == {"G1"}, ids
    grants = policy.allocate("vgpu.io/cores", [ids])
    assert not isinstance(grants, Refusal), grants
    assert grants[0].envs["CUDA_VISIBLE_DEVICES"] == "G1"


def test_a_kubelet_withholding_the_assigned_devices_is_named_in_the_log_and_the_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After a restart the kubelet may still count devices of pods deleted before it as allocated
    (seen on the real cluster): steering cannot help, the refusal is certain; the log and the
    refusal say what the kubelet offered and where the pod's assignment is."""
    from vgpu.node.handoff.allocate import HandoffPolicy
    from vgpu.node.model import GpuInfo

    handoff = Handoff("n", KEY, clock=lambda: 0.0, grace_s=5.0)
    handoff.observe(pod_info(pod("p", "u1", [("c", 100)], **signed("p", "u1", {"c": ("G1", 100)}))))
    gpus = [GpuInfo("G0", 0, "Tesla T4", 16384), GpuInfo("G1", 1, "Tesla T4", 16384)]
    policy = HandoffPolicy(handoff, gpus, memory_unit_mib=256)
    available = [f"G0::c{k}" for k in range(100)] + [f"G1::c{k}" for k in range(30, 100)]
    with caplog.at_level(logging.WARNING, logger="vgpu.node.handoff.allocate"):
        ids = policy.preferred("vgpu.io/cores", available, [], 100)
    assert "the kubelet offers 70 of 100 on G1 for ns/p/c's assignment" in caplog.text
    refusal = policy.allocate("vgpu.io/cores", [ids])
    assert isinstance(refusal, Refusal)
    assert "pending with this ask elsewhere: ns/p/c on G1" in refusal.reason


@pytest.mark.parametrize("end", ["finished, then deleted", "replaced, its deletion unseen"])
def test_a_new_pod_of_a_reused_name_gets_its_admitted_annotation(end: str) -> None:
    """What was written to a pod's `vgpu.io/admitted` belongs to that incarnation: a new pod of
    the same name, admitted alike, is written too (else the extender waits on it for ever)."""
    handoff = Handoff("n", KEY, clock=lambda: 0.0)
    key = PodKey("ns/p")

    def admit(uid: str) -> list[tuple[PodKey, str]]:
        raw = pod("p", uid, [("c", 30)], **signed("p", uid, {"c": ("G0", 30)}))
        assert handoff.observe(pod_info(raw)) is None
        handoff.admit(key, "c", UnitKind.CORES, [f"G0::c{i}" for i in range(30)])
        return handoff.annotation_updates()

    assert admit("u1") == [(key, '["c"]')]
    handoff.patched(key, '["c"]')
    if end == "finished, then deleted":
        done = pod("p", "u1", [("c", 30)], **signed("p", "u1", {"c": ("G0", 30)}))
        done["status"]["phase"] = "Succeeded"
        handoff.observe(pod_info(done))
        handoff.forget(key, "u1")
    assert admit("u2") == [(key, '["c"]')]


def _init_pod(uid: str, *, main: int, status: Obj | None = None) -> Obj:
    """A pod whose init container `setup` asks 30 cores on G0 before `main` asks `main`."""
    shares = {"setup": ("G0", 30)} | ({"main": ("G0", main)} if main else {})
    raw = pod("p", uid, [("main", main)], **signed("p", uid, shares))
    raw["spec"]["initContainers"] = [container("setup", cores=30)]
    if status:
        raw["status"] |= status
    return raw


def test_init_containers_stay_admitted_once_the_kubelet_lists_an_app_container() -> None:
    """The kubelet's pod-resources List reports app (and restartable init) containers only
    (pkg/kubelet/apis/podresources/server_v1.go), and it allocates every container of a pod at
    admission, init containers first (pkg/kubelet/cm/topologymanager/scope_container.go): an app
    container holding devices means the init containers were allocated. They stay admitted for
    the pod's life, also when the app container reuses their IDs (manager.go's reuse pool)."""
    now = [0.0]
    handoff = Handoff("n", KEY, clock=lambda: now[0], grace_s=5.0)
    key = PodKey("ns/p")
    handoff.observe(pod_info(_init_pod("u1", main=30)))
    ids = tuple(f"G0::c{k}" for k in range(30))
    handoff.admit(key, "setup", UnitKind.CORES, ids)
    handoff.admit(key, "main", UnitKind.CORES, ids)  # from the reuse pool: the same IDs
    for t in (1.0, 60.0, 3600.0):
        now[0] = t
        handoff.reconcile([HeldDevices(key, "main", UnitKind.CORES, ids)])
        assert handoff.admitted_containers(key) == ["main", "setup"], t
    restarted = Handoff("n", KEY, clock=lambda: now[0], grace_s=5.0)  # an agent restart
    restarted.observe(pod_info(_init_pod("u1", main=30)))
    restarted.reconcile([HeldDevices(key, "main", UnitKind.CORES, ids)])
    assert restarted.admitted_containers(key) == ["main", "setup"]
    assert restarted.candidates(UnitKind.CORES, 30) == []


def test_an_init_container_is_admitted_once_a_container_of_its_pod_has_started() -> None:
    """A pod whose only vGPU container is an init container has nothing in the List; a started
    container in its status means the kubelet admitted it, so allocated all its containers."""
    now = [0.0]
    handoff = Handoff("n", KEY, clock=lambda: now[0], grace_s=5.0)
    key = PodKey("ns/p")
    handoff.observe(pod_info(_init_pod("u1", main=0)))
    handoff.admit(key, "setup", UnitKind.CORES, [f"G0::c{k}" for k in range(30)])
    now[0] = 60.0
    handoff.reconcile([])
    assert handoff.admitted_containers(key) == []  # not known to be admitted: pending (safe)
    started = {"initContainerStatuses": [{"name": "setup", "state": {"terminated": {}}}]}
    handoff.observe(pod_info(_init_pod("u1", main=0, status=started)))
    handoff.reconcile([])
    assert handoff.admitted_containers(key) == ["setup"]


def test_a_pod_part_way_through_admission_keeps_its_later_containers_pending() -> None:
    """Only containers the kubelet allocates before a listed one are implied: an app container
    not yet allocated stays pending, whatever its init containers did."""
    handoff = Handoff("n", KEY, clock=lambda: 100.0, grace_s=5.0)
    key = PodKey("ns/p")
    raw = pod(
        "p", "u1", [("a", 30), ("b", 30)], **signed("p", "u1", {"a": ("G0", 30), "b": ("G1", 30)})
    )
    raw["spec"]["initContainers"] = [container("setup", cores=0)]
    handoff.observe(pod_info(raw))
    handoff.reconcile([HeldDevices(key, "a", UnitKind.CORES, ("G0::c0",) * 30)])
    assert handoff.admitted_containers(key) == ["a"]
    assert [c.container.name for c in handoff.candidates(UnitKind.CORES, 30)] == ["b"]


def test_a_pod_first_seen_deleting_may_still_be_admitted_so_its_twin_is_not_refused() -> None:
    """The kubelet admits a pod it first sees already deleting, devices included
    (`HandlePodAdditions`, pkg/kubelet/kubelet.go: admission is skipped only once the pod
    worker was asked to terminate it). The agent dropped such a pod at once, so its Allocate was
    credited as sure to a same-shape pod waiting on that GPU, whose own Allocate was refused."""
    from vgpu.node.handoff.allocate import HandoffPolicy
    from vgpu.node.model import GpuInfo

    handoff = Handoff("n", KEY, clock=lambda: 0.0, grace_s=5.0)
    for name, uid in (("going", "ug"), ("twin", "ut")):
        raw = pod(name, uid, [("main", 30)], **signed(name, uid, {"main": ("G0", 30)}))
        if name == "going":
            raw["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
        handoff.observe(pod_info(raw))
    policy = HandoffPolicy(handoff, [GpuInfo("G0", 0, "Tesla T4", 16384)], memory_unit_mib=256)
    for first in (0, 30):  # the deleting pod's Allocate, then the twin's
        grants = policy.allocate("vgpu.io/cores", [[f"G0::c{k}" for k in range(first, first + 30)]])
        assert not isinstance(grants, Refusal), grants


def test_a_deleting_pod_that_started_or_finished_is_let_go() -> None:
    handoff = Handoff("n", KEY, clock=lambda: 0.0, grace_s=5.0)
    raw = pod("going", "ug", [("main", 30)], **signed("going", "ug", {"main": ("G0", 30)}))
    raw["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    raw["status"]["containerStatuses"] = [{"name": "main", "state": {"running": {}}}]
    handoff.observe(pod_info(raw))
    assert handoff.pods() == []
    raw["status"] = {"phase": "Failed"}
    handoff.observe(pod_info(raw))
    assert handoff.pods() == []
