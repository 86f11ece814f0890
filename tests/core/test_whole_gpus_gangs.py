"""Whole GPUs kept while a gang's members are placed (`whole_gpus.plan_gang`, `release.plan`).

The keep was first made for single pods (`tests/core/test_whole_gpus.py`); a gang's members are
placed together by the gang planner, on a fork, and the pass released a gang of small members
onto idle GPUs while holes fitted them and a queue below its share waited for whole GPUs. Here
each member's place is checked against the GPUs' own free capacity at the moment the planner
places it (earlier members charged), not against the module's helpers; the placement is the
planner's, exactly, when no whole-GPU job waits; and the keep never makes a gang that fits not
fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from tests.core.test_whole_gpus import SMALL, USED, a_hole_fits, cluster
from vgpu.core import gang as gang_planning
from vgpu.core.gang import GangPlan, member_order
from vgpu.core.ids import GangKey
from vgpu.core.model import Assignment, GpuSelector, PodRequest
from vgpu.core.policy.specs import POLICY_NAMES, make_policy
from vgpu.core.queues import whole_gpus
from vgpu.core.queues.proportion import QueueSpec
from vgpu.core.queues.release import Book, Job, plan
from vgpu.core.queues.whole_gpus import NO_KEEP, Keep
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import DEFAULT_WORKLOAD

SPECS = [QueueSpec("small"), QueueSpec("whole")]
GANG = GangKey("s/g")
WAITING = Keep(frozenset({"whole"}))


def took_idle(state: ClusterState, placed: Assignment) -> bool:
    ns = state.node(placed.node)
    return any(ns.is_idle_gpu(ns.positions[s.uuid]) for s in placed.shares)


def no_member_passed_a_hole(
    state: ClusterState, members: Sequence[PodRequest], got: GangPlan
) -> None:
    """Replays the plan in the planner's order on a fork: a member that a hole fits (a partly
    used GPU, earlier members counted) was not put on an idle GPU."""
    state.fork()
    try:
        for pod in member_order(members):
            placed = got.for_pod(pod.key)
            assert placed is not None
            if a_hole_fits(state, pod):
                assert not took_idle(state, placed), f"{pod.key} took an idle GPU while a hole fits"
            state.charge(placed)
    finally:
        state.revert()


def gang_of(cores: Sequence[int]) -> list[PodRequest]:
    return [make_pod(f"g{i}", c, namespace="s") for i, c in enumerate(cores)]


@dataclass
class GangPass:
    """A pass releasing a gang of small members (placed through `whole_gpus.plan_gang`, each
    member checked) and a whole-GPU pod (through `whole_gpus.select`)."""

    scheduler: Scheduler
    members: list[PodRequest]
    whole: PodRequest
    kept: list[Keep] = field(default_factory=list)
    placed: set[str] = field(default_factory=set)

    def fits(self, job: Job, keep: Keep) -> bool:
        self.kept.append(keep)
        state = self.scheduler.state
        if job.key == "gang":
            got = whole_gpus.plan_gang(self.scheduler, GANG, self.members, keep)
            if not isinstance(got, GangPlan):
                return False
            if keep:
                no_member_passed_a_hole(state, self.members, got)
            for placed in got.assignments:
                state.charge(placed)
        else:
            chosen = whole_gpus.select(self.scheduler, self.whole, keep)
            if chosen is None:
                return False
            state.charge(chosen.assignment)
        self.placed.add(job.key)
        return True


@settings(max_examples=120, deadline=None)
@given(used=USED, small=SMALL, gpus=st.integers(1, 4), policy=st.sampled_from(POLICY_NAMES))
def test_a_small_gang_takes_holes_not_idle_gpus_while_a_whole_gpu_queue_waits(
    used: list[int], small: list[int], gpus: int, policy: str
) -> None:
    """`whole` holds more than `small` (whose gang is tried first) and stays below its share:
    while its job is not released, no member of the gang goes to an idle GPU when a hole fits
    it."""
    members = gang_of(small)
    whole = make_pod("w0", *[100] * gpus, namespace="w")
    jobs = [
        Job("gang", "small", "s", (sum(small), 0)),
        Job("w0", "whole", "w", (100 * gpus, 0), created=-1, whole=True),
    ]
    run = GangPass(cluster(used, policy), members, whole)
    out = plan(SPECS, Book((600, 0), {"whole": (100, 0)}), jobs, run.fits, now=0)
    assert run.kept[0] == WAITING
    assert set(out.released) == run.placed


@settings(max_examples=120, deadline=None)
@given(
    used=USED,
    small=SMALL,
    whole_members=st.booleans(),
    policy=st.sampled_from([p for p in POLICY_NAMES if p != "random"]),
)
def test_a_gangs_placement_is_the_planners_when_the_keep_does_not_apply(
    used: list[int], small: list[int], whole_members: bool, policy: str
) -> None:
    """No queue waits for whole GPUs, or the gang's members ask whole GPUs only: the plan is
    the gang planner's own (a second cluster in the same state). `random` is left out: two
    schedulers' draws differ once their paths do."""
    members = gang_of([100] * len(small) if whole_members else small)
    keep = WAITING if whole_members else NO_KEEP
    kept, plain = cluster(used, policy), cluster(used, policy)
    got = whole_gpus.plan_gang(kept, GANG, members, keep)
    alone = gang_planning.plan(plain, GANG, members)
    assert got == alone


