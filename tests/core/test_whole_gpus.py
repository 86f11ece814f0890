"""Whole GPUs kept for the queues waiting for them (`vgpu.core.queues.whole_gpus`, `release.plan`).

On a real cluster a 25-core pod was placed on a just-emptied GPU while a 25-core hole waited on
another node, in the same pass, and the whole-GPU queue below its share lost that GPU. Every
policy can choose an idle GPU while a hole fits (`default` does with pods asking CPU: its
stranding term; `spread` by design), so the pass, which knows which queues wait for whole GPUs,
tells the placement, and a small pod then goes to a hole first. Checked here against the GPUs'
own free capacity, not the module's helpers; and the placement is the policy's, exactly, when no
whole-GPU job waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.model import GpuSelector, PodRequest
from vgpu.core.policy.specs import POLICY_NAMES, make_policy
from vgpu.core.queues import whole_gpus
from vgpu.core.queues.proportion import QueueSpec
from vgpu.core.queues.release import Book, Job, plan
from vgpu.core.queues.whole_gpus import NO_KEEP, Keep
from vgpu.core.scheduler import Scheduler, Selection
from vgpu.core.state import ClusterState
from vgpu.core.units import memory_need_mmib
from vgpu.core.workload import DEFAULT_WORKLOAD

GPU_MIB = 16_384  # make_node's GPU memory
SPECS = [QueueSpec("small"), QueueSpec("whole")]
USED = st.lists(st.sampled_from([0, 25, 50, 75, 100]), min_size=6, max_size=6)
SMALL = st.lists(st.sampled_from([25, 50, 75]), min_size=1, max_size=5)


def cluster(used: Sequence[int], policy: str) -> Scheduler:
    """Two nodes of three GPUs, GPU i holding a pod of `used[i]` cores (asking CPU too)."""
    state = ClusterState([make_node("a", gpus=3), make_node("b", gpus=3)])
    scheduler = Scheduler(state, make_policy(policy, DEFAULT_WORKLOAD))
    gpus = [g.uuid for ns in state.nodes() for g in ns.gpus]
    for i, cores in enumerate(used):
        if cores:
            there = GpuSelector(include_uuids=frozenset({gpus[i]}))
            placed = scheduler.select(make_pod(f"run{i}", cores, selector=there))
            assert placed is not None
            state.charge(placed.assignment)
    return scheduler


def a_hole_fits(state: ClusterState, pod: PodRequest) -> bool:
    """Whether some partly used healthy GPU has the cores and memory of the pod's one share."""
    (c,) = pod.gpu_containers
    need = memory_need_mmib(c.cores, c.memory_mib, GPU_MIB)
    return any(
        100 - ns.free_cores[p] > 0 and ns.free_cores[p] >= c.cores and ns.free_mem[p] >= need
        for ns in state.nodes()
        for p in range(len(ns.gpus))
        if ns.gpus[p].healthy and ns.cpu_free >= pod.cpu_milli
    )


def took_idle(state: ClusterState, chosen: Selection) -> bool:
    ns = state.node(chosen.node)
    return any(ns.is_idle_gpu(ns.positions[s.uuid]) for s in chosen.assignment.shares)


@dataclass
class Pass:
    """One release pass over the cluster: small pods and whole-GPU pods, placed through
    `whole_gpus.select` and held, each placement checked as it is made."""

    scheduler: Scheduler
    pods: dict[str, PodRequest]
    kept: list[Keep] = field(default_factory=list)
    placed: dict[str, Selection] = field(default_factory=dict)

    def fits(self, job: Job, keep: Keep) -> bool:
        self.kept.append(keep)
        state, pod = self.scheduler.state, self.pods[job.key]
        hole = a_hole_fits(state, pod) if not job.whole else False
        chosen = whole_gpus.select(self.scheduler, pod, keep)
        if chosen is None:
            return False
        if keep and hole:
            assert not took_idle(state, chosen), f"{job.key} took an idle GPU while a hole fits"
        state.charge(chosen.assignment)
        self.placed[job.key] = chosen
        return True


