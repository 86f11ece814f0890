"""Strict holds and the fair order in `release.plan`: a strict queue's hold covers every job of it
that does not fit while it is below its deserved share, for at most its hold time from when it
first waited, across passes; and a dimension only one queue asks cannot put it first."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.core.test_release import Gpus, job
from vgpu.core.queues.proportion import ZERO, QueueSpec, Vec, add
from vgpu.core.queues.release import Book, Job, Pass, plan, strict_reason

SPECS = [QueueSpec("big", 1, strict_s=30), QueueSpec("small", 1)]


def _jobs(gpus: Gpus, *jobs: tuple[str, str, int]) -> list[Job]:
    gpus.members.update({key: (cores,) for key, _, cores in jobs})
    return [job(key, queue, cores, created=i) for i, (key, queue, cores) in enumerate(jobs)]


def test_the_hold_covers_the_next_job_after_the_first_is_released() -> None:
    gpus = Gpus([100, 60, 60])
    jobs = _jobs(gpus, ("big0", "big", 100), ("big1", "big", 100), ("small0", "small", 50))
    out = plan(SPECS, Book((220, 0)), jobs, gpus.fits, now=100)
    assert out.released == ("big0",)
    assert out.waiting["small0"] == strict_reason(SPECS[0])
    assert out.held_since == {"big": 100}


def test_a_released_job_does_not_start_the_hold_again() -> None:
    gpus = Gpus([60, 60])
    jobs = _jobs(gpus, ("big0", "big", 100), ("big1", "big", 100), ("small0", "small", 20))
    first = plan(SPECS, Book((220, 0)), jobs, gpus.fits, now=100)
    assert first.released == () and first.held_since == {"big": 100}
    gpus.free.append(100)  # a GPU frees: big0 fits, big1 still does not
    second = plan(SPECS, Book((320, 0)), jobs, gpus.fits, now=120, held_since=first.held_since)
    assert second.released == ("big0",) and second.held_since == {"big": 100}
    left = [j for j in jobs if j.key != "big0"]
    book = Book((320, 0), {"big": (100, 0)})
    third = plan(SPECS, book, left, gpus.fits, now=131, held_since=second.held_since)
    assert third.released == ("small0",)  # 30 s after big first waited, not after big0 went
    assert third.held_since == {"big": 100}  # spent, kept: big1 still waits


def test_a_queue_holding_is_served_before_a_queue_with_a_lower_share() -> None:
    gpus = Gpus([100, 100, 50])
    jobs = _jobs(gpus, ("big1", "big", 200), ("small0", "small", 50))
    book = Book((400, 0), {"big": (100, 0)})  # big's share 1/3, small's 0
    out = plan(SPECS, book, jobs, gpus.fits, now=110, held_since={"big": 100})
    assert out.released == ()
    assert out.waiting["small0"] == strict_reason(SPECS[0])


def test_the_hold_ends_in_the_first_pass_the_queue_does_not_wait() -> None:
    gpus = Gpus([100, 100])
    jobs = _jobs(gpus, ("big0", "big", 100), ("small0", "small", 50))
    out = plan(SPECS, Book((200, 0)), jobs, gpus.fits, now=110, held_since={"big": 100})
    assert out.released == ("big0", "small0") and out.held_since == {}


def test_a_queue_at_its_share_holds_nobody() -> None:
    gpus = Gpus([50])
    jobs = _jobs(gpus, ("big1", "big", 100), ("small0", "small", 50))
    book = Book((200, 0), {"big": (150, 0)})  # big deserves 150 (its ask 250, small's 50)
    out = plan(SPECS, book, jobs, gpus.fits, now=110, held_since={"big": 100})
    assert out.released == ("small0",) and out.held_since == {}


def test_the_reason_names_no_job_so_it_is_the_same_whoever_is_tried() -> None:
    gpus = Gpus([60])  # of 160 cores: big's 100 would fit the empty cluster
    one = plan(SPECS, Book((160, 0)), _jobs(gpus, ("big0", "big", 100), ("s", "small", 50)),
               gpus.fits, now=1)  # fmt: skip
    two = plan(SPECS, Book((160, 0)), _jobs(gpus, ("big9", "big", 100), ("s", "small", 50)),
               gpus.fits, now=2, held_since=one.held_since)  # fmt: skip
    assert one.waiting["s"] == two.waiting["s"]
    assert "big0" not in one.waiting["s"]


def test_a_queue_alone_asking_memory_over_its_core_share_waits_behind_a_lower_share() -> None:
    """The memory asker deserves all the memory it asks and never holds it while a pod waits;
    it is still over its share of cores, so the queue at its share goes first."""
    specs = [QueueSpec("cores", 1), QueueSpec("memory", 2)]
    gpus = Gpus([100])
    gpus.members = {"c1": (100,), "m1": (100,)}
    jobs = [Job("c1", "cores", "c", (100, 0)), Job("m1", "memory", "m", (100, 10))]
    book = Book((600, 100), {"cores": (200, 0), "memory": (500, 60)})
    out = plan(specs, book, jobs, gpus.fits, now=0)
    assert out.deserved == {"cores": (200, 0), "memory": (400, 70)}
    assert out.released == ("c1",)


sizes = st.sampled_from((20, 50, 100, 200))


@settings(max_examples=300, deadline=None)
@given(
    free=st.lists(st.sampled_from((0, 20, 50, 100)), min_size=1, max_size=5),
    big=st.lists(sizes, min_size=1, max_size=4),
    small=st.lists(sizes, min_size=1, max_size=4),
    held=st.tuples(st.integers(0, 300), st.integers(0, 300)),
    started=st.none() | st.floats(min_value=0, max_value=100),
)
def test_while_a_hold_is_in_force_and_its_queue_waits_no_other_queue_is_released(
    free: list[int],
    big: list[int],
    small: list[int],
    held: tuple[int, int],
    started: float | None,
) -> None:
    gpus = Gpus(free)
    jobs = _jobs(
        gpus,
        *[(f"big{i}", "big", c) for i, c in enumerate(big)],
        *[(f"small{i}", "small", c) for i, c in enumerate(small)],
    )
    book = Book((sum(free) + sum(held), 0), {"big": (held[0], 0), "small": (held[1], 0)})
    holds = {} if started is None else {"big": started}
    out = plan(SPECS, book, jobs, gpus.fits, now=110, held_since=holds)
    if "big" in out.held_since and started is not None:
        assert out.held_since["big"] == started  # a hold carried never starts again
    if "big" in out.held_since and 110 - out.held_since["big"] < 30:
        assert not [k for k in out.released if k.startswith("small")]
    waits = [k for k in out.waiting if k.startswith("big") and "does not fit" in out.waiting[k]]
    if not waits:
        assert "big" not in out.held_since


class StrictPasses(RuleBasedStateMachine):
    """Jobs arrive in a strict queue and another, jobs end, time passes; each pass is planned on
    the GPUs as they are, with the holds the last pass handed on."""

    def __init__(self) -> None:
        super().__init__()
        self.gpus = Gpus([100] * 4)
        self.pending: list[Job] = []
        self.running: dict[str, Job] = {}
        self.holds: dict[str, float] = {}
        self.now = 0.0
        self.serial = 0

    @rule(queue=st.sampled_from(("big", "small")), cores=st.sampled_from((20, 100, 200)))
    def arrive(self, queue: str, cores: int) -> None:
        self.serial += 1
        key = f"{queue}{self.serial}"
        self.gpus.members[key] = (cores,)
        self.pending.append(job(key, queue, cores, created=self.now))

    @rule(data=st.data())
    def end(self, data: st.DataObject) -> None:
        if self.running:
            key = data.draw(st.sampled_from(sorted(self.running)))
            self.gpus.free_job(key)
            del self.running[key]

    @rule(seconds=st.sampled_from((1.0, 10.0, 25.0)))
    def wait(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def release(self) -> None:
        held: dict[str, Vec] = {}
        for j in self.running.values():
            held[j.queue] = add(held.get(j.queue, ZERO), j.ask)
        book = Book((400, 0), held)
        out = plan(SPECS, book, self.pending, self.gpus.fits, now=self.now, held_since=self.holds)
        start = out.held_since.get("big")
        if start is not None and "big" in self.holds:
            assert start == self.holds["big"]  # carried, never started again
        if start is not None and self.now - start < 30:
            assert not [k for k in out.released if k.startswith("small")]
        for key in out.released:
            self.running[key] = next(j for j in self.pending if j.key == key)
        self.pending = [j for j in self.pending if j.key not in out.released]
        self.holds = dict(out.held_since)

    @invariant()
    def a_hold_is_never_in_the_future(self) -> None:
        assert all(t <= self.now for t in self.holds.values())


TestStrictPasses = StrictPasses.TestCase
TestStrictPasses.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)


@settings(max_examples=300, deadline=None)
@example(c_held=280, m_held=590, m_memory=50, m_pending_memory=10)  # cores at its share
@given(
    c_held=st.integers(0, 600),
    m_held=st.integers(0, 600),
    m_memory=st.integers(0, 100),
    m_pending_memory=st.integers(1, 100),
)
def test_memory_asked_by_one_queue_alone_never_serves_it_before_a_lower_core_share(
    c_held: int, m_held: int, m_memory: int, m_pending_memory: int
) -> None:
    """Queue `memory` alone asks memory; whatever it holds and asks of it, the queue with the
    lower share of its deserved cores gets the one place free first."""
    specs = [QueueSpec("cores", 1), QueueSpec("memory", 2)]
    gpus = Gpus([100])
    gpus.members = {"c": (100,), "m": (100,)}
    jobs = [Job("c", "cores", "c", (100, 0)), Job("m", "memory", "m", (100, m_pending_memory))]
    book = Book((800, 200), {"cores": (c_held, 0), "memory": (m_held, m_memory)})
    out = plan(specs, book, jobs, gpus.fits, now=0)
    due = out.deserved
    c_share = Fraction(c_held, due["cores"][0])
    m_share = Fraction(m_held, due["memory"][0])
    if c_share < m_share:
        assert out.released == ("c",)


def _pass_with(present: bool, now: float, held: dict[str, float], spent: dict[str, float]) -> Pass:
    """One pass of a cluster of two 100-core GPUs, one busy: big0 (200 cores) fits on the
    empty cluster but not now; small0 always fits."""
    gpus = Gpus([100, 0])
    jobs = _jobs(gpus, ("small0", "small", 50))
    if present:
        jobs += _jobs(gpus, ("big0", "big", 200))
    return plan(SPECS, Book((200, 0)), jobs, gpus.fits, now=now, held_since=held, spent=spent)


def test_a_hold_dropped_when_its_job_goes_away_does_not_start_again_within_the_cooldown() -> None:
    first = _pass_with(True, 100, {}, {})
    assert first.waiting["small0"] == strict_reason(SPECS[0])  # held from 100
    gone = _pass_with(False, 105, dict(first.held_since), dict(first.spent))
    assert gone.held_since == {} and gone.spent == {"big": 105}
    again = _pass_with(True, 107, dict(gone.held_since), dict(gone.spent))
    assert again.released == ("small0",) and again.held_since == {}  # no fresh hold
    later = _pass_with(True, 135, dict(again.held_since), dict(again.spent))
    assert later.waiting["small0"] == strict_reason(SPECS[0])  # the cooldown is over
    assert later.held_since == {"big": 135} and later.spent == {}


def test_an_expired_hold_that_ends_has_already_served_its_cooldown_from_its_expiry() -> None:
    held = {"big": 100.0}
    gone = _pass_with(False, 200, held, {})  # spent at 130, the queue stopped waiting by 200
    assert gone.spent == {}  # 130 + 30 <= 200: nothing left to cool
    again = _pass_with(True, 201, dict(gone.held_since), dict(gone.spent))
    assert again.held_since == {"big": 201}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(0.5, 20.0), st.booleans()), min_size=1, max_size=40))
@example([(1.0, True), (1.0, False), (1.0, True)])
def test_others_are_held_back_at_most_strict_seconds_then_free_for_as_long(
    steps: list[tuple[float, bool]],
) -> None:
    """Whatever the strict queue's tenant does with a job that does not fit now (submit it,
    delete it, resubmit it), each hold holds the others for under `strict_s`, and the next hold
    starts more than `strict_s` after the last pass the previous one held the others back."""
    strict_s = SPECS[0].strict_s
    held: dict[str, float] = {}
    spent: dict[str, float] = {}
    now = 0.0
    in_force: list[tuple[float, float]] = []  # (pass time, its hold's start)
    for dt, present in steps:
        now += dt
        out = _pass_with(present, now, held, spent)
        if out.waiting.get("small0") == strict_reason(SPECS[0]):
            in_force.append((now, out.held_since["big"]))
        held, spent = dict(out.held_since), dict(out.spent)
    for t, start in in_force:
        assert t - start < strict_s
    for (t1, s1), (_, s2) in pairwise(in_force):
        if s1 != s2:
            assert s2 > t1 + strict_s


def test_a_job_more_than_the_cluster_has_starts_no_hold() -> None:
    gpus = Gpus([100, 100])
    jobs = _jobs(gpus, ("big0", "big", 300), ("small0", "small", 50))
    out = plan(SPECS, Book((200, 0)), jobs, gpus.fits, now=100)
    assert out.released == ("small0",) and out.held_since == {}
    assert out.waiting["big0"] == "does not fit whole on any GPU now"


def test_a_job_more_than_its_queues_cap_starts_no_hold() -> None:
    specs = [QueueSpec("big", 1, cap=(150, 2**62), strict_s=30), QueueSpec("small", 1)]
    gpus = Gpus([100, 100, 100])
    jobs = _jobs(gpus, ("big0", "big", 200), ("small0", "small", 50))
    out = plan(specs, Book((300, 0)), jobs, gpus.fits, now=100)
    assert out.released == ("small0",) and out.held_since == {}
    assert "cap" in out.waiting["big0"]


def test_a_job_that_can_never_fit_does_not_keep_a_hold_alive() -> None:
    gpus = Gpus([100, 0])
    jobs = _jobs(gpus, ("big9", "big", 300), ("small0", "small", 50))
    out = plan(SPECS, Book((200, 0)), jobs, gpus.fits, now=110, held_since={"big": 100})
    assert out.released == ("small0",) and out.held_since == {}
    assert out.spent == {"big": 110}


def test_a_hold_that_ends_at_its_queues_share_leaves_it_free_to_hold_again() -> None:
    """A strict queue with a backlog of large jobs: its hold ends because it reached its share,
    which spends nothing (found on the real cluster, where a cooldown after such an end let the
    other queues take every GPU the strict queue's ended pods gave back, for strictSeconds)."""
    gpus = Gpus([100, 100, 0, 0])  # of 400 cores: big deserves 200 against small's backlog
    jobs = _jobs(gpus, ("big0", "big", 100), ("big1", "big", 100), ("small0", "small", 400))
    book = Book((400, 0), {"small": (200, 0)})
    first = plan(SPECS, book, jobs, gpus.fits, now=100, held_since={"big": 90})
    assert first.released == ("big0", "big1")  # big at its share: its hold ends, unspent
    assert first.held_since == {} and first.spent == {}
    gpus.free_job("big0")  # big0 ends: big is below its share again, and waits at once
    later = _jobs(gpus, ("big2", "big", 200), ("small1", "small", 50))
    book = Book((400, 0), {"small": (200, 0), "big": (100, 0)})
    second = plan(SPECS, book, later, gpus.fits, now=101, spent=dict(first.spent))
    assert second.held_since == {"big": 101}
    assert second.waiting["small1"] == strict_reason(SPECS[0])
