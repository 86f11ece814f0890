"""A preemptor waits, with a filter error, while the kubelet frees its victims' devices.

After a preemption kube-scheduler requeues the preemptor when the victim's deletion reaches its
informer, and its own snapshot then shows the room. The extender does not yet: the node agent
publishes the devices the kubelet still holds for a deleted pod (`kubeletStale` in the inventory,
docs/handshake.md) until the kubelet has freed them, about a second, and the extender counts them
as taken. A filter that refused every node then would be a FitError, which runs PostFilter:
`DefaultPreemption.PodEligibleToPreemptOthers` (pkg/scheduler/framework/plugins/
defaultpreemption/default_preemption.go) finds no terminating victim on the nominated node in
kube-scheduler's snapshot (the victim is gone there) and evicts a second pod, somewhere else: seen
on the real-cluster tier (`tests/realk8s/test_preemption.py`).

So when no node passes and the pod's nominated node would fit it once the kubelet frees what it
holds for deleted pods (`vgpu.core.fit.fits_once_kubelet_frees`), the filter answers with an
error: kube-scheduler sends the pod to its backoff queue without PostFilter
(pkg/scheduler/schedule_one.go: an error that is not a FitError) and retries it, by which time the
devices are free. That error also clears the pod's nomination (`clearNominatedNode`, same file),
so the wait is remembered here by pod for `WAIT_S` from its first error: a retry that finds the
devices still held waits again without a nomination; after `WAIT_S` (a kubelet that does not free
them) the pod is refused as any other and may preempt elsewhere. Nothing waits while the
nominated node still shows the victims themselves: their holdings do not go with the kubelet's,
and kube-scheduler, seeing them terminate, keeps the nomination and preempts nobody else.

Bounded: at most `KEPT` waits are remembered (the oldest forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container

from vgpu.api.podspec import PodSpec
from vgpu.core.fit import fits_once_kubelet_frees
from vgpu.core.ids import PodKey
from vgpu.extender.cache.cluster import ClusterCache

WAIT_S = 10.0
"""How long a preemptor may wait for the kubelet to free devices on its node (normally about a
second; kube-scheduler's backoff between retries is 1 to 10 s)."""
KEPT = 1024


class PreemptorWaits:
    """The pods waiting for the kubelet to free devices on a node, since when (module doc)."""

    def __init__(self, *, wait_s: float = WAIT_S, kept: int = KEPT) -> None:
        self._wait_s, self._kept = wait_s, kept
        self._since: OrderedDict[PodKey, tuple[str, float]] = OrderedDict()

    def error(
        self,
        cache: ClusterCache,
        spec: PodSpec,
        names: list[str],
        unresolvable: Container[str],
        now: float,
    ) -> str | None:
        """For a pod the filter refused on every node in `names`: the error to answer while it
        waits for the kubelet on its node (module doc), else None. Called under the cache's
        lock."""
        key = spec.request.key
        node = self.node_for(key, cache.nominated(key), now)
        if not node or node not in names or node in unresolvable:
            return None
        ns = cache.node_states.get(node)
        if ns is None or not fits_once_kubelet_frees(ns, spec.request):
            return None
        self.waited(key, node, now)
        return (
            f"pod {key}: node {node}, where it preempted, fits it once the kubelet frees the "
            "devices it still holds for deleted pods; retried after backoff rather than "
            "refused, so that no second victim is preempted"
        )

    def node_for(self, key: PodKey, nominated: str, now: float) -> str:
        """The node the pod may wait on: one it waits on already (within `wait_s` of the first
        error), else its nomination, else ""."""
        waiting = self._since.get(key)
        if waiting is not None:
            node, since = waiting
            if now - since < self._wait_s:
                return node
            del self._since[key]
            return ""  # waited long enough: refused as any other from now on
        return nominated

    def waited(self, key: PodKey, node: str, now: float) -> None:
        """The pod was answered with an error to wait on `node` (its first error starts it)."""
        if key in self._since:
            return
        self._since[key] = (node, now)
        while len(self._since) > self._kept:
            self._since.popitem(last=False)
