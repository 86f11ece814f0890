"""The verbs behind the extender's HTTP servers (`vgpu.extender.server`): a
request body in, a status and a JSON body out, each verb timed in the request metric.

Filter requests repeat their node names pod after pod and prioritize names the last filter's
survivors, so each verb keeps a `NamesMemo` and parses only the pod when the names repeat.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from vgpu.api.podspec import key_of
from vgpu.core.errors import InvalidRequest
from vgpu.extender.binder import Binder, bind_outcome
from vgpu.extender.metrics import ExtenderMetrics
from vgpu.extender.offloop import LeaveLoop
from vgpu.extender.preemption import Preemptor, encode_preemption, parse_preemption_args
from vgpu.extender.service import Extender
from vgpu.extender.wire import (
    NamesMemo,
    encode_binding_result,
    encode_filter,
    encode_priorities,
    parse_binding_args,
    parse_extender_args,
)

JSON = "application/json"


class Routes:
    """What the handler calls; built by the composition root."""

    def __init__(
        self,
        extender: Extender,
        binder: Binder,
        metrics: ExtenderMetrics,
        *,
        ready: Callable[[], str | None],
    ) -> None:
        self.extender = extender
        self.binder = binder
        self.metrics = metrics
        self.ready = ready
        """None when ready to serve, else why not."""
        self.preemptor = Preemptor(extender)
        self._observe = {
            v: metrics.observer(v) for v in ("filter", "prioritize", "bind", "preempt")
        }
        self._filter_names = NamesMemo()
        """Filter requests repeat their node names from one pod to the next."""
        self._prioritize_names = NamesMemo(learn=False)
        """Prioritize requests name the last filter reply's survivors."""

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        """Serve one verb; (status, JSON body)."""
        start: float | None = time.perf_counter()
        try:
            if verb == "filter":
                args = parse_extender_args(body, self._filter_names)
                result = self.extender.filter(args)
                if args.nodes is None:
                    self._prioritize_names.expect(result.passed)
                return 200, encode_filter(result, args.nodes)
            if verb == "prioritize":
                args = parse_extender_args(body, self._prioritize_names)
                return 200, encode_priorities(self.extender.prioritize(args))
            if verb == "preempt":
                return self._preempt(body)
            if verb == "bind":
                error = self.binder.bind(parse_binding_args(body))
                self.metrics.binds.labels(bind_outcome(error)).inc()
                return 200, encode_binding_result(error)
            return 404, message(f"unknown verb {verb!r}; use filter, prioritize, bind or preempt")
        except LeaveLoop:  # answered again on a worker, and timed there
            start = None
            raise
        finally:
            if start is not None and verb in self._observe:
                self._observe[verb](time.perf_counter() - start)

    def _preempt(self, body: bytes) -> tuple[int, bytes]:
        """The preempt verb; an invalid pod is a 400 (kube-scheduler then drops the attempt)."""
        args = parse_preemption_args(body)
        try:
            return 200, encode_preemption(self.preemptor.preempt(args))
        except InvalidRequest as err:
            return 400, message(f"preempt: pod {key_of(args.pod)}: {err}")


def message(text: str) -> bytes:
    """A plain-text reply body: the text and a newline."""
    return (text + "\n").encode()