NODE_CPU = st.sampled_from([2_000, 3_000, 6_000, 64_000])
MEMBER = st.tuples(st.sampled_from([25, 50, 75]), st.sampled_from([500, 1_000, 2_500, 4_500]))


@settings(max_examples=150, deadline=None)
@given(
    used=USED,
    cpus=st.lists(NODE_CPU, min_size=2, max_size=2),
    members=st.lists(MEMBER, min_size=1, max_size=5),
    policy=st.sampled_from([p for p in POLICY_NAMES if p != "random"]),
)
def test_the_keep_never_makes_a_gang_that_fits_not_fit(
    used: list[int], cpus: list[int], members: list[tuple[int, int]], policy: str
) -> None:
    """Nodes short of CPU can make members that go to holes leave a later member nowhere:
    the gang is then placed as the planner alone places it, so a gang the planner places is
    placed with the keep too (the keep may place one the planner's order does not; `random`
    is left out: two schedulers' draws differ once their paths do)."""
    pods = [make_pod(f"g{i}", c, cpu=cpu, namespace="s") for i, (c, cpu) in enumerate(members)]
    kept, plain = cpu_cluster(used, cpus, policy), cpu_cluster(used, cpus, policy)
    got = whole_gpus.plan_gang(kept, GANG, pods, WAITING)
    alone = gang_planning.plan(plain, GANG, pods)
    if isinstance(alone, GangPlan):
        assert isinstance(got, GangPlan)


def cpu_cluster(used: Sequence[int], cpus: Sequence[int], policy: str) -> Scheduler:
    """Two nodes of three GPUs with `cpus` CPU each, GPU i holding a pod of `used[i]` cores
    (asking no CPU, so the node's CPU is all the gang's)."""
    state = ClusterState([make_node("a", gpus=3, cpu=cpus[0]), make_node("b", gpus=3, cpu=cpus[1])])
    scheduler = Scheduler(state, make_policy(policy, DEFAULT_WORKLOAD))
    gpus = [g.uuid for ns in state.nodes() for g in ns.gpus]
    for i, cores in enumerate(used):
        if cores:
            there = GpuSelector(include_uuids=frozenset({gpus[i]}))
            placed = scheduler.select(make_pod(f"run{i}", cores, cpu=0, selector=there))
            assert placed is not None
            state.charge(placed.assignment)
    return scheduler


def test_a_gang_whose_members_cannot_all_go_to_holes_is_placed_as_the_planner_places_it() -> None:
    """Node a has a 50-core hole and 6 CPUs, b an idle GPU and 2 CPUs. Sent to the hole, the
    50-core member (1 CPU) leaves a 5 CPUs, too few for the 25-core member asking 5.5; `default`
    alone puts the first on b's idle GPU and the second in a's hole: that plan is kept."""
    cpus, used = [6_000, 2_000], [50, 100, 100, 0, 100, 100]
    pods = [
        make_pod("g0", 50, cpu=1_000, namespace="s"),
        make_pod("g1", 25, cpu=5_500, namespace="s"),
    ]
    kept, plain = cpu_cluster(used, cpus, "default"), cpu_cluster(used, cpus, "default")
    got = whole_gpus.plan_gang(kept, GANG, pods, WAITING)
    alone = gang_planning.plan(plain, GANG, pods)
    assert isinstance(alone, GangPlan)
    assert got == alone
    first = alone.for_pod(pods[0].key)
    assert first is not None and first.node == "b"
