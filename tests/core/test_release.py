"""Fair, fit-aware release of held jobs (vgpu.core.queues.release) and reclaim (vgpu.core.queues.reclaim).

The GPUs here are a small model of their own (free cores per GPU, members placed first-fit,
all or nothing), enough to make "units say yes but no GPU fits" concrete.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.core.queues.proportion import QueueSpec, Vec, deserved, share
from vgpu.core.queues.reclaim import Running, victims
from vgpu.core.queues.release import Book, Job, plan
from vgpu.core.queues.whole_gpus import NO_KEEP, Keep


@dataclass
class Gpus:
    """Free cores per GPU; a job's members (cores each) placed first-fit, whole or not at all."""

    free: list[int]
    members: dict[str, tuple[int, ...]] = field(default_factory=dict)
    placed: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def fits(self, job: Job, keep: Keep = NO_KEEP) -> bool:
        trial = list(self.free)
        spots: list[tuple[int, int]] = []
        for cores in self.members[job.key]:
            gpu = next((i for i, f in enumerate(trial) if f >= cores), None)
            if gpu is None:
                return False
            trial[gpu] -= cores
            spots.append((gpu, cores))
        self.free = trial
        self.placed[job.key] = spots
        return True

    def free_job(self, key: str) -> None:
        for gpu, cores in self.placed.pop(key):
            self.free[gpu] += cores


def job(key: str, queue: str, *members: int, ns: str = "ns", created: float = 0.0) -> Job:
    return Job(key, queue, ns, (sum(members), 0), created=created)


def test_nothing_is_released_when_units_say_yes_but_no_gpu_fits() -> None:
    gpus = Gpus([50, 50])  # 100 cores free in units, no GPU with 60
    big = job("big", "a", 60)
    gpus.members = {"big": (60,)}
    out = plan([QueueSpec("a")], Book((200, 0), {"a": (100, 0)}), [big], gpus.fits, now=0)
    assert out.released == ()
    assert "does not fit" in out.waiting["big"]


def test_a_gang_is_released_whole_or_not_at_all() -> None:
    gpus = Gpus([100, 100])
    gpus.members = {"g3": (80, 80, 80), "g2": (80, 80)}
    jobs = [job("g3", "a", 80, 80, 80, created=1), job("g2", "a", 80, 80, created=2)]
    out = plan([QueueSpec("a")], Book((200, 0)), jobs, gpus.fits, now=0)
    assert out.released == ("g2",)
    assert sorted(f for f in gpus.free) == [20, 20]


def test_backlogged_queues_get_releases_in_proportion_to_their_weights() -> None:
    gpus = Gpus([100] * 4)
    gpus.members = {f"{q}{i}": (100,) for q in "ab" for i in range(4)}
    jobs = [job(f"{q}{i}", q, 100, created=i) for q in "ab" for i in range(4)]
    book = Book((400, 0), {"a": (0, 0), "b": (0, 0)})
    out = plan([QueueSpec("a", 1), QueueSpec("b", 3)], book, jobs, gpus.fits, now=0)
    assert [k[0] for k in out.released] == ["a", "b", "b", "b"]  # a's 1 of 4 reached first


def test_inside_a_queue_the_namespace_with_the_smallest_dominant_share_goes_first() -> None:
    gpus = Gpus([100, 100])
    gpus.members = {"old": (50,), "new": (50,)}
    jobs = [job("old", "a", 50, ns="rich", created=0), job("new", "a", 50, ns="poor", created=9)]
    book = Book((200, 0), {"a": (100, 0)}, {"rich": (100, 0)})
    out = plan([QueueSpec("a")], book, jobs, gpus.fits, now=0)
    assert out.released[0] == "new"


def test_a_strict_queue_holds_others_back_for_at_most_its_hold() -> None:
    gpus = Gpus([60, 60])
    gpus.members = {"large": (100,), "small": (20,)}
    specs = [QueueSpec("l", strict_s=30), QueueSpec("s")]
    jobs = [job("large", "l", 100), job("small", "s", 20)]
    first = plan(specs, Book((200, 0)), jobs, gpus.fits, now=100)
    assert first.released == () and first.held_since == {"l": 100}
    assert "strict" in first.waiting["small"]
    later = plan(specs, Book((200, 0)), jobs, gpus.fits, now=131, held_since=first.held_since)
    assert later.released == ("small",)


def test_a_queue_never_passes_its_cap() -> None:
    gpus = Gpus([100] * 3)
    gpus.members = {f"j{i}": (100,) for i in range(3)}
    specs = [QueueSpec("a", cap=(200, 0))]
    out = plan(
        specs,
        Book((300, 0)),
        [job(f"j{i}", "a", 100, created=i) for i in range(3)],
        gpus.fits,
        now=0,
    )
    assert out.released == ("j0", "j1")
    assert "cap" in out.waiting["j2"]


