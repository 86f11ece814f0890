"""What reclaim freed goes to the job it was freed for (`release.plan`'s `first`).

Reclaim evicts for one job; the GPUs come back a pass or more later, when the victims are gone.
The pass that sees them free must try that job before any other: otherwise a queue with a lower
share, or an older job of the same queue that fits them partly, takes them, and the job reclaim
was for still waits (seen on a real cluster: a GPU emptied for a whole-GPU queue went to two pods
of a third queue in the next pass).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_release import Gpus, job
from vgpu.core.queues.proportion import QueueSpec
from vgpu.core.queues.release import Book, Job, plan

SPECS = (QueueSpec("red", 1), QueueSpec("whole", 5, reclaim=True), QueueSpec("small", 2))


def test_a_gpu_emptied_for_a_whole_gpu_job_is_not_taken_by_a_queue_with_a_lower_share() -> None:
    gpus = Gpus([100])  # the GPU the evictions gave back
    wanted = job("w", "whole", 100, created=50.0)
    smalls = [job(f"s{i}", "small", 25, created=float(i)) for i in range(4)]
    gpus.members = {"w": (100,), **{s.key: (25,) for s in smalls}}
    book = Book((800, 0), {"red": (300, 0), "whole": (400, 0), "small": (0, 0)})
    out = plan(SPECS, book, [wanted, *smalls], gpus.fits, now=0, first={"w"})
    assert out.released[0] == "w"
    assert not any(s.key in out.released for s in smalls)


def test_an_older_job_of_the_same_queue_does_not_take_the_room_first() -> None:
    gpus = Gpus([100])
    older = job("older", "whole", 50, created=1.0)
    wanted = job("w", "whole", 100, created=9.0)
    gpus.members = {"older": (50,), "w": (100,)}
    book = Book((800, 0), {"red": (500, 0), "whole": (100, 0)})
    out = plan(SPECS, book, [older, wanted], gpus.fits, now=0, first={"w"})
    assert out.released == ("w",)


@settings(max_examples=200, deadline=None)
@given(
    free=st.lists(st.sampled_from([0, 25, 50, 75, 100]), min_size=1, max_size=4),
    asks=st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from([25, 50, 100])), min_size=1, max_size=8
    ),
    held=st.tuples(*(st.integers(0, 8).map(lambda n: 50 * n) for _ in range(3))),
    pick=st.integers(0, 7),
)
def test_a_reclaimed_for_job_that_fits_when_the_pass_starts_is_released_first(
    free: list[int], asks: list[tuple[str, int]], held: tuple[int, int, int], pick: int
) -> None:
    specs = (QueueSpec("a", 1), QueueSpec("b", 2), QueueSpec("c", 3))
    jobs: list[Job] = [job(f"j{i}", q, c, created=float(i)) for i, (q, c) in enumerate(asks)]
    wanted = jobs[pick % len(jobs)]
    gpus = Gpus(list(free), {j.key: (j.ask[0],) for j in jobs})
    fits_alone = any(f >= wanted.ask[0] for f in free)
    book = Book((1_000, 0), {q: (h, 0) for q, h in zip("abc", held, strict=True)})
    out = plan(specs, book, jobs, gpus.fits, now=0, first={wanted.key})
    assert (out.released[:1] == (wanted.key,)) == fits_alone
