"""The bind verb: choose the GPUs, assume them, create the Binding with the signed assignment.

1. Only the leader binds, and only with a cache synced for its own leadership term.
2. The place comes from the pod's holding (a gang reservation, or an earlier attempt's
   assumption on the same node), else from a fresh invariant-I placement on the node. A held
   place is bound only while no other pod's pending (or in-flight) container on the node is
   confusable with it, so gang members with equal whole-GPU asks on one node are bound one
   after another, each once the previous one is admitted (docs/handshake.md, invariant I).
3. A gang member waits (up to `bind_wait`) until min-member members have their place confirmed;
   otherwise the bind fails resolvably and kube-scheduler retries the pod.
4. The assignment is assumed in the ledger *before* the Binding is sent, so concurrent filters
   see it. The Binding carries `vgpu.io/assignment` + signature, merged into the pod atomically.
5. Idempotent: a retry reuses the assumed assignment, and a 409 because the pod is already bound
   with this very assignment is success. Any other failure releases the assumption, except when
   the outcome is unknown (5xx, timeout): then the assumption stays until the watch shows the
   truth or `assume_ttl` passes, so capacity is never handed out twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from vgpu.adapters.kube.errors import KubeConflict, KubeInvalid, KubeNotFound
from vgpu.api.assignment import ASSIGNMENT, binding_annotations
from vgpu.api.podspec import PodSpec
from vgpu.core.errors import Conflict, InvalidRequest, VgpuError
from vgpu.core.fit import Verdict
from vgpu.core.handoff_rule import conflicts
from vgpu.core.ids import PodKey, pod_key
from vgpu.core.model import Assignment
from vgpu.core.scheduler import Scheduler
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.gangs.claims import is_claim_member
from vgpu.extender.gangs.coordinator import GangWait
from vgpu.extender.pods.place import canonical
from vgpu.extender.resolve import PodReader
from vgpu.extender.wire import BindingArgs

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class BindApi(Protocol):
    """The two API calls bind needs (`vgpu.adapters.kube.calls.KubeApi` provides them)."""

    def get_pod(self, namespace: str, name: str) -> Obj: ...

    def bind_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        *,
        annotations: Mapping[str, str] | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None: ...


class BindFailed(VgpuError):
    """The pod was not bound; the message is returned in-band (kube-scheduler retries)."""


class BindDeferred(BindFailed):
    """Not bound yet by design: a gang member waits for its peers or for an equal member's
    admission on its node, keeping its place. Counted apart from failures: counted as errors,
    such waits fired VgpuBindErrors in normal gang operation."""


class Deferral(str):
    """A bind error that is a deferral (`BindDeferred`): kube-scheduler sees the same text;
    the metrics count it as `deferred`, not `error`."""


def chosen_gpus(assignment: Assignment) -> str:
    """The decision in one log line: each container's GPUs with cores and memory (on call,
    "which GPU did it get?" is answered by the extender's log, which once said only "bound p
    to n1")."""
    parts = []
    for c in assignment.containers:
        shares = ", ".join(
            f"{s.uuid} {s.cores} cores {s.memory_mmib // 1000} MiB" for s in c.shares
        )
        parts.append(f"{c.name} on {shares}" if shares else f"{c.name} no GPU")
    return "; ".join(parts) or "no GPU"


def bind_outcome(error: str) -> str:
    """The `vgpu_extender_binds_total` outcome of a bind verb's result."""
    if not error:
        return "ok"
    return "deferred" if isinstance(error, Deferral) else "error"


