"""The preempt verb over real HTTP: only candidates where evicting the victims frees a GPU the
pod fits on are kept; victims come back as they were sent."""

from __future__ import annotations

import json
from typing import Any

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until

Obj = dict[str, Any]


def preemption_cluster(harness: Harness) -> tuple[Wire, dict[str, str]]:
    """n1: 2 GPUs, 60 cores taken on one by pod a and 50 on the other by pod b (sizes differ so
    neither waits for the other's admission), plus a CPU-only pod c; n2: 1 idle GPU. Returns
    the wire and the UIDs by pod name."""
    harness.put(make_node("n1", gpus=2))
    harness.put(make_node("n2", gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    for name, cores in (("a", 60), ("b", 50), ("c", 0)):
        harness.put(make_pod(name, cores=cores))
        assert wire.bind(harness.pod(name), "n1") == ""
    wait_until(lambda: len(daemon.cache.ledger.on_node("n1")) == 3)  # type: ignore[arg-type]
    return wire, {n: harness.pod(n)["metadata"]["uid"] for n in ("a", "b", "c")}


def _meta(victims: dict[str, list[str]]) -> Obj:
    return {
        node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 1}
        for node, uids in victims.items()
    }


def _preempt(wire: Wire, pod: Obj, victims: dict[str, list[str]]) -> dict[str, list[str]]:
    reply = wire.post("preempt", {"Pod": pod, "NodeNameToMetaVictims": _meta(victims)})
    nodes = reply["NodeNameToMetaVictims"]
    assert all(v["NumPDBViolations"] == 1 for v in nodes.values())  # passed through
    return {node: [p["UID"] for p in v["Pods"]] for node, v in nodes.items()}


def test_only_nodes_where_the_victims_free_a_whole_gpu_share_are_kept(harness: Harness) -> None:
    wire, uid = preemption_cluster(harness)
    pod = harness.shown(make_pod("p", cores=80))
    asked = {"n1": [uid["a"]], "n2": []}
    assert _preempt(wire, pod, asked) == asked  # a's GPU is free once a is gone; n2 fits as is
    # 40 and 50 cores free: no single GPU can hold 80 without evicting a or b
    assert _preempt(wire, pod, {"n1": []}) == {}
    assert _preempt(wire, pod, {"n1": [uid["c"]]}) == {}  # evicting a CPU-only pod frees no GPU
    both = {"n1": [uid["c"], uid["b"]]}
    assert _preempt(wire, pod, both) == both  # victims are never spared


def test_the_full_pod_form_is_understood(harness: Harness) -> None:
    wire, _ = preemption_cluster(harness)
    victims = {"n1": {"Pods": [harness.pod("b")], "NumPDBViolations": 0}}
    pod = harness.shown(make_pod("p", cores=80))
    reply = wire.post("preempt", {"Pod": pod, "NodeNameToVictims": victims})
    assert reply == {
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": harness.pod("b")["metadata"]["uid"]}], "NumPDBViolations": 0}
        }
    }


def test_pods_without_vgpu_get_the_candidates_back(harness: Harness) -> None:
    wire, uid = preemption_cluster(harness)
    asked = {"n1": [uid["c"]]}
    assert _preempt(wire, harness.shown(make_pod("cpu", cores=0)), asked) == asked


def test_a_gang_member_gets_no_eviction_that_frees_no_gpu_it_fits(harness: Harness) -> None:
    """A tenant annotated a pod as a gang of one: every candidate came back unchanged, and
    another team's CPU-only pod was evicted for an 80-core pod that still could not fit."""
    wire, uid = preemption_cluster(harness)
    gang = {"vgpu.io/gang-name": "g1", "vgpu.io/gang-size": "1"}
    member = harness.shown(make_pod("w1", cores=80, annotations=gang))
    assert _preempt(wire, member, {"n1": [uid["c"]]}) == {}
    assert _preempt(wire, member, {"n1": [uid["a"]]}) == {"n1": [uid["a"]]}


