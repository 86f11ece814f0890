"""A pod that fits a node in a moment is retried (a filter error), not refused, where a refusal
could make kube-scheduler preempt for it.

Two of the extender's refusals end by themselves within about a second, and kube-scheduler sees
neither: a node where the pod fits but a container of its shape is bound there and not yet
admitted (invariant I: the kubelet could confuse the two; the agent's admission lifts it), and a
node whose kubelet still holds devices for deleted pods (`kubeletStale`, docs/handshake.md; the
agent has the kubelet free them). A filter that refuses every node is a FitError, which runs
PostFilter, and `DefaultPreemption` (pkg/scheduler/framework/plugins/defaultpreemption/
default_preemption.go) then evicts lower-priority pods wherever its own accounting finds room
once they are gone. Both were seen on the real-cluster tier (`tests/realk8s/test_preemption.py`),
each in every run:

* after a preemption kube-scheduler requeues the preemptor when the victim's deletion reaches its
  informer, while the node still shows the victim's devices held by the kubelet; with no
  terminating victim left in its snapshot `PodEligibleToPreemptOthers` lets it preempt again, and
  a second victim goes;
* two high-priority pods of one shape at once: the second is refused where it fits until the
  first is admitted, and a pod on another node is evicted for it.

So when no node passes, the pod may preempt (`spec.preemptionPolicy` is not Never and a pod of
lower priority is held somewhere), and a node asked about would take it once those clear, the
filter answers with an error: kube-scheduler sends the pod to its backoff queue without PostFilter
(pkg/scheduler/schedule_one.go: an error that is not a FitError; it also clears a nomination,
`clearNominatedNode`) and retries it after 1 to 10 s. The wait is bounded per pod (by UID):
`WAIT_S` after its first such error it is refused as any other, and may preempt (a kubelet that
never frees, a pod never admitted). A pod that cannot preempt is refused as before: kube-scheduler
requeues it on the cluster's events, with no backoff. At most `KEPT` pods are remembered, the
oldest forgotten first. The cost stays off the filter's hot path: only a filter that refuses
every node looks, only at the nodes it refused that have pending containers (bound and not
admitted, assumed by a bind, picked by a filter) or devices the kubelet holds (few, and indexed), and reads the pods' priorities only when one would take it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from vgpu.api.podspec import PodSpec
from vgpu.core.fit import check, fits_once_kubelet_frees
from vgpu.core.ids import NodeName
from vgpu.extender.cache.cluster import ClusterCache

WAIT_S = 10.0
"""How long a pod may be retried instead of refused (both conditions normally last about a
second; kube-scheduler's backoff between retries is 1 to 10 s)."""
KEPT = 1024


class PreemptionWaits:
    """The pods answered with an error to wait, since when (module doc)."""

    def __init__(self, *, wait_s: float = WAIT_S, kept: int = KEPT) -> None:
        self._wait_s, self._kept = wait_s, kept
        self._since: OrderedDict[str, float] = OrderedDict()

    def error(
        self, cache: ClusterCache, spec: PodSpec, failed: Mapping[str, str], now: float
    ) -> str | None:
        """For a pod the filter refused on every node it was asked about (`failed`: those
        refused resolvably): the error to answer while it waits (module doc), else None. Looks
        only at the few nodes with pending containers or devices the kubelet holds, and at the
        pods' priorities only when one of them would take it. Called under the cache's lock."""
        uid = spec.request.uid
        if not uid or now - self._since.get(uid, now) >= self._wait_s:
            return None
        for name in sorted(cache.pending_nodes().union(cache.kubelet_holds).intersection(failed)):
            why = _soon(cache, spec, name)
            if why and _may_preempt(cache, spec):
                self._started(uid, now)
                return (
                    f"pod {spec.request.key}: node {name} takes it once {why}; retried after "
                    "backoff rather than refused, so that no pod is preempted for it"
                )
        return None

    def _started(self, uid: str, now: float) -> None:
        if uid not in self._since:
            self._since[uid] = now
            while len(self._since) > self._kept:
                self._since.popitem(last=False)


def _may_preempt(cache: ClusterCache, spec: PodSpec) -> bool:
    """Whether PostFilter could evict a pod for it: it may preempt, and some pod of lower
    priority is bound."""
    if not spec.preempts:
        return False
    return any(p.node and p.priority < spec.priority for p in cache.pods.values())


def _soon(cache: ClusterCache, spec: PodSpec, name: str) -> str:
    """What the node waits for before it takes the pod ("" for nothing that ends by itself)."""
    ns = cache.node_states.get(name)
    if ns is None:
        return ""
    if fits_once_kubelet_frees(ns, spec.request):
        return "the kubelet frees the devices it still holds for deleted pods"
    if not check(ns, spec.request).ok:
        return ""
    pending = cache.pending_on(NodeName(name), besides=spec.request.key)
    pods = sorted({c.pod for c in pending})
    return f"{', '.join(pods)} {'is' if len(pods) == 1 else 'are'} admitted" if pods else ""
