"""The node agent's pod feed: what it remembers of pods it warned about is bounded."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

from tests.pods import Obj, container, pod_obj
from vgpu.adapters.kube.errors import KubeError
from vgpu.adapters.kube.reflector import SYNCED, WatchEvent
from vgpu.agent import pods as pod_feed
from vgpu.agent.config import AgentConfig
from vgpu.agent.kubelet_stale import KubeletStale
from vgpu.agent.pods import PodFeed
from vgpu.node.containers import ContainerDirectory
from vgpu.node.devices import ResourceNames
from vgpu.node.handoff.admissions import Handoff


def _feed(events: list[str]) -> PodFeed:
    handoff = Handoff("n", b"k", clock=lambda: 0.0, grace_s=5.0)
    stale = KubeletStale(
        lambda: None,  # type: ignore[arg-type,return-value]
        lambda: None,
        ResourceNames(),
        256,
        clock=lambda: 0.0,
    )
    flags = threading.Event(), threading.Event(), threading.Event()
    views = (handoff, ContainerDirectory(), stale)
    return PodFeed(
        AgentConfig("n", b"k"), None, ResourceNames(), views, flags, lambda *a: events.append(a[2])
    )


def _unassigned(n: int) -> Obj:
    """A vGPU pod bound to the node by its own spec.nodeName: no assignment."""
    return pod_obj(
        f"x{n}", [container("main", cores=30)], uid=f"u{n}", node="n", phase="Pending", kind=False
    )


def test_an_unassigned_pod_is_warned_about_once_and_forgotten_when_deleted() -> None:
    """Found by a tenant-side review: the UIDs of unassigned pods warned about were never
    forgotten, so creating and deleting such pods grew the agent without bound."""
    events: list[str] = []
    feed = _feed(events)
    for n in range(500):
        feed.on_event("ADDED", _unassigned(n))
        feed.on_event("MODIFIED", _unassigned(n))  # warned once
        feed.on_event("DELETED", _unassigned(n))
    assert events == ["VgpuUnassigned"] * 500
    assert not feed._warned


def test_what_the_feed_remembers_of_warned_pods_is_bounded() -> None:
    events: list[str] = []
    feed = _feed(events)
    for n in range(pod_feed.WARNED_KEPT + 10):  # deletions missed while the watch was down
        feed.on_event("ADDED", _unassigned(n))
    assert len(feed._warned) <= pod_feed.WARNED_KEPT


class _BrokenOnce:
    """A KubeApi whose first pod watch lists `first`, then fails the way `reflect` lets a
    non-transient error through (a 403 after an RBAC change, say); the second lists `second`
    and ends the feed. A fresh reflector knows nothing of the first one's pods."""

    def __init__(self, feed_stop: threading.Event, first: list[Obj], second: list[Obj]) -> None:
        self.stop, self.lists = feed_stop, [first, second]

    def watch_pods(self, **_: object) -> Iterator[WatchEvent]:
        listing = self.lists.pop(0)
        for pod in listing:
            yield WatchEvent("ADDED", pod)
        yield WatchEvent(SYNCED, {"metadata": {"resourceVersion": "1"}})
        if self.lists:
            raise KubeError("watch pods: 403 Forbidden")
        self.stop.set()


def test_pods_deleted_while_the_watch_was_broken_are_forgotten_at_its_next_listing() -> None:
    """Found by a node-side review: after a non-transient watch error the feed started a fresh
    reflector, whose listing emits no DELETED for pods gone meanwhile, so they stayed in the
    hand-off records for good (pending containers that leave later Allocates ambiguous)."""
    feed = _feed([])
    feed.config = replace(feed.config, retry_s=0.01, max_retry_s=0.01)
    kept, gone = _unassigned(1), _unassigned(2)
    feed._kube = _BrokenOnce(feed._stop, [kept, gone], [kept])  # type: ignore[assignment]
    feed.watch()
    assert feed.handoff.pods() == ["default/x1"]
