"""`ReleaseSync`: after a deletion, List until the kubelet drops the pod, then republish once;
`KubeletStale`: what the checkpoint still holds for pods gone, read when something changed."""

from __future__ import annotations

from vgpu.api.resources import DEFAULT_NAMES
from vgpu.core.ids import PodKey
from vgpu.daemons.node_release import KubeletStale, ReleaseSync
from vgpu.node.checkpoint import CheckpointEntry

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


def test_kubelet_stale_reads_when_pods_or_the_file_change_and_frees_while_any_remain() -> None:
    file: list[CheckpointEntry] = [CheckpointEntry("u1", DEFAULT_NAMES.cores, ("GPU-a::c0",))]
    reads: list[int] = []
    frees: list[int] = []
    signature = [1]

    def read() -> tuple[tuple[CheckpointEntry, ...], str | None]:
        reads.append(1)
        return tuple(file), None

    stale = KubeletStale(read, lambda: signature[0], DEFAULT_NAMES, 256)
    stale.pod(["u1"], True)
    assert not stale.step(lambda: frees.append(1)) and reads == []  # not synced: cannot judge
    stale.synced()
    assert stale.dirty and not stale.step(lambda: frees.append(1))  # u1 is live: nothing stale
    assert reads == [1] and not stale.dirty
    assert not stale.step(lambda: frees.append(1)) and reads == [1]  # nothing changed: no read
    stale.pod(["u1"], False)  # deleted
    assert stale.dirty and stale.step(lambda: frees.append(1))
    assert stale.published() == {"GPU-a": (1, 0)} and frees == [1]
    assert not stale.step(lambda: frees.append(1)) and frees == [1, 1]  # freed again meanwhile
    file.clear()
    signature[0] = 2  # the kubelet checkpointed the release
    assert stale.step(lambda: frees.append(1)) and stale.published() == {}
    assert frees == [1, 1] and len(reads) == 4
