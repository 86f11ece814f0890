"""A kubelet call asks the hand-off ledger one question (an Allocate: one per container).

The ledger is shared with the pod watch, which may change it between two of the policy's calls:
an answer pieced together from several holds of its lock (the match, whether another pod waits
with the same ask, the pods it could be confused with) may join parts read before and after a
change. So each container of an Allocate is judged on one `Handoff.attribution`, and a
GetPreferredAllocation on one `Handoff.steering` (the pending containers it may steer to, or
with none the unsure attributions), each read in one hold of the lock and asked again only after
a re-list of the node's pods.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from tests.handoff.pods import agent, ids, pod
from vgpu.core.ids import PodKey
from vgpu.node.grants import Refusal
from vgpu.node.handoff.allocate import HandoffPolicy

CORES = "vgpu.io/cores"


class CountedLock:
    """The ledger's lock, logging each outermost hold: one hold is one look at the ledger."""

    def __init__(self, events: list[str]) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self._events = events

    def __enter__(self) -> None:
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1:
            self._events.append("ledger")

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._depth -= 1
        self._lock.release()


def counted(*pods: dict[str, Any]) -> tuple[HandoffPolicy, list[str]]:
    """A policy over a ledger holding `pods`, and the log of its looks and re-lists."""
    handoff, policy, _ = agent(*pods)
    events: list[str] = []
    handoff._lock = CountedLock(events)  # type: ignore[assignment]
    relist = policy._refresh

    def logged_relist() -> None:
        events.append("relist")
        relist()

    policy._refresh = logged_relist
    return policy, events


def test_the_next_container_of_a_pod_part_way_through_admission_is_one_question() -> None:
    raw = pod("p", [("a", 30, 0, "G0"), ("b", 20, 0, "G1")])
    policy, events = counted(raw)
    assert not isinstance(policy.allocate("vgpu.io/cores", [ids("G0", "c", 30)]), Refusal)
    events.clear()
    assert not isinstance(policy.allocate("vgpu.io/cores", [ids("G1", "c", 20)]), Refusal)
    assert events == ["ledger", "ledger"]


def test_a_pods_first_container_is_asked_again_only_after_the_relist() -> None:
    policy, events = counted(pod("p", [("a", 30, 0, "G0")]))
    assert not isinstance(policy.allocate("vgpu.io/cores", [ids("G0", "c", 30)]), Refusal)
    assert events == ["ledger", "relist", "ledger", "ledger"]


def test_a_call_matching_nothing_is_refused_on_the_answer_read_after_the_relist() -> None:
    policy, events = counted(pod("p", [("a", 30, 0, "G0")]))
    assert isinstance(policy.allocate("vgpu.io/cores", [ids("G1", "c", 30)]), Refusal)
    assert events == ["ledger", "relist", "ledger", "ledger"]  # the last: the aborted admission


def _gpus(chosen: list[str]) -> set[str]:
    return {i.split("::")[0] for i in chosen}


def test_a_preference_for_a_pending_container_is_one_question() -> None:
    policy, events = counted(pod("p", [("a", 30, 0, "G0")]))
    chosen = policy.preferred(CORES, ids("G0", "c", 100) + ids("G1", "c", 100), [], 30)
    assert _gpus(chosen) == {"G0"}
    assert events == ["ledger"]


def test_a_preference_matching_nothing_is_asked_again_only_after_the_relist() -> None:
    policy, events = counted(pod("p", [("a", 30, 0, "G0")]))
    chosen = policy.preferred(CORES, ids("G0", "c", 100) + ids("G1", "c", 100), [], 20)
    assert len(chosen) == 20  # binpacked: nothing pending asks 20
    assert events == ["ledger", "relist", "ledger"]


def test_a_preference_steered_to_an_unsure_attribution_is_one_question_after_the_relist() -> None:
    """a and b ask the same 20 cores on G0; b's call was taken for a's (unsure), b is gone: the
    next call of that size matches no pending container and is steered to a's GPU on the same
    answer that says nothing is pending."""
    a = pod("a", [("main", 20, 0, "G0")])
    b = pod("b", [("main", 20, 0, "G0")])
    policy, events = counted(a, b)
    first = policy.preferred(CORES, ids("G0", "c", 100) + ids("G1", "c", 100), [], 20)
    assert not isinstance(policy.allocate(CORES, [first]), Refusal)
    policy._handoff.forget(PodKey("ns/b"), "uid-b")
    events.clear()
    rest = [i for i in ids("G0", "c", 100) if i not in first]
    second = policy.preferred(CORES, rest + ids("G1", "c", 100), [], 20)
    assert _gpus(second) == {"G0"}, "steered to the unsure attribution's GPU"
    assert events == ["ledger", "relist", "ledger"]
