"""Reclaim with victims chosen per node, over a run of arrivals, departures and passes: no
ping-pong, victims' queues kept at or above what they deserve, every reclaimed pod placed whole.

Both queues may reclaim, so a rule that let capacity flow back and forth would show here. The
GPU model is the test's own: three nodes of two GPUs (100 cores each); a pod asks a part of one
GPU or whole GPUs of one node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from vgpu.core.queues.proportion import ZERO, QueueSpec, Vec, add, deserved, share
from vgpu.core.queues.reclaim import Running
from vgpu.core.queues.reclaim_nodes import victims_on_one_node
from vgpu.core.queues.release import Job

SPECS = (QueueSpec("a", 1, reclaim=True), QueueSpec("b", 3, reclaim=True))
GPUS = [(n, g) for n in ("n0", "n1", "n2") for g in range(2)]


@dataclass(frozen=True)
class Pod:
    key: str
    queue: str
    cores: int


def spots(free: dict[tuple[str, int], int], cores: int) -> list[tuple[str, int]] | None:
    """Where a pod goes, first fit: one GPU with room, or whole GPUs of one node."""
    if cores <= 100:
        gpu = next((g for g in GPUS if free[g] >= cores), None)
        return None if gpu is None else [gpu]
    for node in ("n0", "n1", "n2"):
        empty = [g for g in GPUS if g[0] == node and free[g] == 100]
        if len(empty) >= cores // 100:
            return empty[: cores // 100]
    return None


class Reclaiming(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.free = dict.fromkeys(GPUS, 100)
        self.pending: list[Pod] = []
        self.running: dict[str, tuple[Pod, list[tuple[str, int]], float]] = {}
        self.now, self.serial, self.reclaims = 0.0, 0, 0

    def _take(self, pod: Pod, where: list[tuple[str, int]]) -> None:
        for g in where:
            self.free[g] -= pod.cores if pod.cores <= 100 else 100
        self.running[pod.key] = (pod, where, self.now)

    def _give(self, key: str) -> Pod:
        pod, where, _ = self.running.pop(key)
        for g in where:
            self.free[g] += pod.cores if pod.cores <= 100 else 100
        return pod

    def _held(self) -> dict[str, Vec]:
        out: dict[str, Vec] = {}
        for pod, _, _ in self.running.values():
            out[pod.queue] = add(out.get(pod.queue, ZERO), (pod.cores, 0))
        return out

    @rule(
        queue=st.sampled_from("ab"),
        asks=st.lists(st.sampled_from([25, 50, 100, 200]), min_size=1, max_size=8),
    )
    def arrive(self, queue: str, asks: list[int]) -> None:
        """A burst of a queue's pods (bursts build the backlogs that make queues reclaim)."""
        for cores in asks:
            self.serial += 1
            self.pending.append(Pod(f"{queue}{self.serial}", queue, cores))

    @rule(pick=st.integers(0, 50))
    def depart(self, pick: int) -> None:
        if self.running:
            self._give(sorted(self.running)[pick % len(self.running)])

    @rule(wait=st.sampled_from([5.0, 30.0]))
    def a_pass(self, wait: float) -> None:
        self.now += wait
        for pod in list(self.pending):
            where = spots(self.free, pod.cores)
            if where is not None:
                self._take(pod, where)
                self.pending.remove(pod)
        requests = dict(self._held())
        for pod in self.pending:
            requests[pod.queue] = add(requests.get(pod.queue, ZERO), (pod.cores, 0))
        due = deserved((600, 0), SPECS, requests)
        took_from: set[tuple[str, str]] = set()  # (victims' queue, reclaimer's queue) this pass
        for pod in list(self.pending):
            self._reclaim(pod, due, took_from)

    def _reclaim(self, pod: Pod, due: dict[str, Vec], took_from: set[tuple[str, str]]) -> None:
        held = self._held()
        running = [
            Running(k, p.queue, (p.cores, 0), t, where[0][0])
            for k, (p, where, t) in self.running.items()
        ]

        def fits(_job: Job, gone: Sequence[Running]) -> bool:
            free = dict(self.free)
            for r in gone:
                p, where, _ = self.running[r.key]
                for g in where:
                    free[g] += p.cores if p.cores <= 100 else 100
            return spots(free, pod.cores) is not None

        job = Job(pod.key, pod.queue, pod.queue, (pod.cores, 0))
        got = victims_on_one_node(
            job, SPECS, held, due, running, fits, now=self.now, min_runtime_s=10.0
        )
        if not got:
            return
        assert share(add(held.get(pod.queue, ZERO), job.ask), due[pod.queue]) <= 1
        for r in got:
            assert (pod.queue, r.queue) not in took_from, "capacity went back the way it came"
            took_from.add((r.queue, pod.queue))
            self.pending.append(self._give(r.key))
        for q in {r.queue for r in got}:
            assert share(self._held().get(q, ZERO), due[q]) >= 1
        where = spots(self.free, pod.cores)
        assert where is not None, "evicted, and the pod does not fit"
        self._take(pod, where)
        self.pending.remove(pod)
        self.reclaims += 1

    @invariant()
    def no_gpu_is_overcommitted(self) -> None:
        assert all(0 <= f <= 100 for f in self.free.values())


Reclaiming.TestCase.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)
test_reclaim_per_node_over_a_run_never_ping_pongs = Reclaiming.TestCase
