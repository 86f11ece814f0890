"""Answers per node for one question, kept current from the cluster's change feed.

(Not to be confused with the cache's read-only *views* of its state, `vgpu.extender.ledger_view`.)

A question is "how does a pod of this shape fare on each node" (the filter's `FilterAnswers`, in
`filter_answers.py`; prioritize's `ScoreAnswers`, in `scores.py`, reads the same feed but keeps its
scores grouped). kube-scheduler asks it with up to every node's name, for pod after pod, while
each bind changes one node. A `NodeAnswers` keeps the answer
for every node it has been asked about and, before each use, forgets only the nodes the feed
names since it last looked (`vgpu.core.changes`), so a request costs a few passes of C-level
set and dict operations over the names, plus real work only for nodes that changed.

`AnswerBook` keeps the answer sets of the questions asked recently (least recently used go
first) and drops them all when the cache is rebuilt around a new state.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from itertools import filterfalse
from typing import Generic, Protocol, TypeVar, cast

T = TypeVar("T")

MAX_ANSWER_SETS = 128
"""Answer sets kept at once (pod shapes being scheduled, times two verbs). One holds about one
set entry per node, under 1 MiB at 5,000 nodes; a shape whose answers were dropped pays a cold build
(every node evaluated, tens of milliseconds at 5,000 nodes) on its next request."""


class FeedView(Protocol):
    """What an answer set reads of the cluster's change feed (`vgpu.core.changes.ChangeFeed`)."""

    @property
    def seq(self) -> int: ...

    def since(self, seq: int) -> set[str] | None: ...


class NodeAnswers(Generic[T]):
    """Answers per node name: `good` holds the names whose answer is `ok`, `answers` the other
    answers only. Most nodes usually fit, so an answer set costs about one set entry per node."""

    __slots__ = ("answers", "feed", "good", "ok", "seq")

    def __init__(self, feed: FeedView, ok: object = None) -> None:
        self.feed = feed
        self.seq = feed.seq
        self.ok = ok
        self.answers: dict[str, T] = {}
        self.good: set[str] = set()

    def sync(self) -> tuple[set[str] | None, set[str]]:
        """Forget the answers of nodes changed since the last sync. Returns the changed names
        (None: every node, the feed no longer reaches back) and those of them that were good."""
        changed = self.feed.since(self.seq)
        self.seq = self.feed.seq
        if changed is None:
            self.answers.clear()
            self.good.clear()
            return None, set()
        was_good = changed & self.good
        self.drop(changed)
        return changed, was_good

    def drop(self, names: Iterable[str]) -> None:
        """Forget these nodes' answers (they are evaluated again when next asked)."""
        answers, good = self.answers, self.good
        for name in names:
            answers.pop(name, None)
            good.discard(name)

    def store(self, name: str, answer: T) -> bool:
        """Keep a node's answer; True if it is `ok`."""
        if answer is self.ok:
            self.good.add(name)
            self.answers.pop(name, None)
            return True
        self.answers[name] = answer
        self.good.discard(name)
        return False

    def fill(self, names: Iterable[str], evaluate: Callable[[str], T]) -> bool:
        """Answer every name not answered yet (call `sync` first); True if any got `ok`.
        (Should `evaluate` change a node, the feed names it and the next sync forgets it.)"""
        good, answers = self.good, self.answers
        found = False
        for name in list(filterfalse(good.__contains__, filterfalse(answers.__contains__, names))):
            found |= self.store(name, evaluate(name))
        return found

    def passing(
        self, names: list[str], evaluate: Callable[[str], T]
    ) -> tuple[list[str], list[str]]:
        """The names whose answer is `ok` (in request order) and the others (call `sync`
        first). In the steady state every name passes: one C-level pass over the names."""
        good = self.good
        passed = list(filter(good.__contains__, names))
        if len(passed) == len(names):
            return passed, []
        rest = list(filterfalse(good.__contains__, names))
        if self.fill(rest, evaluate):
            passed = list(filter(good.__contains__, names))
            rest = list(filterfalse(good.__contains__, rest))
        return passed, rest


V = TypeVar("V")


class AnswerBook:
    """Answer sets by question key, bounded, tied to one change feed."""

    def __init__(self, limit: int = MAX_ANSWER_SETS) -> None:
        self._limit = limit
        self._feed: FeedView | None = None
        self._sets: OrderedDict[Hashable, object] = OrderedDict()

    def get(self, feed: FeedView, key: Hashable, make: Callable[[FeedView], V]) -> V:
        """The answer set for `key` over `feed`, made by `make` if new (a new feed, i.e. a rebuilt
        cache, drops them all). One key must always be made by the same `make`."""
        if feed is not self._feed:
            self._sets.clear()
            self._feed = feed
        answers = self._sets.get(key)
        if answers is None:
            answers = self._sets[key] = make(feed)
            if len(self._sets) > self._limit:
                self._sets.popitem(last=False)
        else:
            self._sets.move_to_end(key)
        return cast(V, answers)

    def __len__(self) -> int:
        return len(self._sets)
