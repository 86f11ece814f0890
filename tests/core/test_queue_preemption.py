"""kube-scheduler's priority preemption is allowed inside one queue only (`queues.preemption`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.queues.preemption import crossing

queues = st.one_of(st.none(), st.sampled_from(["qa", "qb", "qc"]))


@given(queues, st.lists(queues, max_size=6))
def test_a_preemption_is_allowed_exactly_when_every_victim_shares_the_pods_queue(
    preemptor: str | None, victims: list[str | None]
) -> None:
    refused = crossing(preemptor, victims)
    assert (refused is None) == all(v == preemptor for v in victims)
    if refused is not None:
        assert "only reclaim evicts" in refused


def test_pods_outside_queues_preempt_as_without_queues() -> None:
    assert crossing(None, [None, None]) is None
    assert crossing(None, ["qa"]) is not None  # nor do they take a queue's pods
    assert crossing("qa", [None]) is not None  # nor does a queue take theirs
