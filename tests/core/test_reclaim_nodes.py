"""Reclaim's victims chosen per node (vgpu.core.queues.reclaim_nodes), against a small GPU model.

The model is the tests' own (`reclaim_model`).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.core.reclaim_model import Cluster, Pod
from tests.core.reclaim_model import clusters as model_clusters
from vgpu.core.queues.proportion import ZERO, QueueSpec, Vec, add, share, sub
from vgpu.core.queues.reclaim import Running, victims
from vgpu.core.queues.reclaim_nodes import victims_on_one_node
from vgpu.core.queues.release import Job

SPECS = (QueueSpec("a", 1), QueueSpec("b", 3, reclaim=True), QueueSpec("c", 2))


def clusters() -> st.SearchStrategy[Cluster]:
    """Up to 5 nodes of 1-4 GPUs, each GPU filled by up to 3 pods."""
    return model_clusters(nodes=5, gpus=4, pods_per_gpu=3)


quarters = st.integers(0, 16).map(lambda n: 25 * n)
asks = st.sampled_from([25, 50, 100, 200, 300])


def ask_both(
    cluster: Cluster, ask: int, due: tuple[int, int, int], b_held: int
) -> tuple[tuple[Running, ...] | None, tuple[Running, ...] | None, dict[str, Vec], Job]:
    """The per-node and the whole-cluster answer for the same waiting pod of b."""
    held = {**cluster.held(), "b": (b_held, 0)}
    deserves = {q: (d, 0) for q, d in zip("abc", due, strict=True)}
    job = Job("w", "b", "b", (ask, 0))
    running = cluster.running()

    def fits(_job: Job, gone: Sequence[Running]) -> bool:
        return cluster.fits(ask, gone)

    per_node = victims_on_one_node(
        job,
        SPECS,
        held,
        deserves,
        running,
        fits,
        now=100.0,
        min_runtime_s=10.0,
        free=cluster.node_free,
    )
    whole = victims(job, SPECS, held, deserves, running, fits, now=100.0, min_runtime_s=10.0)
    return per_node, whole, held, job


cases = given(
    cluster=clusters(),
    ask=asks,
    due=st.tuples(quarters, quarters, quarters),
    b_held=quarters,
)


@settings(max_examples=400, deadline=None)
@cases
def test_per_node_victims_keep_every_victim_queue_at_or_above_what_it_deserves(
    cluster: Cluster, ask: int, due: tuple[int, int, int], b_held: int
) -> None:
    assume(not cluster.fits(ask, []))  # callers ask reclaim for no other pod
    got, _, held, job = ask_both(cluster, ask, due, b_held)
    if got is None:
        return
    deserves = dict(zip("abc", ((d, 0) for d in due), strict=True))
    assert share(add(held["b"], job.ask), deserves["b"]) <= 1
    after = dict(held)
    for r in got:
        assert r.queue != "b" and 100.0 - r.started >= 10.0
        after[r.queue] = sub(after[r.queue], r.ask)
    for q in {r.queue for r in got}:
        assert share(after[q], deserves[q]) >= 1, (q, after[q], deserves[q])


@settings(max_examples=400, deadline=None)
@cases
def test_per_node_victims_are_on_one_node_and_let_the_pod_in_with_none_to_spare(
    cluster: Cluster, ask: int, due: tuple[int, int, int], b_held: int
) -> None:
    assume(not cluster.fits(ask, []))
    got, _, _, _ = ask_both(cluster, ask, due, b_held)
    if got is None:
        return
    assert got and len({r.node for r in got}) == 1
    assert cluster.fits(ask, got)
    for r in got:
        assert not cluster.fits(ask, [k for k in got if k is not r])


@settings(max_examples=400, deadline=None)
@cases
def test_per_node_victims_never_outnumber_the_whole_cluster_walks(
    cluster: Cluster, ask: int, due: tuple[int, int, int], b_held: int
) -> None:
    assume(not cluster.fits(ask, []))
    per_node, whole, _, _ = ask_both(cluster, ask, due, b_held)
    if whole is not None:
        assert per_node is not None and len(per_node) <= len(whole), (per_node, whole)


@settings(max_examples=200, deadline=None)
@given(cluster=clusters(), ask=asks)
def test_nothing_is_evicted_when_the_pod_would_not_fit_even_then(
    cluster: Cluster, ask: int
) -> None:
    assume(not cluster.fits(ask, []))
    held = {**cluster.held(), "b": ZERO}
    due = {"a": ZERO, "b": (10_000, 0), "c": ZERO}
    asked: list[int] = []

    def never(_job: Job, gone: Sequence[Running]) -> bool:
        asked.append(len(gone))
        return False

    got = victims_on_one_node(
        Job("w", "b", "b", (ask, 0)),
        SPECS,
        held,
        due,
        cluster.running(),
        never,
        now=100.0,
        min_runtime_s=0.0,
        free=cluster.node_free,
    )
    assert got is None


def test_victims_are_taken_from_the_node_that_needs_fewest_not_where_the_walk_ends() -> None:
    # youngest first over the cluster empties n0's GPU with its two young pods; n1's older pod
    # alone would have done
    pods = (
        Pod("young0", "a", "n0", 0, 50, 80.0),
        Pod("young1", "a", "n0", 0, 50, 81.0),
        Pod("whole", "a", "n1", 0, 100, 20.0),
    )
    cluster = Cluster({"n0": 1, "n1": 1}, pods)
    got, whole, _, _ = ask_both(cluster, 100, (0, 400, 0), 0)
    assert whole is not None and sorted(r.key for r in whole) == ["young0", "young1"]
    assert got is not None and [r.key for r in got] == ["whole"]


def test_among_nodes_needing_as_many_the_least_lost_gpu_time_goes() -> None:
    pods = (Pod("older", "a", "n0", 0, 100, 5.0), Pod("younger", "a", "n1", 0, 100, 50.0))
    cluster = Cluster({"n0": 1, "n1": 1}, pods)
    got, _, _, _ = ask_both(cluster, 100, (0, 400, 0), 0)
    assert got is not None and [r.key for r in got] == ["younger"]


def test_a_walk_that_spent_its_queues_room_on_a_job_not_needed_asks_the_cluster_walk() -> None:
    # a may give up 100 cores (holds 160, deserves 60). On n the walk takes n1 (60, youngest
    # there) and then may not take n2 (50 more would leave a below 60), though n2's GPU is the one
    # the pod needs; the whole-cluster walk spends the room on m1 and n2 instead, and spares m1
    pods = (
        Pod("m1", "a", "m", 0, 50, 80.0),
        Pod("c0", "c", "m", 0, 50, 0.0),
        Pod("n1", "a", "n", 0, 60, 70.0),
        Pod("c1", "c", "n", 0, 40, 0.0),
        Pod("n2", "a", "n", 1, 50, 60.0),
    )
    cluster = Cluster({"m": 1, "n": 2}, pods)
    got, whole, _, _ = ask_both(cluster, 100, (60, 400, 90), 0)
    assert whole is not None and [r.key for r in whole] == ["n2"]
    assert got is not None and [r.key for r in got] == ["n2"]
