"""`KubeletStale`: what the checkpoint still holds for pods gone, read when something changed and
freed while it holds any; when the checkpoint cannot be read, the List-only fallback: after a
deletion, List until the kubelet drops the pod, then send the device lists once more."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.agent.kubelet_stale import KubeletStale, StaleStep
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.core.ids import PodKey
from vgpu.node.checkpoint import CheckpointEntry, CheckpointRead

A, B = PodKey("ns/a"), PodKey("ns/b")


class Kubelet:
    """What a step calls: the checkpoint (None: cannot be read), `List`, the device lists."""

    def __init__(self, entries: list[CheckpointEntry] | None) -> None:
        self.entries = entries
        self.signature = 1
        self.reads = 0
        self.reported: set[PodKey] | None = set()
        self.lists: list[float] = []
        self.sent: list[float] = []
        self.now = 0.0

    def read(self) -> CheckpointRead:
        self.reads += 1
        if self.entries is None:
            return CheckpointRead(None, "unknown format")
        return CheckpointRead(tuple(self.entries))

    def tracker(self, patience_s: float = 30.0) -> KubeletStale:
        return KubeletStale(
            self.read,
            lambda: self.signature,
            DEFAULT_NAMES,
            256,
            clock=lambda: self.now,
            patience_s=patience_s,
        )

    def step(self, stale: KubeletStale) -> StaleStep:
        def listed() -> set[PodKey] | None:
            self.lists.append(self.now)
            return None if self.reported is None else set(self.reported)

        return stale.step(listed, lambda: self.sent.append(self.now))


def _gone(stale: KubeletStale, pod: PodKey, uid: str = "") -> None:
    stale.pod(pod, [uid or pod], False, True)


def test_fallback_resends_once_the_kubelet_no_longer_reports_the_pod() -> None:
    kubelet = Kubelet(None)
    stale = kubelet.tracker()
    stale.synced()
    kubelet.step(stale)
    assert stale.readable is False and stale.problem == "unknown format"
    assert kubelet.lists == [] and kubelet.sent == []  # nothing deleted: nothing to follow
    _gone(stale, A)
    assert stale.dirty and stale.following == (A,)
    kubelet.reported = {A}  # still active at the kubelet (its grace period)
    assert kubelet.step(stale) == StaleStep() and kubelet.sent == []
    kubelet.now, kubelet.reported = 1.0, set()  # dropped: that List freed it
    assert kubelet.step(stale) == StaleStep(freed=(A,))
    assert kubelet.sent == [1.0] and not stale.following
    kubelet.now = 2.0
    kubelet.step(stale)
    assert kubelet.lists == [0.0, 1.0] and kubelet.sent == [1.0]  # then it stops asking
    assert stale.published() == {}


def test_fallback_checkpoints_each_freed_pod_and_gives_a_stuck_one_up() -> None:
    kubelet = Kubelet(None)
    stale = kubelet.tracker(patience_s=5.0)
    stale.synced()
    _gone(stale, A)
    _gone(stale, B)
    kubelet.now, kubelet.reported = 1.0, {B}
    assert kubelet.step(stale).freed == (A,) and kubelet.sent == [1.0]  # B still waited for
    kubelet.now, kubelet.reported = 2.0, None
    assert kubelet.step(stale) == StaleStep() and kubelet.sent == [1.0]  # a failed List
    kubelet.now, kubelet.reported = 6.0, {B}
    assert kubelet.step(stale) == StaleStep(given_up=(B,))  # past patience: sent anyway
    assert kubelet.sent == [1.0, 6.0] and stale.following == ()


def test_a_pod_without_granted_devices_is_not_followed() -> None:
    kubelet = Kubelet(None)
    stale = kubelet.tracker()
    stale.synced()
    stale.pod(A, ["a"], False, False)
    kubelet.step(stale)
    assert stale.following == () and kubelet.lists == []


def test_a_readable_checkpoint_replaces_the_fallback() -> None:
    """Followed pods are dropped once the checkpoint can be read: it shows what is held."""
    kubelet = Kubelet(None)
    stale = kubelet.tracker()
    stale.synced()
    _gone(stale, A, "u1")
    kubelet.reported = {A}
    kubelet.step(stale)
    assert stale.following == (A,) and kubelet.sent == []
    kubelet.entries, kubelet.signature = [], 2  # the kubelet wrote a checkpoint we can read
    assert kubelet.step(stale) == StaleStep()
    assert stale.readable and not stale.following and kubelet.lists == [0.0]
    assert kubelet.sent == []


def test_checkpoint_read_when_pods_or_the_file_change_and_freed_while_any_remain() -> None:
    kubelet = Kubelet([CheckpointEntry("u1", DEFAULT_NAMES.cores, ("GPU-a::c0",))])
    stale = kubelet.tracker()
    stale.pod(A, ["u1"], True, False)
    assert kubelet.step(stale) == StaleStep() and kubelet.reads == 0  # not synced: cannot judge
    stale.synced()
    assert stale.dirty and not kubelet.step(stale).changed  # u1 is live: nothing stale
    assert kubelet.reads == 1 and not stale.dirty
    assert not kubelet.step(stale).changed and kubelet.reads == 1  # nothing changed: no read
    _gone(stale, A, "u1")
    assert stale.dirty and kubelet.step(stale).changed
    assert stale.published() == {"GPU-a": (1, 0)} and len(kubelet.sent) == len(kubelet.lists) == 1
    assert stale.following == ()  # the checkpoint is the measure, not the List
    assert not kubelet.step(stale).changed and len(kubelet.sent) == 2  # freed again meanwhile
    kubelet.entries, kubelet.signature = [], 2  # the kubelet checkpointed the freeing
    assert kubelet.step(stale).changed and stale.published() == {}
    assert len(kubelet.sent) == 2 and kubelet.reads == 4


@given(
    st.lists(
        st.tuples(
            st.sampled_from([A, B]),
            st.booleans(),
            st.sampled_from(["reported", "dropped", "failed"]),
            st.integers(0, 3).map(float),  # whole seconds: patience ends exactly at some steps
        ),
        max_size=30,
    )
)
def test_fallback_resends_exactly_when_a_followed_pod_is_dropped(
    script: list[tuple[PodKey, bool, str, float]],
) -> None:
    """Any order of deletions, List answers (a pod still reported or not, failed) and waits:
    the lists are resent exactly at the steps that drop a followed pod, each pod followed is
    dropped at the first step that finds it unreported or past patience, and no later."""
    kubelet = Kubelet(None)
    stale = kubelet.tracker(patience_s=5.0)
    stale.synced()
    deadline: dict[PodKey, float] = {}
    for pod, delete, answer, wait in script:
        if delete:
            _gone(stale, pod)
            deadline.setdefault(pod, kubelet.now + 5.0)
        kubelet.reported = {"reported": {pod}, "dropped": set(), "failed": None}[answer]
        kubelet.now += wait
        sent = len(kubelet.sent)
        step = kubelet.step(stale)
        listing = kubelet.reported
        expected = {
            p
            for p, until in deadline.items()
            if (listing is not None and p not in listing) or until <= kubelet.now
        }
        assert set(step.freed) | set(step.given_up) == expected, (step, deadline)
        assert len(kubelet.sent) == sent + bool(expected)
        for p in expected:
            del deadline[p]
        assert set(stale.following) == set(deadline)
