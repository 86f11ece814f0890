"""A request only names its pod; the pod is the watch's view of it (a body could describe
anything).

A pod the watch does not show yet (kube-scheduler's informer can be ahead of the extender's
watch) is waited for, a bounded time, woken by the watch's event; then the verb fails with an
error naming the pod, which kube-scheduler retries after its backoff. The body is never parsed,
nothing is held, no API call is made for it, and no waiter blocks the serving loop or more than
`watch_waiters` verb threads. Over real HTTP against the fake API server, and on a bare cache."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until
from vgpu.core.ids import PodKey
from vgpu.core.model import Phase
from vgpu.daemons.extender.daemon import ExtenderDaemon
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.offloop import LeaveLoop, on_loop
from vgpu.extender.watchwait import NotWatched, WatchWait

Obj = dict[str, Any]


def _late_watch(daemon: ExtenderDaemon, name: str, delay: float) -> None:
    """The daemon's watch shows pod `name` `delay` seconds late (its other events on time)."""
    apply = daemon.cache.apply_pod

    def late(kind: str, obj: Obj) -> None:
        if obj.get("metadata", {}).get("name") == name:
            threading.Timer(delay, apply, (kind, obj)).start()
        else:
            apply(kind, obj)

    daemon.cache.apply_pod = late  # type: ignore[method-assign]


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    out = call()
    return out, time.monotonic() - start


def _metric(daemon: ExtenderDaemon) -> float:
    value = daemon.metrics.registry.get_sample_value("vgpu_extender_unwatched_filters_total")
    return 0.0 if value is None else value


