"""A feed of changed node names, for views derived from the cluster state.

The extender answers requests naming every node of a 5,000-node cluster many times a second.
Looking at each node per request is what made it slow, even with per-node memos: the answer
for a pod shape barely changes between two requests (one pod bound, one node touched). A view
that keeps the answer for every node and, before each use, re-evaluates only the nodes named in
the feed since it last looked, costs work in proportion to what changed, not to the request.

The feed is an append-only list of node names with a moving base, so a reader holds a plain
integer (`seq`). It is trimmed when it grows past `limit`; a reader left behind by a trim is told
so (`since` returns None) and rebuilds from scratch. Marking is conservative: a name may appear
although nothing a view depends on changed (a what-if fork and its revert, a status heartbeat),
which costs one re-evaluation, never a wrong answer.
"""

from __future__ import annotations

DEFAULT_LIMIT = 65_536


class ChangeFeed:
    """Names of nodes whose state changed, in order; readers keep a sequence number."""

    __slots__ = ("_base", "_limit", "log")

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 2:
            raise ValueError("limit must be at least 2")
        self._base = 0
        self._limit = limit
        self.log: list[str] = []
        """Marked names; `log[i]` has sequence number `base + i`. Append through `mark`."""

    @property
    def seq(self) -> int:
        """The sequence number the next mark will get (a reader's position after syncing)."""
        return self._base + len(self.log)

    def mark(self, name: str) -> None:
        """Record that something about node `name` changed."""
        self.log.append(name)
        if len(self.log) > self._limit:
            drop = len(self.log) // 2
            del self.log[:drop]
            self._base += drop

    def since(self, seq: int) -> set[str] | None:
        """The names marked at or after `seq`, or None when the feed no longer reaches back
        that far (the reader must rebuild)."""
        if seq < self._base or seq > self.seq:
            return None
        return set(self.log[seq - self._base :])
