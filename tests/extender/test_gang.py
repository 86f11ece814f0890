"""Gang scheduling: all or nothing, delayed binding, expiry, competing gangs, restarts."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import Harness
from tests.extender.test_leader import _lease
from tests.waiting import wait_until
from vgpu.core.ids import PodKey
from vgpu.core.model import Phase
from vgpu.core.queues import whole_gpus
from vgpu.daemons.extender.daemon import ExtenderDaemon
from vgpu.extender.gangs import coordinator

NODES = ["n1", "n2"]


def _gang(
    harness: Harness, name: str, size: int, cores: int = 100, *, label: str = "gang"
) -> list[str]:
    pods = []
    for i in range(size):
        pod_name = f"{name}-{i}"
        if label == "gang":
            annotations = {"vgpu.io/gang-name": name, "vgpu.io/gang-size": str(size)}
            harness.put(make_pod(pod_name, cores=cores, annotations=annotations))
        else:
            labels = {
                "pod-group.scheduling.sigs.k8s.io/name": name,
                "pod-group.scheduling.sigs.k8s.io/min-available": str(size),
            }
            harness.put(make_pod(pod_name, cores=cores, labels=labels))
        pods.append(pod_name)
    return pods


def _phases(daemon: ExtenderDaemon) -> dict[str, Phase]:
    with daemon.cache.atomic():
        return {
            h.assignment.pod.split("/")[1]: h.phase
            for h in daemon.cache.ledger.holdings()
            if h.assignment.shares or h.gang
        }


def _start(harness: Harness, gpus: int = 2, **kw: float) -> tuple[ExtenderDaemon, Wire]:
    for name in NODES:
        harness.put(make_node(name, gpus=gpus))
    daemon = harness.start(**kw)  # type: ignore[arg-type]
    return daemon, harness.wire(daemon)


def _bind_admitted(
    harness: Harness, wire: Wire, daemon: ExtenderDaemon, pod: str, node: str
) -> None:
    """Bind, then play the node agent: mark the pod admitted and wait until the extender saw it
    (equal whole-GPU members on one node are bound one after another, invariant I)."""
    assert wire.bind(harness.pod(pod), node) == ""
    obj = harness.pod(pod)
    obj["metadata"]["annotations"]["vgpu.io/admitted"] = json.dumps(["main"])
    harness.put(obj)
    key = PodKey(f"default/{pod}")

    def admitted_seen() -> bool:
        # The watch must have shown the pod bound (ledger BOUND, no longer an assumed bind in
        # flight) *and* admitted (not pending) before the next equal member may bind.
        held = daemon.cache.ledger.holding(key)
        seen = held is not None and held.phase is Phase.BOUND
        return seen and all(key not in pods for pods in daemon.cache.pending.values())

    wait_until(admitted_seen)


def _filter_all(harness: Harness, wire: Wire, pods: list[str]) -> dict[str, str]:
    chosen = {}
    for pod in pods:
        out = wire.filter(harness.pod(pod), NODES)
        assert len(out["NodeNames"]) == 1, out
        chosen[pod] = out["NodeNames"][0]
    return chosen


def test_full_fit_reserves_every_member_then_binds(harness: Harness) -> None:
    pods = _gang(harness, "job", 4)
    daemon, wire = _start(harness)
    chosen = _filter_all(harness, wire, pods)
    assert sorted(chosen.values()) == ["n1", "n1", "n2", "n2"]
    assert set(_phases(daemon).values()) == {Phase.RESERVED}
    assert wire.prioritize(harness.pod(pods[0]), NODES)[chosen[pods[0]]] == 10
    for pod in pods:
        _bind_admitted(harness, wire, daemon, pod, chosen[pod])
    wait_until(lambda: set(_phases(daemon).values()) == {Phase.BOUND})
    assert all(harness.pod(p)["spec"]["nodeName"] == chosen[p] for p in pods)


def test_no_member_binds_before_all_have_their_place(harness: Harness) -> None:
    pods = _gang(harness, "job", 4)
    daemon, wire = _start(harness, bind_wait=2.0)
    chosen = _filter_all(harness, wire, pods[:3])
    harness.daemons[0].extender.config = replace(daemon.extender.config, bind_wait=0.1)
    error = wire.bind(harness.pod(pods[0]), chosen[pods[0]])
    assert "waiting until 4 members" in error
    harness.daemons[0].extender.config = replace(daemon.extender.config, bind_wait=5.0)
    assert "nodeName" not in harness.pod(pods[0])["spec"]
    # kube-scheduler binds asynchronously: a waiting bind completes once the last member filters
    results: list[str] = []
    waiter = threading.Thread(
        target=lambda: results.append(
            harness.wire(daemon).bind(harness.pod(pods[0]), chosen[pods[0]])
        )
    )
    waiter.start()
    chosen.update(_filter_all(harness, wire, pods[3:]))
    waiter.join()
    assert results == [""]
    assert harness.pod(pods[0])["spec"]["nodeName"] == chosen[pods[0]]


def test_partial_fit_places_nothing_and_says_why(harness: Harness) -> None:
    pods = _gang(harness, "job", 5)
    daemon, wire = _start(harness)
    out = wire.filter(harness.pod(pods[0]), NODES)
    assert out["NodeNames"] == []
    assert all("only 4 of 5 members fit" in r for r in out["FailedNodes"].values())
    assert _phases(daemon) == {}
    assert "only 4 of 5" in wire.bind(harness.pod(pods[0]), "n1")


def test_two_competing_gangs_first_wins_whole_other_waits_whole(harness: Harness) -> None:
    a = _gang(harness, "a", 4)
    b = _gang(harness, "b", 4)
    daemon, wire = _start(harness)
    wire.filter(harness.pod(b[0]), NODES)  # b plans first here and wins
    out = wire.filter(harness.pod(a[0]), NODES)
    assert out["NodeNames"] == [] and "gang default/a" in next(iter(out["FailedNodes"].values()))
    phases = _phases(daemon)
    assert set(phases) == set(b) and not any(p in phases for p in a)
    for pod in b:
        harness.store.remove("Pod", "default", pod)
    wait_until(lambda: _phases(daemon) == {})
    assert len(_filter_all(harness, wire, a)) == 4


def test_member_deleted_while_waiting_releases_the_gang(harness: Harness) -> None:
    pods = _gang(harness, "job", 3)
    daemon, wire = _start(harness)
    wire.filter(harness.pod(pods[0]), NODES)
    assert len(_phases(daemon)) == 3
    harness.store.remove("Pod", "default", pods[2])
    wait_until(lambda: _phases(daemon) == {})
    out = wire.filter(harness.pod(pods[0]), NODES)
    assert "2 of 3 exist" in next(iter(out["FailedNodes"].values()))


def test_reservations_expire_in_full(harness: Harness) -> None:
    pods = _gang(harness, "job", 3)
    daemon, wire = _start(harness, gang_timeout=60)
    wire.filter(harness.pod(pods[0]), NODES)
    harness.clock.advance(59)
    daemon.extender.sweep()
    assert len(_phases(daemon)) == 3
    harness.clock.advance(2)
    daemon.extender.sweep()
    assert _phases(daemon) == {}
    wire.filter(harness.pod(pods[1]), NODES)  # planned again on the next attempt
    assert len(_phases(daemon)) == 3


def test_restart_mid_gang_keeps_bound_members_and_reserves_the_rest_again(
    harness: Harness,
) -> None:
    pods = _gang(harness, "job", 4)
    first, wire = _start(harness)
    chosen = _filter_all(harness, wire, pods)
    for pod in pods[:2]:
        _bind_admitted(harness, wire, first, pod, chosen[pod])
    first.stop()
    second = harness.start()
    phases = _phases(second)
    assert phases == {  # nothing leaked, nothing lost: the gang's places are held again
        pods[0]: Phase.BOUND,
        pods[1]: Phase.BOUND,
        pods[2]: Phase.RESERVED,
        pods[3]: Phase.RESERVED,
    }
    wire2 = harness.wire(second)
    rest = _filter_all(harness, wire2, pods[2:])
    for pod in pods[2:]:
        _bind_admitted(harness, wire2, second, pod, rest[pod])
    wait_until(lambda: _phases(second) == dict.fromkeys(pods, Phase.BOUND))


@pytest.mark.parametrize("leader", [False, True], ids=["restart", "new-leadership-term"])
def test_a_rival_cannot_take_a_half_bound_gangs_gpu_after_a_rebuild(
    harness: Harness, leader: bool
) -> None:
    pods = _gang(harness, "job", 4)
    first, wire = _start(harness)  # 2 nodes x 2 GPUs: one whole GPU per member
    chosen = _filter_all(harness, wire, pods)
    for pod in pods[:2]:
        _bind_admitted(harness, wire, first, pod, chosen[pod])
    first.stop()
    harness.put(make_pod("rival", cores=100))
    second = harness.start(leader=_lease("b") if leader else None, wait=False)
    assert second.wait_ready(10), second.why_not_ready()
    wire2 = harness.wire(second)
    assert wire2.filter(harness.pod("rival"), NODES)["NodeNames"] == []
    for node in NODES:
        assert wire2.bind(harness.pod("rival"), node) != ""
    rest = _filter_all(harness, wire2, pods[2:])
    for pod in pods[2:]:
        _bind_admitted(harness, wire2, second, pod, rest[pod])
    wait_until(lambda: _phases(second) == dict.fromkeys(pods, Phase.BOUND))


def test_tfjob_seed_cpu_only_ps_is_placed_with_the_workers(harness: Harness) -> None:
    labels = {
        "pod-group.scheduling.sigs.k8s.io/name": "tfjob",
        "pod-group.scheduling.sigs.k8s.io/min-available": "5",
    }
    harness.put(make_pod("tfjob-ps-0", cpu="2", labels=labels))
    workers = _gang(harness, "tfjob", 4, label="legacy")
    daemon, wire = _start(harness)
    chosen = _filter_all(harness, wire, ["tfjob-ps-0", *workers])
    assert len(_phases(daemon)) == 5
    for pod, node in chosen.items():
        _bind_admitted(harness, wire, daemon, pod, node)
    wait_until(lambda: all(harness.pod(p)["spec"].get("nodeName") for p in chosen))


def test_tfjob_seed_does_not_fit_so_nothing_is_placed(harness: Harness) -> None:
    labels = {
        "pod-group.scheduling.sigs.k8s.io/name": "tfjob",
        "pod-group.scheduling.sigs.k8s.io/min-available": "5",
    }
    harness.put(make_pod("tfjob-ps-0", cpu="2", labels=labels))
    _gang(harness, "tfjob", 4, cores=100, label="legacy")
    harness.put(make_node("n1", gpus=3))
    daemon = harness.start()
    out = harness.wire(daemon).filter(harness.pod("tfjob-ps-0"), ["n1"])
    assert out["NodeNames"] == [] and "only" in out["FailedNodes"]["n1"]
    assert _phases(daemon) == {}


def test_pod_group_crd_gives_min_member(harness: Harness) -> None:
    harness.put(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"minMember": 2},
        }
    )
    for i in range(2):
        harness.put(make_pod(f"m{i}", cores=50, labels={"scheduling.x-k8s.io/pod-group": "pg"}))
    harness.put(make_pod("orphan", cores=50, labels={"scheduling.x-k8s.io/pod-group": "missing"}))
    daemon, wire = _start(harness)
    assert len(wire.filter(harness.pod("m0"), NODES)["NodeNames"]) == 1
    assert len(_phases(daemon)) == 2
    assert (
        "PodGroup default/missing not found" in wire.filter(harness.pod("orphan"), NODES)["Error"]
    )


def test_equal_members_on_one_node_bind_one_after_another(harness: Harness) -> None:
    # Two pending whole-GPU containers of different pods on one node would be confusable at
    # Allocate (invariant I): the second member keeps its place but binds after the first is
    # admitted.
    pods = _gang(harness, "job", 2)
    harness.put(make_node("n1", gpus=2))
    daemon = harness.start()
    wire = harness.wire(daemon)
    chosen = _filter_all(harness, wire, pods)
    assert chosen == dict.fromkeys(pods, "n1")
    assert wire.bind(harness.pod(pods[0]), "n1") == ""
    error = wire.bind(harness.pod(pods[1]), "n1")
    assert "keeps its place on node n1 but waits for admission" in error
    assert "confusable with default/job-0/main" in error
    assert "nodeName" not in harness.pod(pods[1])["spec"]
    assert _phases(daemon)[pods[1]] is Phase.RESERVED
    obj = harness.pod(pods[0])
    obj["metadata"]["annotations"]["vgpu.io/admitted"] = json.dumps(["main"])
    harness.put(obj)
    wait_until(lambda: wire.bind(harness.pod(pods[1]), "n1") == "")
    assert harness.pod(pods[1])["spec"]["nodeName"] == "n1"


def _members(harness: Harness, name: str, size: int, count: int) -> list[str]:
    """`count` members of a gang whose min-member is `size`."""
    annotations = {"vgpu.io/gang-name": name, "vgpu.io/gang-size": str(size)}
    for i in range(count):
        harness.put(make_pod(f"{name}-{i}", cores=100, annotations=annotations))
    return [f"{name}-{i}" for i in range(count)]


def test_a_started_gang_gives_back_at_its_deadline_the_places_past_min_member(
    harness: Harness,
) -> None:
    """Found by a tenant-side review: a gang of one with a second member kube-scheduler never
    sends (its own scheduling gate, a nodeSelector no node matches) held that member's GPU for
    good once the first bound; a reservation is no pod, so nothing could preempt it."""
    pods = _members(harness, "g", 1, 2)
    daemon, wire = _start(harness, gang_timeout=60)
    chosen = _filter_all(harness, wire, pods[:1])
    assert _phases(daemon) == dict.fromkeys(pods, Phase.RESERVED)
    _bind_admitted(harness, wire, daemon, pods[0], chosen[pods[0]])
    harness.clock.advance(61)
    daemon.extender.sweep()
    assert _phases(daemon) == {pods[0]: Phase.BOUND}
    harness.clock.advance(36000)
    daemon.extender.sweep()
    assert _phases(daemon) == {pods[0]: Phase.BOUND}
    _filter_all(harness, wire, pods[1:])  # planned again when kube-scheduler sends it
    assert _phases(daemon) == {pods[0]: Phase.BOUND, pods[1]: Phase.RESERVED}


def test_a_started_gang_keeps_until_they_bind_the_places_it_needs_for_min_member(
    harness: Harness,
) -> None:
    """Three members needed, one bound: the other two keep their places past the deadline (the
    members sent through filter first), the fourth, past min-member, gives its place back."""
    pods = _members(harness, "g", 3, 4)
    daemon, wire = _start(harness, gang_timeout=60)
    chosen = _filter_all(harness, wire, pods[:3])
    _bind_admitted(harness, wire, daemon, pods[0], chosen[pods[0]])
    harness.clock.advance(36000)
    daemon.extender.sweep()
    assert _phases(daemon) == {
        pods[0]: Phase.BOUND,
        pods[1]: Phase.RESERVED,
        pods[2]: Phase.RESERVED,
    }
    for pod in pods[1:3]:
        _bind_admitted(harness, wire, daemon, pod, chosen[pod])
    wait_until(lambda: _phases(daemon) == dict.fromkeys(pods[:3], Phase.BOUND))


def test_a_rebuild_reserves_again_only_the_places_a_started_gang_needs(harness: Harness) -> None:
    pods = _members(harness, "g", 2, 4)
    first, wire = _start(harness)
    chosen = _filter_all(harness, wire, pods[:2])
    for pod in pods[:2]:
        _bind_admitted(harness, wire, first, pod, chosen[pod])
    first.stop()
    second = harness.start()
    assert _phases(second) == dict.fromkeys(pods[:2], Phase.BOUND)


def test_a_slow_failing_plan_holds_its_gangs_next_plan_back(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a tenant-side review: a gang of 2,000 members with one that fits nowhere was
    planned again, whole, on each member's filter (seconds each on 200 nodes, on the loop every
    team's filter waits on). A plan that failed slowly now waits ten times its duration."""
    plans = []

    def slow(*args: Any) -> Any:
        plans.append(time.perf_counter())
        time.sleep(coordinator.SLOW_PLAN_S)
        return real(*args)

    real = whole_gpus.plan_gang
    monkeypatch.setattr(whole_gpus, "plan_gang", slow)
    pods = _gang(harness, "job", 5)
    _, wire = _start(harness)
    for pod in pods:
        out = wire.filter(harness.pod(pod), NODES)
        assert all("only 4 of 5 members fit" in r for r in out["FailedNodes"].values())
    assert len(plans) == 1
    harness.clock.advance(coordinator.SLOW_PLAN_S * coordinator.BACKOFF_FACTOR * 10)
    wire.filter(harness.pod(pods[0]), NODES)
    assert len(plans) == 2
