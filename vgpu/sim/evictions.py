"""Reclaim's what-if in a replay: does the waiting pod fit with these victims gone?

`reclaim.victims` asks about a list of victims that grows one at a time (youngest first, until the
pod fits), then about that list less one victim at a time (sparing those it does not need). Asked
afresh each time, with a fork that evicts every victim and is reverted, a reclaim that needs k
victims costs k^2 evictions; on the full trace cluster, where a pod asking a whole GPU may need
many small victims to empty one, that was most of a replay's time.

`Evictions` keeps one nested fork per evicted victim, open between questions: a question whose
list starts with the victims already gone evicts only the rest; one that drops some reverts back
to where the lists part. The state asked about is the same as evicting the whole list on a fresh
fork; `close` (or leaving the `with` block) reverts every fork, so the cluster is as it was.

It also remembers each answer: when the pod fit on none of the nodes the first victims left, with
those evicted, only the nodes the further victims leave can change that, so only they are asked
about (`Scheduler.select` on them). The answer is the one `select` on every victim's node gives,
as long as an evaluation depends only on the node's state (what the scheduler's memo assumes).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

from vgpu.core.ids import NodeName, PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import PodRequest
from vgpu.core.scheduler import Scheduler


class Evictions:
    """A what-if of evicting a list of pods, kept open and moved to each list asked about."""

    def __init__(self, ledger: Ledger, scheduler: Scheduler) -> None:
        self.ledger = ledger
        self.scheduler = scheduler
        self._gone: list[PodKey] = []
        self._nodes: list[NodeName | None] = []
        """The node each evicted victim left (None: it held nothing)."""
        self._answers: list[bool | None] = []
        """Whether the pod fit with the first i+1 victims gone (None: not asked)."""
        self._pod: PodRequest | None = None

    def fits(self, pod: PodRequest, gone: Sequence[PodKey]) -> bool:
        """Whether `pod` fits, with every pod in `gone` evicted, on a node one of them left (it
        fit nowhere before, so only those can have room)."""
        if pod is not self._pod:
            self._pod, self._answers = pod, [None] * len(self._answers)
        same = 0
        for had, wanted in zip(self._gone, gone, strict=False):
            if had != wanted:
                break
            same += 1
        self._back_to(same)
        # Fit on none of the first `same` victims' nodes (none at all: no node): ask the rest.
        since = same if same == 0 or self._answers[same - 1] is False else 0
        state = self.ledger.state
        for key in gone[same:]:
            state.fork()
            released = self.ledger.release(key)
            self._gone.append(key)
            self._nodes.append(None if released is None else released.node)
            self._answers.append(None)
        if since == len(self._gone):
            since = 0  # nothing new evicted: ask about every node again
        nodes = sorted({n for n in self._nodes[since:] if n is not None})
        fits = self.scheduler.select(pod, nodes) is not None
        if self._answers:
            self._answers[-1] = fits
        return fits

    def _back_to(self, count: int) -> None:
        """Revert the evictions past the first `count`."""
        while len(self._gone) > count:
            self.ledger.state.revert()
            self._gone.pop()
            self._nodes.pop()
            self._answers.pop()

    def close(self) -> None:
        """Revert every eviction: the cluster is as before the first question."""
        self._back_to(0)

    def __enter__(self) -> Evictions:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