def jobs_of(small: Sequence[int], whole_gpus_each: int) -> tuple[list[Job], dict[str, PodRequest]]:
    pods = {f"s{i}": make_pod(f"s{i}", c) for i, c in enumerate(small)}
    pods["w0"] = make_pod("w0", *[100] * whole_gpus_each)
    jobs = [
        Job(k, "small", "s", (p.gpu_milli // 10, 0), created=i)
        for i, (k, p) in enumerate(pods.items())
        if k.startswith("s")
    ]
    jobs.append(Job("w0", "whole", "w", (100 * whole_gpus_each, 0), created=-1, whole=True))
    return jobs, pods


@settings(max_examples=120, deadline=None)
@given(used=USED, small=SMALL, gpus=st.integers(1, 4), policy=st.sampled_from(POLICY_NAMES))
def test_a_small_pod_takes_a_hole_not_an_idle_gpu_while_a_whole_gpu_queue_waits(
    used: list[int], small: list[int], gpus: int, policy: str
) -> None:
    """`whole` holds more than `small` (served second) and stays below its share: while its job
    is not released, no small pod is put on an idle GPU when a hole fits it."""
    scheduler = cluster(used, policy)
    jobs, pods = jobs_of(small, gpus)
    book = Book((600, 0), {"whole": (100, 0)})
    run = Pass(scheduler, pods)
    out = plan(SPECS, book, jobs, run.fits, now=0)
    assert run.kept[0] == Keep(frozenset({"whole"}))
    assert set(out.released) == set(run.placed)


@settings(max_examples=120, deadline=None)
@given(used=USED, small=SMALL, policy=st.sampled_from(POLICY_NAMES))
def test_placement_is_the_policys_when_no_whole_gpu_job_waits(
    used: list[int], small: list[int], policy: str
) -> None:
    """No whole-GPU job: every small pod goes where the policy alone puts it (a second cluster
    in the same state placed by `Scheduler.select`)."""
    kept, plain = cluster(used, policy), cluster(used, policy)
    jobs, pods = jobs_of(small, 1)
    jobs = [j for j in jobs if not j.whole]
    run = Pass(kept, pods)
    plan(SPECS, Book((600, 0)), jobs, run.fits, now=0)
    assert all(k == NO_KEEP for k in run.kept)
    for job in jobs:
        if policy == "random":
            continue  # draws differ between two schedulers' streams once the paths differ
        alone = plain.select(pods[job.key])
        assert (alone is None) == (job.key not in run.placed)
        if alone is not None:
            assert run.placed[job.key].assignment == alone.assignment
            plain.state.charge(alone.assignment)


def test_a_queue_at_its_share_keeps_no_gpu_and_the_keep_ends_with_its_job() -> None:
    """`Keep` names a queue only below its deserved share and only until its whole-GPU jobs are
    released."""
    scheduler = cluster([0] * 6, "bestfit")
    jobs, pods = jobs_of([25, 25], 1)
    at_share = Pass(scheduler, pods)
    plan(SPECS, Book((600, 0), {"whole": (600, 0)}), jobs, at_share.fits, now=0)
    assert all(k == NO_KEEP for k in at_share.kept)
    fresh = Pass(cluster([0] * 6, "bestfit"), pods)
    out = plan(SPECS, Book((600, 0), {"small": (25, 0)}), jobs, fresh.fits, now=0)
    assert out.released[0] == "w0"  # its queue holds least: tried first, and fits
    assert fresh.kept == [Keep(frozenset({"whole"})), NO_KEEP, NO_KEEP]


def test_a_whole_gpu_job_held_by_its_queues_cap_keeps_no_gpu() -> None:
    """A job that waits for its queue's cap, not for idle GPUs, keeps none."""
    capped = [QueueSpec("small"), QueueSpec("whole", cap=(100, 10**6))]
    jobs, pods = jobs_of([25, 25], 2)
    run = Pass(cluster([0] * 6, "bestfit"), pods)
    out = plan(capped, Book((600, 0), {"small": (25, 0)}), jobs, run.fits, now=0)
    assert "cap" in out.waiting["w0"]
    assert run.kept == [NO_KEEP, NO_KEEP]
