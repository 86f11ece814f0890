"""A strict hold outlives a failover without starting again (a strict queue holds the
others back for at most its `strictSeconds`): the leader carries each hold's start on the leader
Lease and the next leader reads it from there (`vgpu.extender.queues.strict_holds`)."""

from __future__ import annotations

import json

import pytest

from tests.extender.builders import make_node
from tests.extender.conftest import Harness
from tests.extender.lease_stub import Lease
from tests.extender.test_queue_release import _daemon, _held, _queues, _watched
from tests.waiting import wait_until
from vgpu.core.ids import PodKey
from vgpu.daemons.extender.daemon import ExtenderDaemon
from vgpu.extender.queues.release_loop import QueueReleaser
from vgpu.extender.queues.release_pass import QueueIndex
from vgpu.extender.queues.strict_holds import (
    HOLDS_ANNOTATION,
    SPENT_ANNOTATION,
    decode,
    decode_spent,
    encode,
)

T0 = 2_000_000_000.0


def _leader(daemon: ExtenderDaemon, lease: Lease | None, wall: float) -> QueueReleaser:
    return QueueReleaser(
        daemon.api,
        QueueIndex(daemon.extender.queue_parts()),
        namespace="vgpu",
        config_map="vgpu-queues",
        may_act=lambda: None,
        wall=lambda: wall,
        notes=lease,
    )


def _released(releaser: QueueReleaser, *, but: str = "") -> list[str]:
    """One pass over the pods listed (all but the one named `but`, as if it were deleted)."""
    pods = [p for p in releaser.api.list_pods().items if p["metadata"]["name"] != but]
    releaser.index.replace_all(pods)
    return [q.pod.key.split("/")[1] for q in releaser.pass_once().release]


def test_a_hold_dropped_by_deleting_its_job_does_not_start_again_at_once_across_a_failover(
    harness: Harness,
) -> None:
    """The tenant of the strict queue deletes its job for one pass and submits it again: the
    hold was spent, and the queue cools down for `strictSeconds`, on the Lease too."""
    daemon = _strict_head_that_does_not_fit(harness)
    lease = Lease()
    leader = _leader(daemon, lease, T0)
    assert _released(leader) == []
    leader._wall = lambda: T0 + 5
    assert _released(leader, but="big0") == ["small0"]  # big0 gone: the hold is spent
    assert json.loads(lease.annotations[SPENT_ANNOTATION]) == {"big": T0 + 5}
    assert HOLDS_ANNOTATION not in lease.annotations
    _held(harness, "small1", "small", 50)
    _watched(daemon, "small/small1")
    # big0 is back and a new leader takes over: it holds nobody back until T0 + 65.
    assert _released(_leader(daemon, lease, T0 + 10)) == ["small1"]


def test_a_lease_from_before_the_cooldown_reads_as_no_queue_cooling_down() -> None:
    assert decode_spent(None, now=T0) == {}
    assert decode_spent('{"big": 99999999999}', now=T0) == {"big": T0}  # future: now


def _strict_head_that_does_not_fit(harness: Harness) -> ExtenderDaemon:
    """Queue `big` (strict 60 s) heads with a pod asking two GPUs of a cluster of two one-GPU
    nodes (no more than the cluster has, so it may hold: `release.plan` knows the cluster's total,
    not each node's); `small` has a pod that fits."""
    harness.put(make_node("n1", gpus=1))
    harness.put(make_node("n2", gpus=1))
    daemon = _daemon(harness)
    _queues(harness, {"name": "big", "strictSeconds": 60}, {"name": "small"})
    _held(harness, "big0", "big", 200)
    _held(harness, "small0", "small", 50)
    _watched(daemon, "big/big0", "small/small0")
    return daemon


def test_a_strict_hold_ends_on_time_across_a_failover(harness: Harness) -> None:
    daemon = _strict_head_that_does_not_fit(harness)
    lease = Lease()
    assert _released(_leader(daemon, lease, T0)) == []
    assert json.loads(lease.annotations[HOLDS_ANNOTATION]) == {"big": T0}
    # The leader dies; the next one, 50 s into the hold, still holds ...
    assert _released(_leader(daemon, lease, T0 + 50)) == []
    # ... and the hold ends 60 s after it started, not 60 s after the failover.
    assert _released(_leader(daemon, lease, T0 + 61)) == ["small0"]
    # The spent hold stays on record (a job of big still waits), so no later leader starts it again.
    assert json.loads(lease.annotations[HOLDS_ANNOTATION]) == {"big": T0}


