"""Which waiting jobs ask reclaim (`vgpu.core.queues.reclaim_asks`): the queue's order, past jobs whose
ask found no victims lately while others are awake, at most a few per queue and pass."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.queues.reclaim_asks import ReclaimAsks
from vgpu.core.queues.release import Job


def _jobs(queues: list[str]) -> list[Job]:
    return [Job(f"j{i}", q, q, (100, 0)) for i, q in enumerate(queues)]


queues = st.lists(st.sampled_from("abc"), max_size=30)


@given(queues, st.integers(1, 5), st.sets(st.integers(0, 29)))
def test_asks_take_awake_jobs_in_order_then_resting_ones_up_to_the_budget(
    names: list[str], per_queue: int, rested: set[int]
) -> None:
    jobs = _jobs(names)
    asks = ReclaimAsks(rest_s=60)
    for i in rested:
        asks.found_none(f"j{i}", now=100)
    chosen = list(asks.choose(jobs, per_queue=per_queue, now=130))
    for q in set(names):
        awake = [j for j in jobs if j.queue == q and int(j.key[1:]) not in rested]
        resting = [j for j in jobs if j.queue == q and int(j.key[1:]) in rested]
        first = awake[:per_queue]
        assert [j for j in chosen if j.queue == q] == first + resting[: per_queue - len(first)]
    assert len(set(chosen)) == len(chosen)


def test_a_job_whose_ask_found_nothing_rests_then_is_asked_again() -> None:
    head, behind = _jobs(["b", "b"])
    asks = ReclaimAsks(rest_s=60)
    assert list(asks.choose([head, behind], per_queue=1, now=0)) == [head]
    asks.found_none(head.key, now=0)
    assert list(asks.choose([head, behind], per_queue=1, now=10)) == [behind]
    assert list(asks.choose([head, behind], per_queue=1, now=60)) == [head]


def test_a_resting_job_is_asked_when_its_queue_has_no_other() -> None:
    """A short queue is asked for as before: its job may have found no victims only because
    the other queues' pods were younger than the minimum runtime."""
    (only,) = _jobs(["b"])
    asks = ReclaimAsks(rest_s=60)
    asks.found_none(only.key, now=0)
    assert list(asks.choose([only], per_queue=4, now=10)) == [only]


def test_rests_that_are_over_are_forgotten() -> None:
    asks = ReclaimAsks(rest_s=60)
    for i in range(1000):
        asks.found_none(f"j{i}", now=float(i))
    asks.forget_rested(now=1000.0)
    assert asks.resting("j999", 1000.0) and not asks.resting("j900", 1000.0)
    assert len(asks._rested) == 59
