"""The node agent's pod feed: what it remembers of pods it warned about is bounded."""

from __future__ import annotations

import threading

from tests.pods import Obj, container, pod_obj
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
