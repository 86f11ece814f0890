"""An Allocate asks the hand-off ledger one question per container and look at the node's pods.

The ledger is shared with the pod watch, which may change it between two of the policy's calls:
an answer pieced together from several holds of its lock (the match, whether another pod waits
with the same ask, the pods it could be confused with) may join parts read before and after a
change. So each container of an Allocate is judged on one `Handoff.attribution`, read in one
hold of the lock, asked again only after a re-list of the node's pods, and then recorded.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from tests.handoff.pods import agent, ids, pod
from vgpu.node.grants import Refusal
from vgpu.node.handoff.allocate import HandoffPolicy


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
