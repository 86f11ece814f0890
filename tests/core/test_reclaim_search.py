"""Reclaim finds a victim set on a node whenever one exists within the rules, the fewest
evictions, then the least GPU time lost (vgpu.core.queues.reclaim_nodes and reclaim_search).

The oracle is a brute force over every subset of each node's evictable pods, against the tests'
own GPU model (`reclaim_model`), whose victims hold one GPU or several.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.core.reclaim_model import Cluster, Pod, clusters
from vgpu.core.queues.proportion import ZERO, QueueSpec, Vec, share, sub
from vgpu.core.queues.reclaim import Running
from vgpu.core.queues.reclaim_nodes import victims_on_one_node
from vgpu.core.queues.release import Job

SPECS = (QueueSpec("a", 1), QueueSpec("b", 3, reclaim=True), QueueSpec("c", 2))
NOW, MIN_RUNTIME = 100.0, 10.0


def lost(chosen: Sequence[Running]) -> float:
    return sum(r.ask[0] * (NOW - r.started) for r in chosen)


def legal_sets(
    cluster: Cluster, cores: int, held: dict[str, Vec], due: dict[str, Vec]
) -> list[tuple[Running, ...]]:
    """Every set on one node that lets the pod in and keeps each victim's queue at or above
    what it deserves (the brute force)."""
    out: list[tuple[Running, ...]] = []
    running = [
        r for r in cluster.running(False) if r.queue != "b" and NOW - r.started >= MIN_RUNTIME
    ]
    for node in cluster.gpus:
        mine = [r for r in running if r.node == node]
        for size in range(1, len(mine) + 1):
            for chosen in combinations(mine, size):
                after = dict(held)
                for r in chosen:
                    after[r.queue] = sub(after[r.queue], r.ask)
                legal = all(share(after[r.queue], due[r.queue]) >= 1 for r in chosen)
                if legal and cluster.fits(cores, chosen):
                    out.append(chosen)
    return out


quarters = st.integers(0, 16).map(lambda n: 25 * n)


def ask(
    cluster: Cluster, cores: int, due: dict[str, Vec], held: dict[str, Vec], with_gpus: bool
) -> tuple[Running, ...] | None:
    def fits(_job: Job, gone: Sequence[Running]) -> bool:
        return cluster.fits(cores, gone)

    return victims_on_one_node(
        Job("w", "b", "b", (cores, 0)),
        SPECS,
        held,
        due,
        cluster.running(with_gpus),
        fits,
        now=NOW,
        min_runtime_s=MIN_RUNTIME,
        free=cluster.node_free,
    )


# Most random clusters have room for the pod already (nothing to reclaim): those are filtered
# out, on purpose, so that every example counted is a search.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    cluster=clusters(nodes=3, gpus=4, pods_per_gpu=4, multi=True),
    cores=st.sampled_from([25, 50, 75, 100, 200]),
    due=st.tuples(quarters, quarters, quarters),
    with_gpus=st.booleans(),
)
def test_a_victim_set_on_a_node_is_found_whenever_one_exists_the_fewest_then_least_lost(
    cluster: Cluster, cores: int, due: tuple[int, int, int], with_gpus: bool
) -> None:
    the_fewest_then_least_lost(cluster, cores, due, with_gpus)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    cluster=clusters(nodes=2, gpus=4, pods_per_gpu=1, multi=True, asks=(100,)),
    cores=st.sampled_from([100, 200]),
    due=st.tuples(quarters, quarters, quarters),
)
def test_with_victims_on_several_gpus_the_set_losing_least_wins_among_the_fewest(
    cluster: Cluster, cores: int, due: tuple[int, int, int]
) -> None:
    """Whole-GPU asks among victims holding one GPU or two: sets on more GPUs may lose less."""
    the_fewest_then_least_lost(cluster, cores, due, True)


def the_fewest_then_least_lost(
    cluster: Cluster, cores: int, due: tuple[int, int, int], with_gpus: bool
) -> None:
    """The brute force's fewest evictions, then least GPU time lost, is what reclaim finds."""
    assume(not cluster.fits(cores, []))
    held = {"a": ZERO, "c": ZERO, **cluster.held(), "b": ZERO}
    deserves = {q: (d, 0) for q, d in zip("abc", due, strict=True)}
    assume(share((cores, 0), deserves["b"]) <= 1)  # b may reclaim for this pod
    exists = legal_sets(cluster, cores, held, deserves)
    got = ask(cluster, cores, deserves, held, with_gpus)
    if not exists:
        assert got is None
        return
    fewest = min(len(s) for s in exists)
    least = min(lost(s) for s in exists if len(s) == fewest)
    assert got is not None, (exists, cluster)
    assert len(got) == fewest and lost(got) == least, (got, exists)
    assert cluster.fits(cores, got)


