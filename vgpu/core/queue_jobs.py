"""From queued pods to the jobs `release.plan` orders, and to the book of what queues hold.

The extender's leader sees pods one by one (its watch); `release.plan` releases **jobs**: a pod,
or a gang whole. `group` makes the jobs:

* a gated pod outside any gang is a job of its own;
* a gang is one job (key `gang:<namespace>/<name>`) once at least its size of members exist and all of them are still gated; its
  ask is the sum of its members', its age its oldest member's, its priority its highest;
* a gang with fewer members than its size waits (a partial gang is never released);
* a gang with some members released and some still gated was being released when the leader
  changed (the gates are removed pod by pod): its gated members are **finishing**, released at
  once without a new decision, so a gang is never left half released and nothing is decided twice.

Released pods (no gate left, bound or not yet) count in the book: what each queue and namespace
holds. Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vgpu.core.queues import ZERO, Vec, add
from vgpu.core.release import Book, Job


@dataclass(frozen=True, slots=True)
class QueuedPod:
    """A pod carrying a queue label, as the leader's watch shows it."""

    key: str
    queue: str
    namespace: str
    ask: Vec
    gated: bool
    priority: int = 0
    created: float = 0.0
    gang: str | None = None
    gang_size: int = 1


@dataclass(frozen=True, slots=True)
class Grouped:
    """The jobs to offer, their members, what finishes a release, why others wait, the book."""

    jobs: tuple[Job, ...]
    members: Mapping[str, tuple[str, ...]]
    finishing: tuple[str, ...]
    waiting: Mapping[str, str]
    book: Book
    pending: Mapping[str, Vec] = field(default_factory=dict)
    """What each queue's gated pods ask (for metrics)."""


def group(pods: Iterable[QueuedPod], capacity: Vec) -> Grouped:
    """The jobs among `pods` and the book of the released ones (module doc)."""
    singles: list[Job] = []
    gangs: dict[str, list[QueuedPod]] = defaultdict(list)
    by_queue: dict[str, Vec] = {}
    by_ns: dict[str, Vec] = {}
    pending: dict[str, Vec] = {}
    for pod in pods:
        if not pod.gated:
            by_queue[pod.queue] = add(by_queue.get(pod.queue, ZERO), pod.ask)
            by_ns[pod.namespace] = add(by_ns.get(pod.namespace, ZERO), pod.ask)
        else:
            pending[pod.queue] = add(pending.get(pod.queue, ZERO), pod.ask)
        if pod.gang is not None:
            gangs[pod.gang].append(pod)
        elif pod.gated:
            singles.append(_job(pod.key, [pod]))
    jobs = list(singles)
    members: dict[str, tuple[str, ...]] = {j.key: (j.key,) for j in singles}
    finishing: list[str] = []
    waiting: dict[str, str] = {}
    for gang, found in sorted(gangs.items()):
        gated = sorted(p.key for p in found if p.gated)
        if not gated:
            continue
        if len(gated) < len(found):
            finishing += gated
            continue
        size = max(p.gang_size for p in found)
        if len(found) < size:
            for key in gated:
                waiting[key] = f"gang {gang}: {len(found)} of {size} members exist"
            continue
        if len({p.queue for p in found}) > 1:
            for key in gated:
                waiting[key] = f"gang {gang}: its members name different queues; name one"
            continue
        job = _job(f"gang:{gang}", found)
        jobs.append(job)
        members[job.key] = tuple(gated)
    book = Book(capacity, by_queue, by_ns)
    return Grouped(tuple(jobs), members, tuple(finishing), waiting, book, pending)


def _job(key: str, pods: list[QueuedPod]) -> Job:
    ask = ZERO
    for pod in pods:
        ask = add(ask, pod.ask)
    first = min(pods, key=lambda p: (p.created, p.key))
    return Job(
        key=key,
        queue=first.queue,
        namespace=first.namespace,
        ask=ask,
        priority=max(p.priority for p in pods),
        created=first.created,
    )
