"""Over a run of arrivals, departures, evictions and passes: what reclaim frees goes to the job it
was freed for, in the first pass that sees the victims gone, whatever the other queues wait with.

The leader's loop as the extender runs it: a pass releases in fair order (`release.plan`, with
the jobs reclaim evicted for as `first`), then asks reclaim for a waiting pod of the reclaiming
queue (`reclaim_nodes.victims_on_one_node`); victims keep their GPUs until they are gone (a later
step). The GPU model is the test's own: two nodes of two GPUs, pods on one GPU (or whole GPUs of
one node), first fit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from vgpu.core.queues.proportion import ZERO, QueueSpec, Vec, add
from vgpu.core.queues.reclaim import Running
from vgpu.core.queues.reclaim_nodes import victims_on_one_node
from vgpu.core.queues.release import Book, Job, plan
from vgpu.core.queues.whole_gpus import Keep

SPECS = (QueueSpec("a", 1), QueueSpec("b", 3, reclaim=True), QueueSpec("c", 1))
GPUS = [(n, g) for n in ("n0", "n1") for g in range(2)]
Where = list[tuple[str, int]]


def spots(free: dict[tuple[str, int], int], cores: int) -> Where | None:
    if cores <= 100:
        gpu = next((g for g in GPUS if free[g] >= cores), None)
        return None if gpu is None else [gpu]
    for node in ("n0", "n1"):
        empty = [g for g in GPUS if g[0] == node and free[g] == 100]
        if len(empty) >= cores // 100:
            return empty[: cores // 100]
    return None


class Freed(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.free = dict.fromkeys(GPUS, 100)
        self.pending: dict[str, Job] = {}
        self.running: dict[str, tuple[Job, Where, float]] = {}
        self.leaving: set[str] = set()
        self.freed_for: set[str] = set()
        self.now, self.serial = 0.0, 0

    def _take(self, job: Job, where: Where) -> None:
        for g in where:
            self.free[g] -= min(job.ask[0], 100)
        self.running[job.key] = (job, where, self.now)

    def _give(self, key: str) -> None:
        job, where, _ = self.running.pop(key)
        for g in where:
            self.free[g] += min(job.ask[0], 100)

    def _held(self) -> dict[str, Vec]:
        out: dict[str, Vec] = {}
        for job, _, _ in self.running.values():
            out[job.queue] = add(out.get(job.queue, ZERO), job.ask)
        return out

    @rule(
        queue=st.sampled_from("abc"), asks=st.lists(st.sampled_from([25, 50, 100, 200]), max_size=6)
    )
    def arrive(self, queue: str, asks: list[int]) -> None:
        for cores in asks:
            self.serial += 1
            key = f"{queue}{self.serial}"
            self.pending[key] = Job(key, queue, queue, (cores, 0), created=self.now)

    @rule(pick=st.integers(0, 50))
    def end(self, pick: int) -> None:
        staying = sorted(k for k in self.running if k not in self.leaving)
        if staying:
            self._give(staying[pick % len(staying)])

    @rule()
    def victims_go(self) -> None:
        for key in sorted(self.leaving):
            self._give(key)
        self.leaving.clear()

    @rule()
    def one_pass(self) -> None:
        self.now += 10.0
        before = dict(self.free)
        wanted = {
            k for k in self.freed_for if k in self.pending and spots(before, self.pending[k].ask[0])
        }

        def fits(job: Job, _keep: Keep) -> bool:
            where = spots(self.free, job.ask[0])
            if where is not None:
                self._take(job, where)
            return where is not None

        book = Book((400, 0), self._held())
        out = plan(
            SPECS, book, list(self.pending.values()), fits, now=self.now, first=self.freed_for
        )
        for key in out.released:
            self.pending.pop(key)
        self.freed_for -= set(out.released)
        if wanted:
            assert out.released[:1] and out.released[0] in wanted, (out.released, wanted)
        if not self.leaving:
            self._reclaim(out.deserved)

    def _reclaim(self, due: Mapping[str, Vec]) -> None:
        running = [
            Running(k, j.queue, j.ask, t, w[0][0], tuple(f"{n}/{g}" for n, g in w))
            for k, (j, w, t) in self.running.items()
        ]
        for job in sorted(self.pending.values(), key=lambda j: (j.created, j.key)):
            if job.queue != "b":
                continue
            gone = self._fits_without(job)
            chosen = victims_on_one_node(
                job, SPECS, self._held(), due, running, gone, now=self.now, min_runtime_s=0.0
            )
            if chosen:
                self.leaving = {r.key for r in chosen}
                self.freed_for.add(job.key)
                return

    def _fits_without(self, job: Job) -> Callable[[Job, Sequence[Running]], bool]:
        def fits(_job: Job, gone: Sequence[Running]) -> bool:
            free = dict(self.free)
            for r in gone:
                for g in self.running[r.key][1]:
                    free[g] += min(r.ask[0], 100)
            return spots(free, job.ask[0]) is not None

        return fits


Freed.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_what_reclaim_frees_goes_to_the_job_it_was_freed_for = Freed.TestCase
