"""Reclaim's what-if in a replay: does the waiting pod fit with these victims gone?

`reclaim.victims` asks about a list of victims that grows one at a time (youngest first, until the
pod fits), then about that list less one victim at a time (sparing those it does not need). Asked
afresh each time, with a fork that evicts every victim and is reverted, a reclaim that needs k
victims costs k^2 evictions; on the full trace cluster, where a pod asking a whole GPU may need
many small victims to empty one, that was most of a replay's time.

`Evictions` keeps one nested fork per evicted victim, open between questions: a question whose
list starts with the victims already gone evicts only the rest; one that drops some reverts back
to where the lists part. The state asked about is the same as evicting the whole list on a fresh
fork, so the answer is the same (the same `Scheduler.select` on the same nodes); `close` (or
leaving the `with` block) reverts every fork, so the cluster is as it was.
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

    def fits(self, pod: PodRequest, gone: Sequence[PodKey]) -> bool:
        """Whether `pod` fits, with every pod in `gone` evicted, on a node one of them left (it
        fit nowhere before, so only those can have room)."""
        same = 0
        for had, wanted in zip(self._gone, gone, strict=False):
            if had != wanted:
                break
            same += 1
        self._back_to(same)
        state = self.ledger.state
        for key in gone[same:]:
            state.fork()
            released = self.ledger.release(key)
            self._gone.append(key)
            self._nodes.append(None if released is None else released.node)
        nodes = sorted({n for n in self._nodes if n is not None})
        return self.scheduler.select(pod, nodes) is not None

    def _back_to(self, count: int) -> None:
        """Revert the evictions past the first `count`."""
        while len(self._gone) > count:
            self.ledger.state.revert()
            self._gone.pop()
            self._nodes.pop()

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
