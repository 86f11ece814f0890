"""The hand-off end to end on one node: fake API server over HTTP, stand-in kubelet and
pod-resources over unix sockets, the agent in-process. Each case ends with every container on
exactly the GPU its assignment names, or with a clear refusal."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from tests.node.agent_harness import CORES, KEY, MEMORY, Box, gpu_of, make_box
from tests.waiting import holds_within
from vgpu.api.assignment import ASSIGNMENT, SIGNATURE, binding_annotations
from vgpu.core.ids import PodKey
from vgpu.node.handoff.admissions import HeldDevices


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def test_pending_pod_is_steered_to_its_gpu_granted_and_marked_admitted(box: Box) -> None:
    box.start_agent()
    box.place("a", [("main", 30, 0)], {"main": [(1, 30)]})  # GPU 1: not the kubelet's default
    ids, envs = box.admit("a", "main", CORES, 30)
    assert gpu_of(ids) == {box.gpus[1]} and len(ids) == 30
    assert envs["CUDA_VISIBLE_DEVICES"] == box.gpus[1]
    assert envs["VGPU_CORES"] == "30"
    assert envs["VGPU_MEMORY_LIMIT_MIB"] == str(15360 * 30 // 100)
    assert holds_within(lambda: box.admitted("a") == ["main"])


def test_a_pod_the_kubelet_sees_before_the_agents_watch_is_steered_and_granted(
    box: Box, caplog: pytest.LogCaptureFixture
) -> None:
    """The kubelet's own watch may deliver the bind first (seen on the real cluster):
    GetPreferredAllocation re-lists the node's pods, so the call lands on the assigned GPU."""
    agent = box.start_agent()
    assert agent.inventory is not None
    last = max(agent.inventory.gpus, key=lambda g: g.index).uuid  # binpacking picks index 0
    target = box.gpus.index(last)
    box.place("a", [("main", 30, 0)], {"main": [(target, 30)]})
    box.agent.handoff.forget(PodKey("default/a"))  # as if our watch had not delivered it yet
    with caplog.at_level(logging.INFO, logger="vgpu"):
        ids, envs = box.admit("a", "main", CORES, 30)
    assert gpu_of(ids) == {last} and envs["CUDA_VISIBLE_DEVICES"] == last
    assert "refresh for a device-plugin call found default/a" in caplog.text
    assert "GetPreferredAllocation of 30 devices matched default/a only after" in caplog.text
    assert holds_within(lambda: box.admitted("a") == ["main"])


def test_a_twin_the_agents_watch_has_not_shown_makes_the_first_call_unsure(
    box: Box, caplog: pytest.LogCaptureFixture
) -> None:
    """a and b are equal (same ask, GPU and grant); our watch shows a, not yet b, and the
    kubelet admits b. Its Allocate matches a, but would start a's admission for sure: the agent
    re-lists first, finds b, and reports nobody admitted until the kubelet's record says."""
    box.start_agent()
    box.place("a", [("main", 25, 0)], {"main": [(1, 25)]})
    box.place("b", [("main", 25, 0)], {"main": [(1, 25)]})
    box.agent.handoff.forget(PodKey("default/b"))  # as if our watch had not delivered it yet
    with caplog.at_level(logging.INFO, logger="vgpu"):
        ids, _ = box.admit("b", "main", CORES, 25)  # pod-resources: b holds them
    assert gpu_of(ids) == {box.gpus[1]}
    assert "refresh for a device-plugin call found default/b" in caplog.text
    assert holds_within(lambda: box.admitted("b") == ["main"])  # settled by reconciliation
    assert box.admitted("a") in (None, []), "a reported admitted by b's call"


def test_equal_pods_pending_on_different_gpus_are_never_swapped(box: Box) -> None:
    # Invariant I keeps the extender from doing this; the node must still refuse, not guess.
    box.start_agent()
    box.place("a", [("main", 30, 0)], {"main": [(0, 30)]})
    box.place("b", [("main", 30, 0)], {"main": [(1, 30)]})
    message = box.refused(CORES, 30)  # the kubelet admits one of them: which, nobody knows
    assert "default/a" in message and "default/b" in message and "swap" in message
    box.set_phase("b", "Failed")  # the kubelet fails the pod it was admitting
    assert holds_within(lambda: "default/b" not in box.agent.handoff.pods())
    ids, envs = box.admit("a", "main", CORES, 30)
    assert gpu_of(ids) == {box.gpus[0]} and envs["CUDA_VISIBLE_DEVICES"] == box.gpus[0]
    assert holds_within(lambda: box.admitted("a") == ["main"])


def test_multi_container_pod_in_spec_order_with_memory(box: Box) -> None:
    box.start_agent()
    box.place(
        "p",
        [("c1", 30, 4), ("c2", 30, 0)],
        {"c1": [(1, 30)], "c2": [(0, 30)]},
    )
    ids1, envs1 = box.admit("p", "c1", CORES, 30)
    mem, envs_mem = box.admit("p", "c1", MEMORY, 4)
    ids2, envs2 = box.admit("p", "c2", CORES, 30)
    assert gpu_of(ids1) == gpu_of(mem) == {box.gpus[1]} and gpu_of(ids2) == {box.gpus[0]}
    assert envs1["VGPU_MEMORY_LIMIT_MIB"] == "4096" and envs2["VGPU_MEMORY_LIMIT_MIB"] == "4608"
    assert envs_mem == {"VGPU_MEMORY_GPUS": box.gpus[1], "VGPU_MEMORY_BLOCKS": "4"}
    assert holds_within(lambda: box.admitted("p") == ["c1", "c2"])


