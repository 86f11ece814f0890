"""Which thread makes the reply to a request, for HTTP/1.1 (`vgpu.extender.server.http1`) and
HTTP/2 (`vgpu.extender.server.http2`) alike: the serving loop's own, or a verb thread.

The probes and the `INLINE_VERBS` are answered on the loop's thread, at once; /metrics, bind and
preempt on the pool of verb threads (bind waits on the API server). An inline verb that would
have to wait (a filter for a pod the watch does not show yet) leaves the loop for the pool
(`vgpu.extender.offloop`). Verb failures go back in-band (`Error`) with 200, as kube-scheduler
expects; a malformed request is a 400; an unexpected exception is logged and answered 500.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from vgpu.extender.offloop import LeaveLoop, on_loop
from vgpu.extender.routes import JSON, Routes, message
from vgpu.extender.server.http1_request import TEXT, Reply
from vgpu.extender.wire import BadRequest

log = logging.getLogger(__name__)

PROBES_ONLY = b"this port serves GET /healthz and /readyz only; call the verbs on the main port\n"

INLINE_VERBS = frozenset({"filter", "prioritize"})
"""Verbs answered on the loop's own thread. They are in kube-scheduler's serial scheduling
cycle, take well under a millisecond of CPU and never wait on the API server; handing them to a
worker and back cost more than the verb on a busy machine (about 2.5 ms per request measured
with the real kube-scheduler, bench/real_scheduler_bench.py), and a worker pool busy with binds
waiting on a slow API server would hold them up. Bind and preempt stay on the workers."""


class Replier:
    """Makes the replies to whole requests for a server: `now` on the loop's thread, else
    `reply` (an *answer* in the extender is a node's entry in an answer set,
    `vgpu.extender.answers`)."""

    def __init__(
        self,
        routes: Routes,
        loop: asyncio.AbstractEventLoop,
        pool: ThreadPoolExecutor,
        *,
        probes_only: bool = False,
    ) -> None:
        self.routes, self._loop, self._pool = routes, loop, pool
        self.probes_only = probes_only

    def now(self, method: str, target: str, body: bytes) -> Reply | None:
        """The reply when it is made on the loop's thread (probes, `INLINE_VERBS`), else None."""
        path = target.split("?", 1)[0].rstrip("/")
        if self.probes_only:
            return self._get(path) if method == "GET" else (403, PROBES_ONLY, TEXT)
        if method == "GET":
            return None if path.endswith("/metrics") else self._get(path)
        if method != "POST":
            return 405, message(f"method {method[:20]!r} not allowed; use POST or GET"), TEXT
        verb = path.rsplit("/", 1)[-1]
        if verb not in INLINE_VERBS:
            return None
        try:
            with on_loop():
                return self._post(verb, body)
        except LeaveLoop:  # it would wait (a pod the watch does not show yet): on a worker
            return None

    async def reply(self, method: str, target: str, body: bytes) -> Reply:
        """The reply to one request: on the loop's thread where `now` makes it, else on a
        verb thread."""
        reply = self.now(method, target, body)
        if reply is not None:
            return reply
        return await self.later(method, target, body)

    async def later(self, method: str, target: str, body: bytes) -> Reply:
        """The reply made on a verb thread (/metrics, bind, preempt, a verb that left the loop)."""
        if method == "GET":  # /metrics
            data = await self._loop.run_in_executor(self._pool, self.routes.metrics.exposition)
            return 200, data, "text/plain; version=0.0.4"
        verb = target.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        return await self._loop.run_in_executor(self._pool, self._post, verb, body)

    def _get(self, path: str) -> Reply:
        if path.endswith("/healthz"):
            return 200, b"ok\n", TEXT
        if path.endswith("/readyz"):
            why = self.routes.ready()
            return (503 if why else 200), message(why or "ok"), TEXT
        return 404, b"not found\n", TEXT

    def _post(self, verb: str, body: bytes) -> Reply:
        """One verb (on a verb thread, or on the loop's for `INLINE_VERBS`)."""
        try:
            status, payload = self.routes.post(verb, body)
            return status, payload, JSON if status == 200 else TEXT
        except BadRequest as err:
            return 400, message(f"{verb}: {err}"), TEXT
        except LeaveLoop:
            raise
        except Exception as err:
            log.exception("%s failed", verb)
            return 500, message(f"{verb}: internal error: {err}"), TEXT
