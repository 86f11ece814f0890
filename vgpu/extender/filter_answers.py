"""The filter's answer set that keeps its last reply, patched when the next request repeats it.

kube-scheduler's filter requests repeat: with every node feasible it sends the same node names
pod after pod. `FilterAnswers` remembers the reply it built for those names (and the feed position
it was built at), so the next request only looks at the nodes changed since, usually the one the
last pod went to: comparing the names with the last request's is one C-level pass, the rest is
in proportion to what changed. A node that fits again falls back to a full (still C-level)
split, because its place in the passing list must be found.

Replies are handed out as copies: they are encoded after the cache lock is released, while
another request may already be patching the answer set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from vgpu.extender.answers import FeedView, NodeAnswers

T = TypeVar("T")


class FilterAnswers(NodeAnswers[T]):
    """Filter outcomes per node, plus the last (passed, failing) reply."""

    __slots__ = ("_names", "_passed", "_rest", "generation")

    def __init__(self, feed: FeedView, ok: T) -> None:
        super().__init__(feed, ok)
        self.generation = 0
        """The policy generation its placements were made with (see `forget`)."""
        self._names: list[str] | None = None
        self._passed: list[str] = []
        self._rest: list[str] = []

    def forget(self, names: Iterable[str]) -> None:
        """Drop these nodes' outcomes (and the kept reply): on nodes with pending containers the
        outcome is a placement, which a re-learned policy may make differently; elsewhere it
        is the policy-free fit check, still valid."""
        self.drop(names)
        self._names = None

    def split(self, names: list[str], evaluate: Callable[[str], T]) -> tuple[list[str], list[str]]:
        """(names whose outcome is `ok`, in request order; the other names, in no order)."""
        changed, was_good = self.sync()
        repeated = changed is not None and _same(self._names, names)
        if repeated and self._patch(changed or set(), was_good, evaluate):
            return list(self._passed), list(self._rest)
        passed, rest = self.passing(names, evaluate)
        # A copy: a caller reusing its list for another request must not match this one.
        self._names, self._passed, self._rest = list(names), passed, rest
        return list(passed), list(rest)

    def _patch(self, changed: set[str], was_good: set[str], evaluate: Callable[[str], T]) -> bool:
        """Re-evaluate the changed nodes and move them between the kept lists. A changed node
        the request does not name is evaluated too (it is rare); one that fits again, named or
        not, sends the caller to a full split."""
        for name in changed:
            now, before = self.store(name, evaluate(name)), name in was_good
            if now and not before:
                return False  # fits again: its place in the passing list must be found
            if before and not now:
                try:
                    self._passed.remove(name)
                except ValueError:
                    continue  # not named by the request
                self._rest.append(name)
        return True


def _same(last: list[str] | None, names: list[str]) -> bool:
    return last is not None and (last is names or last == names)
