"""`reclaim.victims` drops, before sorting, the running jobs their queue may not give up; that must
pick exactly what walking every running job youngest first picks (the rule as docs/queues.md
states it).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.core.queues.proportion import ZERO, QueueSpec, Vec, add, fits_within, share, sub
from vgpu.core.queues.reclaim import Running, victims
from vgpu.core.queues.release import Job

SPECS = (QueueSpec("a", 1), QueueSpec("b", 3, reclaim=True), QueueSpec("c", 2))


def walk_every_job(
    job: Job,
    held: dict[str, Vec],
    due: dict[str, Vec],
    running: Sequence[Running],
    fits: int,
    now: float,
    min_runtime_s: float,
) -> list[str] | None:
    """Youngest first over every running job of another queue past the minimum runtime, each
    taken while its queue stays at or above deserved and the reclaimer's share after admission is
    not above it; stop once `fits` cores are freed (no sparing: the oracle compares the walk)."""
    mine = add(held.get(job.queue, ZERO), job.ask)
    if not fits_within(mine, due.get(job.queue, ZERO)):
        return None
    after, chosen, freed = dict(held), [], 0
    old = [r for r in running if r.queue != job.queue and now - r.started >= min_runtime_s]
    for r in sorted(old, key=lambda r: (-r.started, r.key)):
        left = sub(after.get(r.queue, ZERO), r.ask)
        victim = share(left, due.get(r.queue, ZERO))
        if victim < 1 or share(mine, due[job.queue]) > victim:
            continue
        after[r.queue] = left
        chosen.append(r.key)
        freed += r.ask[0]
        if freed >= fits:
            return chosen
    return None


running_jobs = st.lists(
    st.tuples(st.sampled_from("ac"), st.sampled_from([25, 50, 100]), st.integers(0, 50)),
    max_size=20,
)
quarters = st.integers(0, 24).map(lambda n: 25 * n)
"""Deserved in the running jobs' units, so a queue left exactly at its share is common."""


@settings(max_examples=300, deadline=None)
@given(
    running=running_jobs,
    due=st.tuples(quarters, quarters.map(lambda q: 2 * q), quarters),
    ask=st.sampled_from([25, 50, 100, 300]),
    b_held=quarters,
    fits=st.integers(1, 500),
)
def test_victims_are_those_of_a_youngest_first_walk_over_every_running_job(
    running: list[tuple[str, int, int]],
    due: tuple[int, int, int],
    ask: int,
    b_held: int,
    fits: int,
) -> None:
    jobs = [Running(f"r{i}", q, (c, 0), float(t)) for i, (q, c, t) in enumerate(running)]
    held = {"b": (b_held, 0)}
    for r in jobs:
        held[r.queue] = add(held.get(r.queue, ZERO), r.ask)
    deserves = {q: (d, 0) for q, d in zip("abc", due, strict=True)}
    job = Job("w", "b", "b", (ask, 0))
    walked: list[list[str]] = []

    def frees_enough(_job: Job, gone: Sequence[Running]) -> bool:
        walked.append([r.key for r in gone])
        return sum(r.ask[0] for r in gone) >= fits

    got = victims(job, SPECS, held, deserves, jobs, frees_enough, now=60.0, min_runtime_s=20.0)
    want = walk_every_job(job, held, deserves, jobs, fits, 60.0, 20.0)
    assert (got is None) == (want is None)
    if want is not None:
        first_fit = next(w for w in walked if sum(held_ask(jobs, w)) >= fits)
        assert first_fit == want


def held_ask(jobs: list[Running], keys: list[str]) -> list[int]:
    by_key = {r.key: r.ask[0] for r in jobs}
    return [by_key[k] for k in keys]