class Binder:
    """Binds pods: reads them as the other verbs do (the `PodReader` the `Extender`'s verbs
    share) and changes the state only through its cache's operations. Given these parts, not
    the `Extender`: it uses no verb of it."""

    def __init__(
        self,
        cache: ClusterCache,
        pods: PodReader,
        api: BindApi,
        *,
        clock: Callable[[], float],
        bind_wait: float,
        key: bytes,
        may_bind: Callable[[], str | None],
    ) -> None:
        self.cache = cache
        self._pods = pods
        self._clock = clock
        self._bind_wait = bind_wait
        self.api = api
        self.key = key
        self.may_bind = may_bind
        """None when this replica may bind now, else why not."""

    def bind(self, args: BindingArgs) -> str:
        """The bind verb: "" on success, else the error for kube-scheduler."""
        why_not = self.may_bind()
        if why_not:
            return why_not
        key = pod_key(args.pod_namespace, args.pod_name)
        obj: Obj | None = None
        try:
            spec = self._watched(key, args.pod_uid)
            if spec is None:
                obj = self.api.get_pod(args.pod_namespace, args.pod_name)
                spec = self.cache.parse(obj)
            spec, policy, size = self._pods.resolve(spec)
        except KubeNotFound:
            return f"pod {key} not found"
        except VgpuError as err:
            return f"pod {key}: {err}"
        if args.pod_uid and spec.request.uid != args.pod_uid:
            return f"pod {key}: UID {args.pod_uid} is stale (the pod now has {spec.request.uid})"
        if spec.node:
            return self._already_bound(spec, args.node)
        try:
            assignment = self._claim(obj, spec, size, args.node, policy)
        except BindDeferred as err:
            return Deferral(err)
        except BindFailed as err:
            return str(err)
        try:
            return self._send(key, spec, assignment)
        finally:
            self.cache.bind_done(key)

    @property
    def _scheduler(self) -> Scheduler:
        return self.cache.scheduler(self._pods.policies.default)

    def _watched(self, key: PodKey, uid: str) -> PodSpec | None:
        """The pod as the watch shows it, if its UID is the one asked for: saves reading it back
        from the API server. A pod the watch has not shown (or shows under another UID) is read
        fresh: bind acts only on pods the API server confirms, never on a request's word. The Binding carries the UID as a
        precondition and a 409 is checked against the server, so a lagging watch cannot bind
        the wrong pod or bind twice."""
        spec = self.cache.pod(key)
        if spec is None or (uid and spec.request.uid != uid):
            return None
        return spec

    def _already_bound(self, spec: PodSpec, node: str) -> str:
        if spec.node == node:
            return ""  # a retried bind whose first attempt succeeded
        return f"pod {spec.request.key} is already bound to {spec.node}"

    def _claim(
        self, obj: Obj | None, spec: PodSpec, size: int, node: str, policy: Any
    ) -> Assignment:
        """Decide and assume the assignment (under the cache lock)."""
        cache, key = self.cache, spec.request.key
        with cache.atomic():
            if cache.binding(key):
                raise BindFailed(f"pod {key}: a bind is already in flight")
            if obj is not None:
                cache.remember(obj, spec)
            if is_claim_member(spec):  # its claims are allocated on `node` by now
                arrived = cache.claim_arrived(spec, node, policy, self._scheduler, self._clock())
                if arrived is not None:
                    raise BindFailed(arrived)
            target = cache.held_place(spec, size, self._scheduler, self._clock())
            if isinstance(target, GangWait):
                raise BindFailed(target.reason)
            if target is not None and target.node != node:
                if spec.gang is not None:
                    raise BindFailed(f"pod {key} is reserved on node {target.node}, not {node}")
                cache.release(key)
                target = None
            if spec.gang is not None:
                self._await_gang(spec, size)
            if target is not None:
                self._keep_invariant(spec, target)
            assignment = target if target is not None else self._fresh(spec, node, policy)
            assignment = canonical(assignment)
            held = cache.holding(key)
            if held is not None and canonical(held.assignment) == assignment:
                assignment = held.assignment
            if assignment.shares:  # what a node agent would refuse (`verify`) is refused here
                try:
                    binding_annotations(assignment, self.key)
                except InvalidRequest as err:
                    raise BindFailed(f"pod {key} cannot be bound: {err}") from err
            try:
                cache.assume(assignment, self._clock())
            except Conflict as err:
                raise BindFailed(f"pod {key}: {err}") from err
            return assignment

    def _keep_invariant(self, spec: PodSpec, target: Assignment) -> None:
        """A held place (a gang reservation, an earlier assumption) was chosen without regard
        to what is pending now: bind it only when no other pod's pending container on the node
        is confusable with it (invariant I), else fail resolvably and keep the place."""
        key = spec.request.key
        pending = self.cache.pending_on(target.node, besides=key)
        problems = conflicts(spec.pending(target), pending)
        if problems:
            raise BindDeferred(
                f"pod {key} keeps its place on node {target.node} but waits for admission: "
                f"{problems[0]}"
            )

    def _fresh(self, spec: PodSpec, node: str, policy: Any) -> Assignment:
        placed = self.cache.place(spec, node, policy, self._scheduler)
        if isinstance(placed, Verdict):
            raise BindFailed(f"pod {spec.request.key} does not fit node {node}: {placed}")
        return placed

    def _await_gang(self, spec: PodSpec, size: int) -> None:
        gang = spec.gang
        assert gang is not None
        # A real-time wait inside one HTTP call (kept under kube-scheduler's httpTimeout), so
        # it uses the monotonic clock, not the injectable clock of reservations.
        deadline = time.monotonic() + self._bind_wait
        while not self.cache.gangs.ready(gang.key, size):
            left = deadline - time.monotonic()
            if left <= 0 or self.cache.holding(spec.request.key) is None:
                raise BindDeferred(
                    f"gang {gang.key}: waiting until {size} members have their place "
                    f"(member {spec.request.key} keeps its reservation)"
                )
            self.cache.wait_changed(min(left, 0.2))

    def _send(self, key: PodKey, spec: PodSpec, assignment: Assignment) -> str:
        ns, name = key.split("/", 1)
        annotations = binding_annotations(assignment, self.key) if assignment.shares else {}
        try:
            self.api.bind_pod(
                ns, name, assignment.node, annotations=annotations, uid=spec.request.uid or None
            )
            log.info("bound %s to %s: %s", key, assignment.node, chosen_gpus(assignment))
            return ""
        except KubeConflict as err:
            return self._after_conflict(key, assignment, annotations, err)
        except (KubeNotFound, KubeInvalid, InvalidRequest) as err:
            self._release(key)
            return f"binding {key} failed: {err}"
        except VgpuError as err:
            return self._after_unknown(key, assignment, annotations, err)

    def _bound_as(
        self, key: PodKey, assignment: Assignment, annotations: Mapping[str, str]
    ) -> bool | None:
        """Whether the pod is bound with exactly this assignment (None: cannot tell)."""
        ns, name = key.split("/", 1)
        try:
            pod = self.api.get_pod(ns, name)
        except KubeNotFound:
            return False
        except VgpuError:
            return None
        spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
        same_text = (meta.get("annotations") or {}).get(ASSIGNMENT) == annotations.get(ASSIGNMENT)
        return spec.get("nodeName") == assignment.node and same_text

    def _after_conflict(
        self, key: PodKey, assignment: Assignment, annotations: Mapping[str, str], err: Exception
    ) -> str:
        if self._bound_as(key, assignment, annotations):
            log.info("bind %s: already bound with this assignment (retry)", key)
            return ""
        self._release(key)
        return f"binding {key} failed: {err}"

    def _after_unknown(
        self, key: PodKey, assignment: Assignment, annotations: Mapping[str, str], err: Exception
    ) -> str:
        if self._bound_as(key, assignment, annotations):
            return ""
        # Not bound *yet* may still become bound (the request can be in flight at the server),
        # so the assumption stays; a retry reuses it, `assume_ttl` or the watch settles it.
        return f"binding {key} failed (will retry): {err}"

    def _release(self, key: PodKey) -> None:
        """The bind definitely failed: give the assumption back (a gang is planned anew)."""
        self.cache.bind_failed(key)
