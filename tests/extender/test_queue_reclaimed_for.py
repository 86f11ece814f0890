"""What reclaim evicts for one job goes to that job: the passes after the eviction try it before
every other job, so a queue with a lower share does not take the GPU its victims gave back (seen
on a real cluster: a GPU emptied for a whole-GPU queue went to two pods of a third queue)."""

from __future__ import annotations

from tests.extender.builders import Wire, make_node
from tests.extender.conftest import Harness
from tests.extender.lease_stub import Lease
from tests.extender.test_queue_release import (
    _daemon,
    _held,
    _pass,
    _queues,
    _releaser,
    _running,
    _watched,
)
from tests.waiting import wait_until
from vgpu.core.ids import PodKey
from vgpu.daemons.extender.daemon import ExtenderDaemon
from vgpu.extender.queues.strict_holds import RECLAIMED_ANNOTATION


def test_the_gpu_reclaim_frees_goes_to_the_job_it_was_freed_for(harness: Harness) -> None:
    daemon = _two_gpus_and_a_lower_share_waiting(harness)
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 1
    wait_until(lambda: any(_gone(harness, daemon, n) for n in ("a1", "a2")))
    assert _pass(releaser) == ["want"]


def test_a_new_leader_gives_it_to_that_job_too(harness: Harness) -> None:
    """The job reclaim evicted for is carried on the leader Lease, as strict holds are."""
    daemon = _two_gpus_and_a_lower_share_waiting(harness)
    lease = Lease()
    first = _releaser(daemon, notes=lease)
    assert _pass(first) == []
    assert first.evicted_total == 1
    assert "b/want" in (lease.annotation(RECLAIMED_ANNOTATION) or "")
    wait_until(lambda: any(_gone(harness, daemon, n) for n in ("a1", "a2")))
    assert _pass(_releaser(daemon, notes=lease)) == ["want"]
    assert lease.annotation(RECLAIMED_ANNOTATION) is None  # released: nothing left to carry


def _two_gpus_and_a_lower_share_waiting(harness: Harness) -> ExtenderDaemon:
    """Two nodes of one GPU, each held by a pod of queue a; b (reclaiming) waits with a pod
    asking a whole GPU, and aa, holding as little as b, with two half-GPU pods (a tie between
    shares goes by name: aa before b)."""
    for node in ("n1", "n2"):
        harness.put(make_node(node, gpus=1))
    daemon = _daemon(harness)
    wire = Wire(daemon.port)
    _queues(
        harness,
        {"name": "a"},
        {"name": "b", "weight": 3, "reclaim": True},
        {"name": "aa"},
        minRuntimeSeconds=0,
    )
    _running(harness, daemon, wire, "a1", "a", 100)
    _running(harness, daemon, wire, "a2", "a", 100, "2031-01-01T00:00:00Z", on="n2")
    _held(harness, "want", "b", 100)
    for i in range(2):
        _held(harness, f"small{i}", "aa", 50)
    _watched(daemon, "b/want", "aa/small0", "aa/small1")
    return daemon


def _gone(harness: Harness, daemon: ExtenderDaemon, name: str) -> bool:
    """The pod is deleted and the cache holds nothing for it any more."""
    deleted = harness.store.get("Pod", "default", name) is None
    return deleted and daemon.cache.holding(PodKey(f"default/{name}")) is None