def test_a_gang_member_waiting_for_members_evicts_nobody(harness: Harness) -> None:
    """A tenant's high-priority pod names a gang of 100 and is its only member: its filter can
    only answer "waiting for members", whatever is evicted, yet the candidates came back
    unchanged (for a CPU-only or claim member, always), so kube-scheduler evicted another
    team's pods for a pod that stays pending, node after node."""
    wire, uid = preemption_cluster(harness)
    gang = {"vgpu.io/gang-name": "big", "vgpu.io/gang-size": "100"}
    gpu = harness.shown(make_pod("big-0", cores=80, annotations=gang))
    cpu = harness.shown(make_pod("big-1", cores=0, annotations=gang))
    for member in (gpu, cpu):
        assert _preempt(wire, member, {"n1": [uid["a"]], "n2": []}) == {}
        assert "waiting for members, 2 of 100" in wire.filter(member, ["n2"])["FailedNodes"]["n2"]


def test_a_gang_members_own_reservation_does_not_block_its_preemption(harness: Harness) -> None:
    """The gang's reservations move when it is planned again, so they are set aside: a member
    reserved on the node it preempts for is not counted against itself."""
    harness.put(make_node("n1", gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    harness.put(make_pod("low", cores=20))
    assert wire.bind(harness.pod("low"), "n1") == ""
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}
    for name in ("m0", "m1"):  # both watched: a member not yet seen leaves the gang waiting
        harness.shown(make_pod(name, cores=40, annotations=gang))
    assert wire.filter(harness.pod("m0"), ["n1"])["NodeNames"] == ["n1"]  # both reserved on n1
    wait_until(lambda: len(daemon.cache.ledger.on_node("n1")) == 3)  # type: ignore[arg-type]
    low = harness.pod("low")["metadata"]["uid"]
    assert _preempt(wire, harness.pod("m1"), {"n1": [low]}) == {"n1": [low]}


def test_bad_preemption_requests_get_400(harness: Harness) -> None:
    wire, uid = preemption_cluster(harness)
    pod = harness.shown(make_pod("p", cores=80))
    bad = harness.shown(make_pod("bad", cores="lots"))  # its watched version is unreadable
    bodies = [
        {"Pod": pod},
        {"Pod": pod, "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": ""}]}}},
        {"Pod": pod, "NodeNameToMetaVictims": {"n1": {"Pods": "a"}}},
        {"Pod": bad, "NodeNameToMetaVictims": _meta({"n1": []})},
    ]
    for body in bodies:
        status, text = wire.raw("POST", "/scheduler/preempt", json.dumps(body).encode())
        assert status == 400, (body, text)
        assert text.startswith(b"preempt") or b"NodeNameTo" in text
    assert _preempt(wire, pod, {"n1": [uid["a"]]}) == {"n1": [uid["a"]]}  # still serving


