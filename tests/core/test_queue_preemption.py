"""kube-scheduler's priority preemption is allowed inside one queue only (`queues.preemption`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.queues.preemption import crossing

queues = st.one_of(st.none(), st.sampled_from(["qa", "qb", "qc"]))
namespaces = st.sampled_from(["team-a", "team-b", "lab"])


@given(queues, namespaces, st.lists(st.tuples(queues, namespaces), max_size=6))
def test_a_preemption_is_allowed_exactly_when_every_victim_is_of_the_pods_queue_or_namespace(
    preemptor: str | None, namespace: str, victims: list[tuple[str | None, str]]
) -> None:
    refused = crossing(preemptor, namespace, victims)
    assert (refused is None) == all(q == preemptor or ns == namespace for q, ns in victims)
    if refused is not None:
        assert "only reclaim evicts" in refused


def test_pods_outside_queues_preempt_as_without_queues() -> None:
    assert crossing(None, "lab", [(None, "lab"), (None, "other")]) is None
    assert crossing(None, "lab", [("qa", "team-a")]) is not None  # nor take a queue's pods
    assert crossing("qa", "team-a", [(None, "lab")]) is not None  # nor a queue theirs


def test_a_teams_own_unlabelled_pods_may_be_preempted() -> None:
    """The gate labels only vGPU and gang pods: a team's CPU-only pods carry no queue."""
    assert crossing("qa", "team-a", [(None, "team-a")]) is None
