"""`ReleaseSync`: after a deletion, List until the kubelet drops the pod, then republish once."""

from __future__ import annotations

from vgpu.core.ids import PodKey
from vgpu.daemons.node_release import ReleaseSync

A, B = PodKey("ns/a"), PodKey("ns/b")


def test_republishes_once_the_kubelet_no_longer_reports_the_pod() -> None:
    now = [0.0]
    sync = ReleaseSync(lambda: now[0], delay_s=1.0, patience_s=30.0)
    sent: list[float] = []
    assert sync.at is None
    sync.deleted(A)
    assert sync.at == 1.0
    now[0] = 1.0
    sync.step(lambda: {A}, lambda: sent.append(now[0]))  # still active at the kubelet
    assert sent == [] and sync.at == 2.0
    now[0] = 2.0
    sync.step(lambda: set(), lambda: sent.append(now[0]))  # dropped: that List freed it
    assert sent == [2.0] and sync.at is None


def test_each_freed_pod_is_checkpointed_and_a_stuck_one_is_given_up() -> None:
    now = [0.0]
    sync = ReleaseSync(lambda: now[0], delay_s=1.0, patience_s=5.0)
    sent: list[float] = []
    sync.deleted(A)
    sync.deleted(B)
    now[0] = 1.0
    sync.step(lambda: {B}, lambda: sent.append(now[0]))
    assert sent == [1.0] and sync.at == 2.0  # A freed; B still waited for
    now[0] = 2.0
    sync.step(lambda: None, lambda: sent.append(now[0]))  # a failed List changes nothing
    assert sent == [1.0] and sync.at == 3.0
    now[0] = 6.0
    sync.step(lambda: {B}, lambda: sent.append(now[0]))  # past patience: given up, sent anyway
    assert sent == [1.0, 6.0] and sync.at is None