def test_init_container_is_admitted_first(box: Box) -> None:
    box.start_agent()
    pod = box.create_pod("i", [("main", 20, 0)], init=[("setup", 50, 0)])
    assignment = box.assignment(pod, {"setup": [(1, 50)], "main": [(0, 20)]})
    box.bind(pod, binding_annotations(assignment, KEY))
    ids, _ = box.admit("i", "setup", CORES, 50)
    assert gpu_of(ids) == {box.gpus[1]}
    ids, _ = box.admit("i", "main", CORES, 20)
    assert gpu_of(ids) == {box.gpus[0]}
    assert holds_within(lambda: box.admitted("i") == ["main", "setup"])


def test_pod_deleted_between_bind_and_admission_is_refused(box: Box) -> None:
    box.start_agent()
    box.place("gone", [("main", 30, 0)], {"main": [(0, 30)]})
    box.api.store.remove("Pod", "default", "gone")
    assert holds_within(lambda: "default/gone" not in box.agent.handoff.pods())
    message = box.refused(CORES, 30)
    assert any(g in message for g in box.gpus) and "nothing assigned there" in message


def test_deleting_an_admitted_pod_has_the_kubelet_free_and_checkpoint_its_devices(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubelet frees a deleted pod's devices at a pod-resources List and checkpoints that at
    a ListAndWatch update; a restart before both would reload them as taken (docs/handshake.md).
    So after the deletion the agent calls List, then sends its unchanged device lists again."""
    agent = box.start_agent(stale_sync_s=0.2, reconcile_s=60)
    box.place("a", [("main", 30, 0)], {"main": [(0, 30)]})
    box.admit("a", "main", CORES, 30)
    assert holds_within(lambda: box.admitted("a") == ["main"])
    lists: list[float] = []
    held = agent.pod_resources.held

    def listing() -> list[HeldDevices]:
        lists.append(time.monotonic())
        return held()

    monkeypatch.setattr(agent.pod_resources, "held", listing)
    before = {r: box.kubelet.connection(r).updates for r in (CORES, MEMORY)}
    box.podres.pods.clear()
    box.api.store.remove("Pod", "default", "a")
    assert holds_within(lambda: "default/a" not in agent.handoff.pods())
    assert box.kubelet.wait_for(
        lambda: all(box.kubelet.connection(r).updates > before[r] for r in (CORES, MEMORY))
    ), "no ListAndWatch update after the deletion"
    resent = time.monotonic()
    assert lists and lists[0] <= resent, "no pod-resources List before the update"
    assert box.kubelet.devices(CORES) and all(
        h == "Healthy" for h in box.kubelet.devices(CORES).values()
    )


def test_forged_assignment_is_refused_with_an_event(box: Box) -> None:
    box.start_agent()
    pod = box.create_pod("forged", [("main", 30, 0)])
    annotations = binding_annotations(box.assignment(pod, {"main": [(0, 30)]}), b"guessed")
    box.bind(pod, annotations)
    assert "forged" in (box.agent.handoff.problem("default/forged") or "")  # type: ignore[arg-type]
    message = box.refused(CORES, 30)
    assert "no pending container asks 30" in message
    assert holds_within(lambda: len(box.events("VgpuUnassigned")) == 1)


def test_copied_assignment_cannot_take_the_original_pods_share(box: Box) -> None:
    box.start_agent()
    box.place("orig", [("main", 30, 0)], {"main": [(1, 30)]})
    annotations = box.pod("orig")["metadata"]["annotations"]
    copy = box.create_pod("copy", [("main", 30, 0)])
    box.bind(copy, {ASSIGNMENT: annotations[ASSIGNMENT], SIGNATURE: annotations[SIGNATURE]})
    assert "copied" in (box.agent.handoff.problem("default/copy") or "")  # type: ignore[arg-type]
    # Whichever pod the kubelet admits now, the agent cannot tell: refuse, never hand out.
    message = box.refused(CORES, 30)
    assert "default/copy" in message
    box.set_phase("copy", "Failed")
    assert holds_within(lambda: "default/copy" not in box.agent.handoff.pods())
    ids, _ = box.admit("orig", "main", CORES, 30)
    assert gpu_of(ids) == {box.gpus[1]}


def test_kubelet_ignoring_the_preference_is_refused(box: Box) -> None:
    box.start_agent()
    box.place("a", [("main", 30, 0)], {"main": [(1, 30)]})
    message = box.refused(CORES, 30, use_preferred=False)  # kubelet picks GPU 0
    assert box.gpus[0] in message and "no pending container asks 30 cores" in message
    ids, _ = box.admit("a", "main", CORES, 30)  # the recreated pod, with the preference
    assert gpu_of(ids) == {box.gpus[1]}


def test_restart_rebuilds_admitted_set_from_pod_resources(box: Box) -> None:
    box.start_agent()
    box.place("a", [("main", 30, 0)], {"main": [(1, 30)]})
    box.admit("a", "main", CORES, 30)
    assert holds_within(lambda: box.admitted("a") == ["main"])
    box.stop_agent()
    agent = box.start_agent()
    assert agent.handoff.admitted_containers("default/a") == ["main"]  # type: ignore[arg-type]
    assert agent.handoff.candidates(box.agent.names.kind_of(CORES), 30) == []
    assert "no pending container asks 30 cores" in box.refused(CORES, 30)
    assert agent.mismatches == []


def test_ids_differing_from_the_assignment_are_reported(box: Box) -> None:
    box.start_agent(admission_grace_s=0.0)
    box.place("a", [("main", 30, 0)], {"main": [(1, 30)]})
    box.hold("a", "main", CORES, [f"{box.gpus[0]}::c{k}" for k in range(30)])
    assert holds_within(lambda: len(box.agent.mismatches) == 1)
    assert box.gpus[0] in box.agent.mismatches[0][1]
    assert holds_within(lambda: len(box.events("VgpuAssignmentMismatch")) == 1)