def test_a_gpu_whose_three_pods_free_it_is_found_though_a_younger_pod_elsewhere_spends_the_room() -> (
    None
):
    # a holds 150 and deserves 75: it may give up 75 cores. GPU 0 holds a's three old quarter
    # pods and a free quarter; GPU 1 holds a's young 25-core pod and c's 75. Youngest first takes
    # the young pod on GPU 1 first, then may take only two of GPU 0's: the pod asking one whole
    # GPU never fits, though evicting GPU 0's three pods lets it in within the rules.
    pods = (
        Pod("old0", "a", "n", 0, 25, 10.0),
        Pod("old1", "a", "n", 0, 25, 11.0),
        Pod("old2", "a", "n", 0, 25, 12.0),
        Pod("young", "a", "n", 1, 25, 80.0),
        Pod("c0", "c", "n", 1, 75, 0.0),
    )
    cluster = Cluster({"n": 2}, pods)
    held = {"a": (150, 0), "b": ZERO, "c": (75, 0)}  # a holds 50 more on another node
    due = {"a": (75, 0), "b": (400, 0), "c": (75, 0)}
    for with_gpus in (False, True):
        got = ask(cluster, 100, due, held, with_gpus)
        assert got is not None and sorted(r.key for r in got) == ["old0", "old1", "old2"]


def test_on_a_full_node_of_quarter_pods_the_gpu_to_empty_is_found_within_the_bounds() -> None:
    # eight GPUs of four quarter pods each, but one GPU with three: a whole-GPU pod needs those
    # three, and a may give up exactly three quarters, so the youngest-first walk fails. The
    # sets of three are thousands; with the GPUs known those on one GPU are asked first.
    pods: list[Pod] = []
    for gpu in range(8):
        for slot in range(3 if gpu == 5 else 4):
            pods.append(Pod(f"g{gpu}s{slot}", "a", "n", gpu, 25, float(20 + gpu + slot)))
    cluster = Cluster({"n": 8}, tuple(pods))
    held = {"a": (775, 0), "b": ZERO, "c": ZERO}
    due = {"a": (700, 0), "b": (400, 0), "c": ZERO}
    got = ask(cluster, 100, due, held, True)
    assert got is not None and sorted(r.key for r in got) == ["g5s0", "g5s1", "g5s2"]


def test_a_victim_on_two_gpus_that_loses_less_wins_over_one_on_a_single_gpu() -> None:
    # A pod asking one whole GPU: evicting old (one GPU, 100 cores for 100 s) or wide (two whole
    # GPUs, 200 cores for 10 s) lets it in; one eviction either way, and wide loses a fifth of
    # the GPU time. The sets on fewer GPUs were asked first and the first that fit won.
    pods = (Pod("old", "a", "n", 0, 100, 0.0), Pod("wide", "a", "n", 1, 200, 90.0, span=2))
    cluster = Cluster({"n": 3}, pods)
    held = {"a": (300, 0), "b": ZERO, "c": ZERO}
    due = {"a": (100, 0), "b": (400, 0), "c": ZERO}
    got = ask(cluster, 100, due, held, True)
    assert got is not None and [r.key for r in got] == ["wide"]
