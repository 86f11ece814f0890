"""The hand-off rule's cost stays near-linear in a pod's look-alike containers (a
pod of 600 init containers asking the same made every filter on its node take half a minute),
and the fast `conflicts` still names exactly the confusable pairs `confusable` defines."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.core.handoff_rule import PendingContainer, asks_of, conflicts, confusable, pending_of
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare


def _pod(name: str, grants: list[tuple[str, int]]) -> list[PendingContainer]:
    """A pending pod whose containers c0, c1, ... ask `cores` on `gpu`, in that order."""
    assignment = Assignment(
        PodKey(f"ns/{name}"),
        NodeName("n"),
        containers=tuple(
            ContainerAssignment(f"c{i}", (GpuShare(GpuUUID(gpu), cores, 0),))
            for i, (gpu, cores) in enumerate(grants)
        ),
    )
    return pending_of(assignment, {})


grant = st.tuples(st.sampled_from(["G0", "G1"]), st.integers(1, 3))
pods = st.lists(st.lists(grant, min_size=1, max_size=4), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(candidate=st.lists(grant, min_size=1, max_size=4), others=pods)
def test_conflicts_names_a_confusable_container_exactly_when_one_is_pending(
    candidate: list[tuple[str, int]], others: list[list[tuple[str, int]]]
) -> None:
    pending = [c for i, grants in enumerate(others) for c in _pod(f"p{i}", grants)]
    mine = _pod("mine", candidate)
    problems = conflicts(mine, pending)
    expected = [c for c in mine if any(confusable(c, p) for p in pending)]
    assert len(problems) == len(expected)
    for c, problem in zip(expected, problems, strict=True):
        assert problem.startswith(f"{c.container} would be confusable with ns/p")
        named = problem.split(" with ", 1)[1].split(" ", 1)[0]
        other = next(p for p in pending if f"{p.pod}/{p.container}" == named)
        assert confusable(c, other) is not None


@given(st.lists(grant, min_size=1, max_size=6), st.lists(grant, min_size=1, max_size=6))
def test_after_is_equal_exactly_when_the_later_grants_are(
    a: list[tuple[str, int]], b: list[tuple[str, int]]
) -> None:
    first, second = _pod("a", a)[0], _pod("b", b)[0]
    later = [(g, asks_of(k, 0)) for g, k in a[1:]] == [(g, asks_of(k, 0)) for g, k in b[1:]]
    assert (first.after == second.after) == later


def test_a_pod_of_600_look_alike_containers_is_checked_in_linear_time() -> None:
    """600 containers asking 1 core on one GPU against another pod's 600 on another GPU: each
    is confusable with all 600; one problem per container, and no pairwise (cubic) work."""
    pending = _pod("other", [("G0", 1)] * 600)
    mine = _pod("mine", [("G1", 1)] * 600)
    start = time.perf_counter()
    problems = conflicts(mine, pending)
    took = time.perf_counter() - start
    assert len(problems) == 600
    assert took < 1.0, f"{took:.2f} s for 600 x 600 look-alike containers"