def test_without_the_lease_a_new_leader_would_hold_again(harness: Harness) -> None:
    """The behaviour the hand-off replaces: a hold kept in memory starts again at a failover."""
    daemon = _strict_head_that_does_not_fit(harness)
    assert _released(_leader(daemon, None, T0)) == []
    assert _released(_leader(daemon, None, T0 + 61)) == []


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        (None, {}),
        ("", {}),
        ("not json", {}),
        ("[1, 2]", {}),
        ('{"a": "yesterday", "b": 5}', {"b": 5.0}),
        ('{"a": true}', {}),
        ('{"a": 1e999}', {}),
        ('{"a": 99999999999}', {"a": T0}),  # a start in the future is taken as now
    ],
)
def test_a_carried_hold_that_cannot_be_read_starts_again(
    text: str | None, holds: dict[str, float]
) -> None:
    assert decode(text, now=T0) == holds


def test_holds_round_trip_and_none_removes_the_annotation() -> None:
    assert encode({}) is None
    assert decode(encode({"b": T0 - 5.25, "a": T0}), now=T0) == {"a": T0, "b": T0 - 5.25}


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,  # RecursionError inside json.loads
        '{"a": ' + "1" * 5_000 + "}",  # past Python's int-digit limit
        '{"a": ' + "9" * 400 + "}",  # an int no float can hold: OverflowError
        '{"' + "q" * 70_000 + '": 1}',  # longer than any queue list could be
    ],
    ids=["deep", "huge-int", "overflow", "oversized"],
)
def test_a_hostile_carried_hold_is_dropped_not_raised(text: str) -> None:
    """Whoever may write the Lease (the scheduler's Role may) must not make every later
    leader's release pass raise: the value goes through the bounded decoder, and is dropped."""
    assert decode(text, now=T0) == {}


def test_a_release_pass_survives_a_deeply_nested_lease_annotation(harness: Harness) -> None:
    daemon = _strict_head_that_does_not_fit(harness)
    lease = Lease()
    lease.annotations[HOLDS_ANNOTATION] = "[" * 100_000 + "]" * 100_000
    assert _released(_leader(daemon, lease, T0)) == []  # held again, from now
    assert json.loads(lease.annotations[HOLDS_ANNOTATION]) == {"big": T0}


def test_a_strict_hold_tells_each_held_pod_once_whichever_job_of_the_queue_waits(
    harness: Harness,
) -> None:
    """The held pods' reason names the strict queue, not the job of it that was tried: when that
    job goes and another of the queue waits instead, nothing is told again (a reason naming the
    job made a hold send an Event per held pod and change of job)."""
    daemon = _strict_head_that_does_not_fit(harness)
    _held(harness, "big1", "big", 200)
    _watched(daemon, "big/big1")
    leader = _leader(daemon, None, T0)
    assert _released(leader) == []
    harness.store.remove("Pod", "big", "big0")
    wait_until(lambda: daemon.cache.pod(PodKey("big/big0")) is None)
    assert _released(leader) == []
    told = [
        e["message"]
        for e in harness.store.objects("Event")
        if e["reason"] == "VgpuQueued" and e["involvedObject"]["name"] == "small0"
    ]
    assert len(told) == 1 and told[0].startswith("held for strict queue big:")


def test_the_leader_holds_for_the_strict_queues_next_job_after_its_first_is_released(
    harness: Harness,
) -> None:
    """Two GPUs: big0 (one GPU) fits and is released, big1 (two GPUs) then does not; small0
    would fit on the GPU left, and is held for big (before, only the first job tried held)."""
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    _queues(harness, {"name": "big", "strictSeconds": 60}, {"name": "small"})
    _held(harness, "big0", "big", 100)
    _held(harness, "big1", "big", 200)
    _held(harness, "small0", "small", 50)
    _watched(daemon, "big/big0", "big/big1", "small/small0")
    lease = Lease()
    assert _released(_leader(daemon, lease, T0)) == ["big0"]
    assert json.loads(lease.annotations[HOLDS_ANNOTATION]) == {"big": T0}