def test_a_filter_ahead_of_the_watch_waits_for_it_and_holds_its_pick(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = harness.start(watch_wait=3.0)
    wire = harness.wire(daemon)
    _late_watch(daemon, "p", 0.4)
    harness.put(make_pod("p", cores=10))
    out, took = _timed(lambda: wire.filter(harness.pod("p"), ["n1"]))
    assert out["Error"] == "" and out["NodeNames"] == ["n1"]
    assert 0.3 < took < 2.0, took  # waited for the watch's event, not for the whole wait
    held = daemon.cache.holding(PodKey("default/p"))
    assert held is not None and held.phase is Phase.ASSUMED  # a watched pod's pick
    assert _metric(daemon) == 0


def test_a_filter_for_a_pod_the_watch_never_shows_is_an_error_naming_it(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = harness.start(watch_wait=0.5)
    wire = harness.wire(daemon)
    ghost = make_pod("ghost", cores=100)
    ghost["metadata"]["uid"] = "uid-ghost"
    harness.server.clear_requests()
    out, took = _timed(lambda: wire.filter(ghost, ["n1"]))
    assert "default/ghost" in out["Error"] and "uid-ghost" in out["Error"]
    assert "retries" in out["Error"]  # says what happens next
    assert 0.4 < took < 2.0, took
    assert daemon.cache.ledger.holdings() == []
    assert _metric(daemon) == 1
    timed = daemon.metrics.registry.get_sample_value(
        "vgpu_extender_request_seconds_count", {"verb": "filter"}
    )
    assert timed == 1  # it left the loop for a worker: one request, timed once
    asked = [r.path for r in harness.server.requests if "ghost" in r.path]
    assert asked == [], "nothing is asked of the API server about a named pod"


def test_a_request_never_stands_for_the_pod_the_watch_shows_under_another_uid(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=10))
    daemon = harness.start(watch_wait=0.2)
    wire = harness.wire(daemon)
    wait_until(lambda: daemon.cache.pod(PodKey("default/p")) is not None)
    other = harness.pod("p")
    other["metadata"]["uid"] = "a-recreated-pod"
    other["spec"]["containers"][0]["resources"]["limits"]["vgpu.io/cores"] = "100"
    assert "a-recreated-pod" in wire.filter(other, ["n1"])["Error"]
    assert wire.prioritize(other, ["n1"]) == {"n1": 0}
    assert daemon.cache.ledger.holdings() == []


def test_a_waiting_filter_blocks_neither_the_loop_nor_other_filters(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("real", cores=10))
    daemon = harness.start(watch_wait=3.0)
    wait_until(lambda: daemon.cache.pod(PodKey("default/real")) is not None)
    ghost = make_pod("ghost", cores=10)
    ghost["metadata"]["uid"] = "uid-ghost"
    waiting = threading.Thread(target=harness.wire(daemon).filter, args=(ghost, ["n1"]))
    waiting.start()
    time.sleep(0.2)  # the ghost's filter is waiting on a worker
    out, took = _timed(lambda: harness.wire(daemon).filter(harness.pod("real"), ["n1"]))
    assert out["NodeNames"] == ["n1"] and took < 0.5, took
    assert harness.wire(daemon).raw("GET", "/healthz")[0] == 200
    waiting.join()


def test_a_poisoned_watched_pod_fails_at_once_with_the_watch_s_reason(
    harness: Harness,
) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start(watch_wait=3.0)
    harness.put(make_pod("bad", cores=10, cpu="1e10000000"))
    wait_until(lambda: PodKey("default/bad") in daemon.cache.invalid)
    out, took = _timed(lambda: harness.wire(daemon).filter(harness.pod("bad"), ["n1"]))
    assert "requests.cpu" in out["Error"] and took < 1.0, (out, took)


# -- the wait itself, on a bare cache ------------------------------------------------------------
def _cache() -> ClusterCache:
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    cache.apply_node("ADDED", make_node("n1", gpus=1))
    return cache


def _pod(name: str) -> Obj:
    pod = make_pod(name, cores=10)
    pod["metadata"]["uid"] = f"uid-{name}"
    return pod


def test_the_wait_is_woken_by_the_watch_s_event_not_by_its_timeout() -> None:
    cache = _cache()
    wait = WatchWait(cache, timeout=10.0, waiters=1)
    threading.Timer(0.2, cache.apply_pod, ("ADDED", _pod("p"))).start()
    spec, took = _timed(lambda: wait.find(PodKey("default/p"), "uid-p"))
    assert spec.request.uid == "uid-p"
    assert took < 1.0, took


def test_a_waiter_over_the_cap_is_answered_at_once() -> None:
    cache = _cache()
    wait = WatchWait(cache, timeout=1.5, waiters=1)
    missed: list[str] = []

    def miss(key: str, uid: str) -> None:
        try:
            wait.find(PodKey(key), uid)
        except NotWatched as err:
            missed.append(str(err))

    first = threading.Thread(target=miss, args=("default/a", "uid-a"))
    first.start()
    time.sleep(0.2)  # the one slot is taken
    _, took = _timed(lambda: miss("default/b", "uid-b"))
    assert took < 0.2 and "too many" in missed[0] and "default/b" in missed[0], (took, missed)
    first.join()
    with pytest.raises(NotWatched, match="within"):  # the slot is free again: it waits
        wait.find(PodKey("default/b"), "uid-b")


def test_on_the_serving_loop_a_verb_that_would_wait_leaves_it() -> None:
    cache = _cache()
    wait = WatchWait(cache, timeout=10.0, waiters=4)
    with on_loop(), pytest.raises(LeaveLoop):
        wait.find(PodKey("default/p"), "uid-p")
    cache.apply_pod("ADDED", _pod("p"))
    with on_loop():  # a pod the watch shows is answered on the loop
        assert wait.find(PodKey("default/p"), "uid-p").request.uid == "uid-p"


def test_a_request_without_a_uid_names_no_pod() -> None:
    cache = _cache()
    cache.apply_pod("ADDED", _pod("p"))
    with pytest.raises(NotWatched, match="no UID"):
        WatchWait(cache, timeout=10.0).find(PodKey("default/p"), "")
