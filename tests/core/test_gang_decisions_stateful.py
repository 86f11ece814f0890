"""A gang is decided whole, once, over any run of arrivals, passes, gate removals cut
short by a change of leader, annotations into gangs and deletions.

The machine plays the leader's side of `vgpu.core.queues.jobs`: each pass groups the pods with
the record (`group`), decides every gang offered (as if it fitted), keeps the record
(`record_after`), and removes the gates of some finishing members only (a leader that stops
halfway). A tenant adds pods to any gang at any time, held, under a new name or one reused.
Whatever happens, the released members of a gang are members of its one decision, and a gang
is never decided while any of its members is released.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from vgpu.core.queues.jobs import QueuedPod, group, record_after

CAP = (10_000, 10_000)
GANGS = ("ns/g0", "ns/g1")


class GangLeader(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pods: dict[str, QueuedPod] = {}
        self.record: dict[str, frozenset[str]] = {}
        self.decided: dict[str, frozenset[str]] = {}
        """Each gang's last decision, as the test saw it made."""
        self.made = 0

    @rule(gang=st.sampled_from(GANGS), size=st.integers(1, 3))
    def add_member(self, gang: str, size: int) -> None:
        """A held pod naming `gang` (its first members set the size; later ones may lie)."""
        self.made += 1
        key = f"ns/p{self.made}"
        self.pods[key] = QueuedPod(
            key, "a", "ns", (10, 0), gated=True, gang=gang, gang_size=size, uid=f"u{self.made}"
        )

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        if self.pods:
            del self.pods[data.draw(st.sampled_from(sorted(self.pods)))]

    @rule(data=st.data())
    def leader_pass(self, data: st.DataObject) -> None:
        """Decide what is offered; remove the gates of a part of what finishes (a cut short)."""
        out = group(self.pods.values(), CAP, self.record)
        released = [j.key for j in out.jobs if j.key.startswith("gang:")]
        for job in released:
            gang = job.removeprefix("gang:")
            members = [self.pods[k] for k in self.pods if self.pods[k].gang == gang]
            assert all(p.gated for p in members), "decided with a member released"
            self.decided[gang] = frozenset(self.pods[k].ident for k in out.members[job])
        self.record = record_after(self.pods.values(), self.record, released, out.members)
        finishing = [k for k in out.finishing] + [k for j in released for k in out.members[j]]
        for key in (
            data.draw(st.lists(st.sampled_from(finishing), unique=True)) if finishing else []
        ):
            self.pods[key] = replace(self.pods[key], gated=False)

    @rule()
    def failover(self) -> None:
        """A new leader reads the record from the Lease: the same record (nothing else kept)."""
        self.record = dict(self.record)

    @invariant()
    def released_members_are_those_decided(self) -> None:
        for pod in self.pods.values():
            if not pod.gated and pod.gang is not None:
                assert pod.ident in self.decided.get(pod.gang, frozenset()), pod


TestGangLeader = GangLeader.TestCase
TestGangLeader.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
