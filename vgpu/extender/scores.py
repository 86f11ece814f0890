"""Prioritize's answer set: raw scores per node, grouped by value, replies built one group at a time.

A pod shape's raw scores take few distinct values across a cluster (nodes in the same state
score the same), while prioritize requests name up to every node, a different set each time
(the filter's survivors). So the answer set keeps, besides each node's raw score, the set of nodes
per score. A request intersects each group with the requested names (C-level set operations,
about one membership test per node in all), scales the few distinct scores min-max over the
request as the core does, and writes each group's entries with one string join: no per-node
Python work at all. A node the feed names is re-scored before the next request.

Node names are DNS subdomains, so they are written into JSON as they are; a name that would
need escaping (none should) is kept apart and encoded on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from itertools import islice
from json.encoder import encode_basestring_ascii

from vgpu.core.scheduler import scale_score
from vgpu.extender.answers import FeedView
from vgpu.extender.wire import Grouped

log = logging.getLogger("vgpu.extender.service")  # the filter's decision lines, under one name

Score = float | None


def log_top_scores(
    pod: object, names: list[str], policy: str, score: Callable[[str], Score], top: int = 3
) -> None:
    """At -v: the best-scored nodes of a decision, so a placement can be explained from the log
    (the caller computes it only when debug logging is on: filter is the hot path)."""
    scored = sorted(
        ((s, n) for n in names if (s := score(n)) is not None), key=lambda x: (-x[0], x[1])
    )
    best = ", ".join(f"{n}={s:.4g}" for s, n in scored[:top]) or "none scores"
    log.debug("filter %s: %d nodes fit, top scores (%s): %s", pod, len(names), policy, best)


class ScoreAnswers:
    """Raw scores of one pod shape under one policy, as groups of nodes per value."""

    __slots__ = ("feed", "groups", "odd", "seq")

    def __init__(self, feed: FeedView) -> None:
        self.feed, self.seq = feed, feed.seq
        self.groups: dict[Score, set[str]] = {}
        """Plain node names by raw score (None: does not fit); each node in one group."""
        self.odd: dict[str, Score] = {}
        """Scores of names that need JSON escaping (never in `groups`)."""

    def _drop(self, name: str) -> bool:
        """Forget a node's score; whether it had one."""
        if self.odd.pop(name, _ABSENT) is not _ABSENT:
            return True
        for score, group in self.groups.items():
            if name in group:
                group.discard(name)
                if not group:
                    del self.groups[score]
                return True
        return False

    def _set(self, name: str, score: Score) -> None:
        if name in self.odd or encode_basestring_ascii(name) != f'"{name}"':
            self.odd[name] = score
        else:
            self.groups.setdefault(score, set()).add(name)

    def _sync(self, evaluate: Callable[[str], Score]) -> None:
        """Re-score the known nodes changed since the last request (they are likely asked)."""
        changed = self.feed.since(self.seq)
        self.seq = self.feed.seq
        if changed is None:
            self.groups.clear()
            self.odd.clear()
            return
        for name in changed:
            if self._drop(name):
                self._set(name, evaluate(name))

    def _hits(self, asked: set[str]) -> tuple[list[tuple[Score, set[str]]], list[str]]:
        hits = [(score, group & asked) for score, group in self.groups.items()]
        return [(s, h) for s, h in hits if h], [n for n in self.odd if n in asked]

    def _scored(
        self, names: list[str], evaluate: Callable[[str], Score]
    ) -> tuple[list[tuple[Score, set[str]]], list[str]]:
        """The groups' hits among `names` and the odd names asked, every name scored."""
        self._sync(evaluate)
        asked = set(names)
        hits, odd = self._hits(asked)
        if sum(len(h) for _, h in hits) + len(odd) < len(asked):
            known = set().union(*self.groups.values(), self.odd)
            for name in asked - known:
                self._set(name, evaluate(name))
            hits, odd = self._hits(asked)
        return hits, odd

    def best(self, names: list[str], evaluate: Callable[[str], Score], limit: int) -> list[str]:
        """The first `limit` of `names` (in their order) sharing the highest raw score among
        them; `names` itself when none scores (nothing to rank by)."""
        hits, odd = self._scored(names, evaluate)
        scores = [s for s, _ in hits if s is not None]
        scores += [s for s in map(self.odd.__getitem__, odd) if s is not None]
        if not scores:
            return names
        top = max(scores)
        chosen = set().union(*(h for s, h in hits if s == top))
        chosen.update(n for n in odd if self.odd[n] == top)
        return list(islice((n for n in names if n in chosen), limit))

    def reply(self, names: list[str], evaluate: Callable[[str], Score]) -> Grouped:
        """Scores 0..10 for `names`: min-max over the request, 0 where the pod does not fit."""
        hits, odd = self._scored(names, evaluate)
        found = [s for s, _ in hits if s is not None]
        found += [s for s in map(self.odd.__getitem__, odd) if s is not None]
        bounds = (min(found), max(found)) if found else None
        groups = [(scale_score(s, bounds), h) for s, h in hits]
        return Grouped(
            names,
            [(s, h) for s, h in groups if s],
            [(n, scale_score(self.odd[n], bounds)) for n in sorted(odd)],
        )


_ABSENT = object()
