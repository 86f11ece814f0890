"""Which waiting pods a replay's pass offers: each queue's oldest `window` pods that may fit now.

The extender offers every held job to `release.plan` each pass, and kube-scheduler tries every
pending pod; a replay with hundreds of thousands of waiting pods cannot. It offers at most
`window` pods per queue, and which ones must not change what the pass releases. A pass only
fills GPUs, so a pod whose shape fits nowhere now cannot be released in it: skipping such pods
changes nothing but the time a pass takes. So the window holds each queue's oldest pods **whose
shape may fit**, however deep in the queue they are.

The oldest `window` pods whatever their shape (as before) was not the same: on the full trace
cluster with one queue of whole-GPU pods (`--queue-large`), the other queue's oldest thousand
pods all asked 81 % of a GPU, which fit nowhere, so its smaller pods were never offered while
13 to 19 % of the cores sat idle on partly used GPUs (docs/queues.md). The window throttled that
queue as the extender never would.

A shape that did not fit at the end of the last pass can fit now only on a node that pods left
since, so only those nodes are scored, once per shape and pass (for a pod asking part of one
GPU, only those where a GPU has its cores and memory free: `_may_host`). Each queue's oldest pod that may
not fit is offered all the same (its head, or the first past those that may fit), so a strict queue
sees a job of it that does not fit, as the extender, offered every job, would
(`vgpu.core.queues.release`: the hold covers every job of the queue, not only its head).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from vgpu.core.capacity import candidates, host_fits
from vgpu.core.ids import NodeName
from vgpu.core.model import PodRequest
from vgpu.core.scheduler import Scheduler
from vgpu.sim.poisson import Arrival


class Offers:
    """One pass's view of which shapes may fit (memoised) and the pods it offers."""

    def __init__(
        self, scheduler: Scheduler, unfit: set[object], freed: Iterable[NodeName], window: int
    ) -> None:
        self._scheduler = scheduler
        self._was_unfit = unfit
        self._nodes = sorted(freed)
        self._window = window
        self.fits: dict[object, bool] = {}
        """Each shape asked about this pass: whether it may fit."""

    def may_fit(self, arrival: Arrival) -> bool:
        """Whether the pod's shape may fit now (module doc)."""
        got = self.fits.get(arrival.shape)
        if got is None:
            got = arrival.shape not in self._was_unfit or (
                bool(self._nodes)
                and self._scheduler.select(
                    arrival.pod, _may_host(self._nodes, arrival.pod, self._scheduler)
                )
                is not None
            )
            self.fits[arrival.shape] = got
        return got

    def oldest(self, queue: Sequence[Arrival]) -> list[Arrival]:
        """The queue's oldest pods that may fit and its oldest that may not, `window` at most."""
        out: list[Arrival] = []
        known = self.fits
        unfit_offered = False
        for a in queue:
            fits = known.get(a.shape)
            if fits is None:
                fits = self.may_fit(a)
            if fits or not unfit_offered:
                unfit_offered = unfit_offered or not fits
                out.append(a)
                if len(out) >= self._window:
                    break
        return out

    def per_queue(self, pending: Mapping[str, Sequence[Arrival]]) -> dict[str, list[Arrival]]:
        """`oldest` of every queue."""
        return {q: self.oldest(queue) for q, queue in pending.items()}

    def unfit(self) -> set[object]:
        """The shapes found not to fit this pass so far."""
        return {shape for shape, fits in self.fits.items() if not fits}


def _may_host(nodes: list[NodeName], pod: PodRequest, scheduler: Scheduler) -> list[NodeName]:
    """The nodes, less those where a pod asking part of one GPU has no GPU with its cores and
    memory free (or the host lacks its CPU or memory): no policy places it there, since each
    chooses among `candidates`, so `select` over the rest answers as over all (and observes the
    pod all the same). Checking is far cheaper than a policy's evaluation, and a shape that did
    not fit at the last pass rarely fits a node pods left since. Pods asking more than one
    share, or whole GPUs, are evaluated everywhere."""
    wanting = pod.gpu_containers
    if len(wanting) != 1 or wanting[0].whole:
        return nodes
    state = scheduler.state
    c = wanting[0]
    return [
        n
        for n in nodes
        if state.has_node(n)
        and host_fits(ns := state.node(n), pod)
        and candidates(ns, c, pod.selector)
    ]