def test_work_conserving_off_leaves_over_share_queues_waiting() -> None:
    specs = [QueueSpec("a"), QueueSpec("b")]
    book = Book((400, 0), {"a": (300, 0)})  # a over its 200; b's gang does not fit now
    jobs = [job("a9", "a", 100), job("b-gang", "b", 100, 100)]
    members = {"a9": (100,), "b-gang": (100, 100)}
    strict = Gpus([100], dict(members))
    assert plan(specs, book, jobs, strict.fits, now=0, work_conserving=False).released == ()
    conserving = Gpus([100], dict(members))
    assert plan(specs, book, jobs, conserving.fits, now=0).released == ("a9",)


def test_reclaim_evicts_youngest_first_only_what_lets_the_job_in() -> None:
    specs = [QueueSpec("a"), QueueSpec("b", reclaim=True)]
    held = {"a": (400, 0)}
    due = deserved((400, 0), specs, {"a": (400, 0), "b": (100, 0)})
    running = [Running(f"a{i}", "a", (100, 0), started=float(i)) for i in range(4)]
    waiting = job("b0", "b", 100)
    got = victims(
        waiting, specs, held, due, running, lambda _j, v: len(v) >= 1, now=100, min_runtime_s=10
    )
    assert got is not None and [r.key for r in got] == ["a3"]


def test_reclaim_does_nothing_when_the_job_would_not_fit_anyway() -> None:
    specs = [QueueSpec("a"), QueueSpec("b", reclaim=True)]
    due = deserved((400, 0), specs, {"a": (400, 0), "b": (200, 0)})
    running = [Running(f"a{i}", "a", (100, 0), started=0.0) for i in range(4)]
    got = victims(
        job("b0", "b", 100),
        specs,
        {"a": (400, 0)},
        due,
        running,
        lambda _j, _v: False,
        now=100,
        min_runtime_s=0,
    )
    assert got is None


def test_reclaim_spares_jobs_younger_than_the_minimum_runtime() -> None:
    specs = [QueueSpec("a"), QueueSpec("b", reclaim=True)]
    due = deserved((200, 0), specs, {"a": (200, 0), "b": (100, 0)})
    running = [Running("a0", "a", (100, 0), 95.0), Running("a1", "a", (100, 0), 50.0)]
    got = victims(
        job("b0", "b", 100),
        specs,
        {"a": (200, 0)},
        due,
        running,
        lambda _j, v: bool(v),
        now=100,
        min_runtime_s=10,
    )
    assert got is not None and [r.key for r in got] == ["a1"]


@dataclass
class World:
    """Random arrivals and departures of one-pod jobs and gangs, with reclaim, step by step."""

    rng: random.Random
    gpus: Gpus = field(default_factory=lambda: Gpus([100] * 6))
    pending: list[Job] = field(default_factory=list)
    running: dict[str, tuple[Job, float]] = field(default_factory=dict)
    specs: Sequence[QueueSpec] = (QueueSpec("a", 1, reclaim=True), QueueSpec("b", 3, reclaim=True))
    serial: int = 0

    def arrive(self, now: float) -> None:
        self.serial += 1
        queue = "a" if now < 300 else "b"  # a fills the cluster and its backlog, then b comes
        members = tuple(
            self.rng.choice((10, 30, 60, 100)) for _ in range(self.rng.choice((1, 1, 2, 3)))
        )
        key = f"{queue}{self.serial}"
        self.gpus.members[key] = members
        self.pending.append(job(key, queue, *members, created=now))

    def held(self) -> dict[str, Vec]:
        out: dict[str, Vec] = {}
        for j, _ in self.running.values():
            q = out.get(j.queue, (0, 0))
            out[j.queue] = (q[0] + j.ask[0], 0)
        return out