def _queued_cluster(harness: Harness) -> tuple[Wire, dict[str, str]]:
    """n1: one GPU, 60 cores held by team-b's pod `b` (queue qb), 30 by team-a's `a2` (queue
    qa); the label is set from the namespace at creation (`vgpu-queue-gate`)."""
    harness.put(make_node("n1", gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    for name, ns, queue, cores in (("b", "team-b", "qb", 60), ("a2", "team-a", "qa", 30)):
        harness.put(make_pod(name, cores=cores, namespace=ns, labels={"vgpu.io/queue": queue}))
        assert wire.bind(harness.pod(name, ns), "n1") == ""
    wait_until(lambda: len(daemon.cache.ledger.on_node("n1")) == 2)  # type: ignore[arg-type]
    return wire, {
        n: harness.pod(n, ns)["metadata"]["uid"] for n, ns in (("b", "team-b"), ("a2", "team-a"))
    }


def test_priority_preemption_never_evicts_another_queues_pods(harness: Harness) -> None:
    """A team at its queue's share gave its pod a higher PriorityClass and an affinity its
    reserved node does not meet: its filter failed, kube-scheduler preempted, and the verb kept
    the node whose victim was another team's pod, so team-b lost a running pod outside reclaim's
    rules (its queue's share, minimum runtime, no ping-pong). Across queues only reclaim evicts."""
    wire, uid = _queued_cluster(harness)
    queued = {"vgpu.io/queue": "qa"}
    mine = harness.shown(make_pod("a1", cores=60, namespace="team-a", labels=queued))
    assert _preempt(wire, mine, {"n1": [uid["b"]]}) == {}
    assert _preempt(wire, mine, {"n1": [uid["a2"], uid["b"]]}) == {}
    # a pod of no queue (its namespace bound to none) evicts no queued pod either
    outsider = harness.shown(make_pod("o", cores=60, namespace="lab"))
    assert _preempt(wire, outsider, {"n1": [uid["b"]]}) == {}


def test_priority_preemption_inside_one_queue_still_evicts(harness: Harness) -> None:
    wire, uid = _queued_cluster(harness)
    queued = {"vgpu.io/queue": "qa"}
    mine = harness.shown(make_pod("a1", cores=80, namespace="team-a-dev", labels=queued))
    assert _preempt(wire, mine, {"n1": [uid["a2"]]}) == {}  # 40 free once a2 is gone
    mine = harness.shown(make_pod("a1", cores=40, namespace="team-a-dev", labels=queued))
    assert _preempt(wire, mine, {"n1": [uid["a2"]]}) == {"n1": [uid["a2"]]}
    # the team's own pods the gate does not label (CPU-only) are the team's all the same
    harness.put(make_pod("c", cores=0, namespace="team-a-dev"))
    assert wire.bind(harness.pod("c", "team-a-dev"), "n1") == ""
    wait_until(lambda: harness.pod("c", "team-a-dev")["spec"].get("nodeName") == "n1")
    c = harness.pod("c", "team-a-dev")["metadata"]["uid"]
    both = {"n1": [c, uid["a2"]]}
    wait_until(lambda: _preempt(wire, mine, both) == both)


def test_a_member_bound_where_no_place_can_be_counted_leaves_its_gang_waiting_and_evicting_nobody(
    harness: Harness,
) -> None:
    """The gang's filter and its preemption counted its members two ways: a CPU-only member
    created with `spec.nodeName` of a node the extender does not know (nothing there can hold
    it) was no member to the filter ("1 of 2 exist", every node refused, a FitError) and a
    member to preempt (2 of 2), so another team's pod was evicted for a pod that stayed
    pending."""
    wire, uid = preemption_cluster(harness)
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}
    ghost = make_pod("g-0", cores=0, annotations=gang)
    ghost["spec"]["nodeName"] = "nowhere"
    harness.shown(ghost)
    member = harness.shown(make_pod("g-1", cores=80, annotations=gang))
    assert "1 of 2 exist" in wire.filter(member, ["n1", "n2"])["FailedNodes"]["n1"]
    assert _preempt(wire, member, {"n1": [uid["a"]]}) == {}


def test_a_gang_with_a_member_no_node_admits_evicts_nobody(harness: Harness) -> None:
    """A member whose nodeSelector matches no node is never scheduled, so its gang is never
    complete: evicting for its other members would only leave another team's pods out for a
    gang whose filters wait for good."""
    wire, uid = preemption_cluster(harness)
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}
    fine = harness.shown(make_pod("g-0", cores=80, annotations=gang))
    lost = make_pod("g-1", cores=80, annotations=gang)
    lost["spec"]["nodeSelector"] = {"pool": "nowhere"}
    harness.shown(lost)
    assert _preempt(wire, fine, {"n1": [uid["a"]], "n2": []}) == {}
    assert "no node admits it" in wire.filter(fine, ["n1", "n2"])["FailedNodes"]["n2"]
