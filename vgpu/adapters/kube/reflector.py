"""List-then-watch with resume and relist: a small reflector over plain dict objects.

`reflect()` turns a list call and a watch call into one endless stream of `WatchEvent`s:

- it lists first (unless given a resourceVersion), emitting ADDED per object, then `SYNCED`;
- it watches from the newest resourceVersion it has seen (bookmarks included) and reconnects
  from there whenever the server ends the stream;
- on 410 Expired it relists and emits the difference against what it had emitted before
  (ADDED / MODIFIED / DELETED), then `SYNCED` again, so consumers never handle relists;
- on transient failures (`KubeUnavailable`) it backs off and retries; other errors propagate.

Objects are keyed by uid, so a pod deleted and recreated under the same name during a gap
shows up as DELETED + ADDED. ADDED and MODIFIED should both be treated as upserts.

The watch stream arrives as JSON lines, decoded here. What is remembered of each object for the
next relist (its resourceVersion, and the object itself for a DELETED event) is kept encoded,
not as the decoded dicts: a watch replaces every object of the cluster again and again, and
decoded objects kept until their next version are what makes Python's cyclic garbage collector
run often and long (measured in bench/pod_watch_cost.py). Bytes are not tracked by it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import closing
from typing import Any, NamedTuple

from vgpu.adapters import fastjson

log = logging.getLogger(__name__)

Obj = dict[str, Any]
SYNCED = "SYNCED"


class WatchEvent(NamedTuple):
    """One change: `type` is ADDED, MODIFIED, DELETED or SYNCED (after each full list, whose
    object carries only `metadata.resourceVersion`)."""

    type: str
    object: Obj


class Listing(NamedTuple):
    items: list[Obj]
    resource_version: str


class Seen(NamedTuple):
    """What a reflector keeps of an object: its version, and the object encoded (`wrapped`:
    inside a watch event line, `{"type", "object"}`)."""

    version: str
    raw: bytes
    wrapped: bool

    def object(self) -> Obj:
        doc = fastjson.loads(self.raw)
        return dict((doc.get("object") or {}) if self.wrapped else doc)


ListFn = Callable[[], Listing]
WatchFn = Callable[
    [str], Generator[bytes, None, None]
]  # resourceVersion → raw event lines, each one JSON {"type", "object"}


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


def resource_version(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion") or "")


class Reflector:
    """State for one `reflect()` stream: the last resourceVersion and the objects emitted."""

    def __init__(
        self,
        list_fn: ListFn,
        watch_fn: WatchFn,
        *,
        expired: type[Exception],
        transient: type[Exception],
        start_version: str | None = None,
        stop: threading.Event | None = None,
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
    ) -> None:
        self._list, self._watch = list_fn, watch_fn
        self._expired, self._transient = expired, transient
        self._rv = start_version
        self._stop = stop or threading.Event()
        self._base_delay, self._max_delay = retry_delay, max_retry_delay
        self._delay = retry_delay
        self._known: dict[str, Seen] = {}

    def events(self) -> Iterator[WatchEvent]:
        while not self._stop.is_set():
            try:
                if self._rv is None:
                    yield from self._relist()
                else:
                    yield from self._follow(self._rv)
                self._delay = self._base_delay
            except self._expired:
                log.info("watch resourceVersion %s expired; relisting", self._rv)
                self._rv = None
            except self._transient as e:
                log.warning("watch failed, retrying in %.1fs: %s", self._delay, e)
                self._stop.wait(self._delay)
                self._delay = min(self._delay * 2, self._max_delay)

    def _relist(self) -> Iterator[WatchEvent]:
        listing = self._list()
        fresh = {object_key(o): o for o in listing.items}
        changes: list[WatchEvent] = []
        for key, obj in fresh.items():
            old = self._known.get(key)
            if old is None:
                changes.append(WatchEvent("ADDED", obj))
            elif old.version != resource_version(obj):
                changes.append(WatchEvent("MODIFIED", obj))
        gone = [seen for key, seen in self._known.items() if key not in fresh]
        changes += [WatchEvent("DELETED", seen.object()) for seen in gone]
        self._known = {
            key: Seen(resource_version(obj), fastjson.dumps(obj), wrapped=False)
            for key, obj in fresh.items()
        }
        self._rv = listing.resource_version
        changes.append(WatchEvent(SYNCED, {"metadata": {"resourceVersion": self._rv}}))
        yield from self._until_stopped(changes)

    def _follow(self, since: str) -> Iterator[WatchEvent]:
        with closing(self._watch(since)) as raw_events:
            for raw in raw_events:
                event = self._apply(raw)
                if event is not None:
                    yield event
                    if self._stop.is_set():
                        return

    def _apply(self, line: bytes) -> WatchEvent | None:
        raw = fastjson.loads(line)
        kind, obj = str(raw.get("type", "")), raw.get("object") or {}
        if kind == "ERROR":
            raise self._status_error(obj)
        rv = resource_version(obj)
        if rv:
            self._rv = rv
        if kind in ("ADDED", "MODIFIED"):
            self._known[object_key(obj)] = Seen(rv, line, wrapped=True)
        elif kind == "DELETED":
            self._known.pop(object_key(obj), None)
        else:  # BOOKMARK, or anything newer we do not understand
            return None
        return WatchEvent(kind, obj)

    def _status_error(self, status: Obj) -> Exception:
        code, message = status.get("code"), status.get("message", "watch error")
        if code == 410:
            return self._expired(f"watch expired: {message}")
        return self._transient(f"watch error {code}: {message}")

    def _until_stopped(self, events: list[WatchEvent]) -> Iterator[WatchEvent]:
        for event in events:
            yield event
            if self._stop.is_set():
                return