def walk(seed: int) -> tuple[int, list[str]]:
    """Random arrivals, departures and reclaims for 1,000 steps, checking the invariants at
    each: how many reclaims happened (some seeds never reach one) and every broken invariant."""
    w = World(random.Random(seed))
    broken: list[str] = []

    def check(ok: bool, what: str) -> None:
        if not ok:
            broken.append(f"step {step}: {what}")

    evicted_for: dict[str, str] = {}  # victim job's queue -> reclaimer's queue, this step
    reclaims = 0
    for step in range(1_000):
        now = float(step)
        if w.rng.random() < 0.5 and len(w.pending) < 30:
            w.arrive(now)
        if w.running and w.rng.random() < 0.2:
            w.gpus.free_job(w.rng.choice(sorted(w.running)))
            w.running = {k: v for k, v in w.running.items() if k in w.gpus.placed}
        out = plan(w.specs, Book((600, 0), w.held()), w.pending, w.gpus.fits, now=now)
        for key in out.released:
            j = next(p for p in w.pending if p.key == key)
            check(len(w.gpus.placed[key]) == len(w.gpus.members[key]), f"{key} released in part")
            w.running[key] = (j, now)
        w.pending = [p for p in w.pending if p.key not in out.released]
        check(all(f >= 0 for f in w.gpus.free), f"a GPU over 100 cores: {w.gpus.free}")
        evicted_for.clear()
        for waiting in [p for p in w.pending if p.queue == "b"][:5]:
            running = [Running(k, j.queue, j.ask, t) for k, (j, t) in w.running.items()]
            due = out.deserved

            def frees_enough(jb: Job, vs: Sequence[Running]) -> bool:
                trial = Gpus(list(w.gpus.free), dict(w.gpus.members), dict(w.gpus.placed))
                for v in vs:
                    trial.free_job(v.key)
                return trial.fits(jb)

            got = victims(
                waiting, w.specs, w.held(), due, running, frees_enough, now=now, min_runtime_s=5
            )
            if not got:
                continue
            for v in got:
                # no ping-pong: a queue that was just reclaimed for cannot be reclaimed from
                # by the queue it took from in the same state
                check(evicted_for.get(waiting.queue) != v.queue, f"ping-pong {v.queue}")
                evicted_for[v.queue] = waiting.queue
                check(
                    share(w.held().get(v.queue, (0, 0)), due[v.queue]) >= 1, f"{v.key} under share"
                )
                w.gpus.free_job(v.key)
                del w.running[v.key]
            reclaims += 1
            check(w.gpus.fits(waiting), f"{waiting.key} does not fit after reclaim")
            w.running[waiting.key] = (waiting, now)
            w.pending.remove(waiting)
    return reclaims, broken


@settings(max_examples=4, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_random_arrivals_and_departures_never_release_part_of_a_gang_or_ping_pong(
    seed: int,
) -> None:
    _, broken = walk(seed)
    assert broken == []


def test_the_random_walk_reaches_reclaim() -> None:
    """The walk's reclaim assertions are exercised: not every seed reclaims (seed 262 never
    does), so coverage is pinned on fixed seeds rather than asserted per random example."""
    walks = [walk(seed) for seed in range(4)]
    assert sum(reclaims for reclaims, _ in walks) > 0
    assert [b for _, b in walks] == [[], [], [], []]


def test_reclaim_spares_victims_on_gpus_the_job_does_not_use() -> None:
    specs = [QueueSpec("a"), QueueSpec("b", 3, reclaim=True)]
    due = deserved((400, 0), specs, {"a": (440, 0), "b": (200, 0)})
    assert due == {"a": (200, 0), "b": (200, 0)}
    # youngest first reaches a3 (GPU 3, beside the too young a4), then a2 (GPU 2, whole): only
    # a2's GPU takes b0, so a3 keeps running
    gpus = Gpus([0, 0, 0, 0])
    gpus.members = {k: (c,) for k, c in [("a0", 100), ("a1", 100), ("a2", 100), ("b0", 100)]}
    gpus.members |= {"a3": (40,), "a4": (60,)}
    gpus.placed = {k: [(int(k[1]), c[0])] for k, c in gpus.members.items() if k < "a3"}
    gpus.placed |= {"a3": [(3, 40)], "a4": [(3, 60)]}
    started = {"a0": 0.0, "a1": 1.0, "a2": 2.0, "a3": 3.0, "a4": 99.5}
    running = [Running(k, "a", (gpus.members[k][0], 0), t) for k, t in started.items()]

    def frees_enough(jb: Job, vs: Sequence[Running]) -> bool:
        trial = Gpus(list(gpus.free), dict(gpus.members), dict(gpus.placed))
        for v in vs:
            trial.free_job(v.key)
        return trial.fits(jb)

    b0 = job("b0", "b", 100)
    got = victims(b0, specs, {"a": (440, 0)}, due, running, frees_enough, now=100, min_runtime_s=1)
    assert got is not None and [r.key for r in got] == ["a2"]


def test_a_backlog_not_offered_counts_towards_what_its_queue_deserves() -> None:
    gpus = Gpus([100] * 4)
    gpus.members = {"a0": (100,), "b0": (100,)}
    specs = [QueueSpec("a", 1), QueueSpec("b", 3)]
    jobs = [job("a0", "a", 100), job("b0", "b", 100)]
    offered_only = plan(specs, Book((400, 0)), jobs, gpus.fits, now=0)
    assert offered_only.deserved["b"] == (100, 0)
    book = Book((400, 0), backlog={"a": (900, 0), "b": (900, 0)})
    with_backlog = plan(specs, book, jobs, Gpus([100] * 4, dict(gpus.members)).fits, now=0)
    assert with_backlog.deserved == {"a": (100, 0), "b": (300, 0)}
