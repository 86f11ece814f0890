"""Grouping queued pods into the jobs `release.plan` releases whole: a gang is one job
only when all its members exist and are held; a gang caught half released (a leader changed
between two gate removals) is finished from the leader's record of its decision, never decided
again and never grown; the book counts released pods."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.queues.jobs import QueuedPod, group
from vgpu.core.queues.proportion import ZERO, add

CAP = (800, 320)


def _pod(name: str, **kw: object) -> QueuedPod:
    fields: dict[str, object] = {"queue": "a", "namespace": "ns", "ask": (10, 4), "gated": True}
    fields.update(kw)
    return QueuedPod(key=f"ns/{name}", **fields)  # type: ignore[arg-type]


def test_a_gang_is_one_job_asking_its_members_sum_oldest_age_highest_priority() -> None:
    pods = [
        _pod(f"w{i}", gang="ns/g", gang_size=3, created=float(10 - i), priority=i) for i in range(3)
    ]
    out = group(pods, CAP)
    (job,) = out.jobs
    assert (job.key, job.ask, job.created, job.priority) == ("gang:ns/g", (30, 12), 8.0, 2)
    assert out.members[job.key] == ("ns/w0", "ns/w1", "ns/w2")


def test_a_gang_short_of_members_waits_and_is_not_a_job() -> None:
    out = group([_pod("w0", gang="ns/g", gang_size=3), _pod("w1", gang="ns/g", gang_size=3)], CAP)
    assert out.jobs == ()
    assert out.waiting["ns/w0"] == "gang ns/g: 2 of 3 members exist"


def test_a_gang_half_released_is_finished_not_decided_again() -> None:
    pods = [_pod("w0", gang="ns/g", gang_size=3, gated=False)]
    pods += [_pod(f"w{i}", gang="ns/g", gang_size=3) for i in (1, 2)]
    out = group(pods, CAP, decided={"ns/g": frozenset({"ns/w0", "ns/w1", "ns/w2"})})
    assert out.jobs == ()
    assert out.finishing == ("ns/w1", "ns/w2")
    assert out.book.by_queue == {"a": (30, 12)}  # the finishing members hold their place too


def test_released_pods_count_in_the_book_by_queue_and_namespace() -> None:
    pods = [
        _pod("r1", gated=False, queue="a", namespace="x"),
        _pod("r2", gated=False, queue="b", namespace="x", ask=(50, 0)),
        _pod("h1", queue="b"),
    ]
    out = group(pods, CAP)
    assert out.book.by_queue == {"a": (10, 4), "b": (50, 0)}
    assert out.book.by_namespace == {"x": (60, 4)}
    assert out.pending == {"b": (10, 4)}
    assert [j.key for j in out.jobs] == ["ns/h1"]


POD = st.builds(
    lambda i, gang, size, gated, q: _pod(
        f"p{i}", gang=None if gang is None else f"ns/g{gang}", gang_size=size, gated=gated, queue=q
    ),
    st.integers(0, 10**6),
    st.none() | st.integers(0, 3),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from(["a", "b"]),
)


@given(
    st.lists(POD, max_size=20, unique_by=lambda p: p.key),
    st.dictionaries(
        st.sampled_from([f"ns/g{i}" for i in range(4)]),
        st.frozensets(st.sampled_from([f"ns/p{i}" for i in range(8)])),
    ),
)
def test_every_held_pod_is_offered_finished_or_told_why_and_no_gang_is_offered_in_part(
    pods: list[QueuedPod], decided: dict[str, frozenset[str]]
) -> None:
    pods = [p if p.gang is None else _same_size(p, pods) for p in pods]
    out = group(pods, CAP, decided)
    offered = [k for job in out.jobs for k in out.members[job.key]]
    held = sorted(p.key for p in pods if p.gated)
    assert sorted(offered + list(out.finishing) + list(out.waiting)) == held
    by_key = {p.key: p for p in pods}
    for key in out.finishing:  # only what the leader's record names finishes
        pod = by_key[key]
        assert pod.gang is not None and key in decided.get(pod.gang, frozenset())
    for key in offered:  # a decided gang is never decided again
        assert by_key[key].gang not in decided
    for job in out.jobs:
        if job.key.startswith("gang:"):
            gang = job.key.removeprefix("gang:")
            everyone = [p for p in pods if p.gang == gang]
            assert all(p.gated for p in everyone)
            assert sorted(out.members[job.key]) == sorted(p.key for p in everyone)
            assert len(everyone) >= everyone[0].gang_size
    released = ZERO
    for p in pods:
        if not p.gated or p.key in out.finishing:
            released = add(released, p.ask)
    total = ZERO
    for v in out.book.by_queue.values():
        total = add(total, v)
    assert total == released


def _same_size(pod: QueuedPod, pods: list[QueuedPod]) -> QueuedPod:
    size = next(p.gang_size for p in pods if p.gang == pod.gang)
    queue = next(p.queue for p in pods if p.gang == pod.gang)
    return QueuedPod(
        pod.key, queue, pod.namespace, pod.ask, pod.gated, gang=pod.gang, gang_size=size
    )


def test_a_half_released_gang_without_the_leaders_record_is_never_released() -> None:
    """Reusing a released gang's name (or annotating a held pod into it) must not
    release the new members with no fit, cap or share check."""
    pods = [_pod("w0", gang="ns/g", gang_size=1, gated=False)]
    pods += [_pod(f"x{i}", gang="ns/g", gang_size=1, ask=(100, 0)) for i in range(3)]
    out = group(pods, CAP)
    assert out.jobs == ()
    assert out.finishing == ()
    assert set(out.waiting) == {"ns/x0", "ns/x1", "ns/x2"}
    assert "no record" in out.waiting["ns/x0"]


def test_a_recorded_gang_finishes_only_its_recorded_members_and_cannot_grow() -> None:
    pods = [_pod("w0", gang="ns/g", gang_size=3, gated=False)]
    pods += [_pod(f"w{i}", gang="ns/g", gang_size=3) for i in (1, 2)]
    pods.append(_pod("late", gang="ns/g", gang_size=3, ask=(100, 0)))
    out = group(pods, CAP, decided={"ns/g": frozenset({"ns/w0", "ns/w1", "ns/w2"})})
    assert out.jobs == ()
    assert out.finishing == ("ns/w1", "ns/w2")
    assert "cannot grow" in out.waiting["ns/late"]


def test_a_recorded_member_recreated_under_its_name_is_not_the_recorded_pod() -> None:
    """The record names pods by UID: a pod deleted and made again asking more is a new pod."""
    pods = [_pod("w0", gang="ns/g", gang_size=2, gated=False, uid="u0")]
    pods.append(_pod("w1", gang="ns/g", gang_size=2, uid="new", ask=(400, 0)))
    out = group(pods, CAP, decided={"ns/g": frozenset({"u0", "u1"})})
    assert out.finishing == ()
    assert "cannot grow" in out.waiting["ns/w1"]


def test_a_decided_gangs_held_members_count_against_their_queue_at_once() -> None:
    """Between its decision and its last gate's removal a gang already holds its place: a cap
    must count it, or a second job would pass the cap in the meantime."""
    pods = [_pod(f"w{i}", gang="ns/g", gang_size=2, ask=(50, 0)) for i in range(2)]
    out = group(pods, CAP, decided={"ns/g": frozenset({"ns/w0", "ns/w1"})})
    assert out.book.by_queue == {"a": (100, 0)}
    assert out.pending == {"a": (0, 0)}


def test_a_job_asks_whole_gpus_when_every_member_asking_a_gpu_does() -> None:
    """A gang of whole-GPU workers and a CPU-only parameter server waits for whole GPUs; one
    fractional member, or no GPU at all, does not (`whole_gpus.Keep`)."""
    workers = [_pod(f"w{i}", gang="ns/g", gang_size=3, ask=(100, 40), whole=True) for i in (0, 1)]
    server = _pod("ps", gang="ns/g", gang_size=3, ask=(0, 0))
    small = _pod("s", gang="ns/h", gang_size=2, ask=(25, 4))
    mixed = _pod("m", gang="ns/h", gang_size=2, ask=(100, 40), whole=True)
    cpu = _pod("c", ask=(0, 0))
    out = group([*workers, server, small, mixed, cpu], CAP)
    whole = {j.key: j.whole for j in out.jobs}
    assert whole == {"gang:ns/g": True, "gang:ns/h": False, "ns/c": False}
