"""From queued pods to the jobs `release.plan` orders, and to the book of what queues hold.

The extender's leader sees pods one by one (its watch); `release.plan` releases **jobs**: a pod,
or a gang whole. `group` makes the jobs:

* a gated pod outside any gang is a job of its own;
* a gang is one job (key `gang:<namespace>/<name>`) once at least its size of members exist and all of them are still gated; its
  ask is the sum of its members', its age its oldest member's, its priority its highest;
* a gang with fewer members than its size waits (a partial gang is never released);
* a gang is decided whole, once. The leader records each gang it decides (`decided`: the gang
  and its members' identities, carried on the leader Lease before any gate is removed), so a gang
  caught half released by a change of leader (the gates are removed pod by pod) is **finishing**:
  its recorded members still gated are released at once without a new decision. What finishes is
  proven by that record, never inferred from a released member: a gated pod in a gang that has
  released members and no record, or that the record does not name (a pod annotated into the gang,
  or made again under a recorded name), waits for good. Otherwise reusing a released gang's name
  would release any number of new members with no fit, cap or share check.

Released pods (no gate left, bound or not yet) and finishing ones count in the book: what each
queue and namespace holds. Pure: no I/O.

**Memory a pod is given, not only what it asks.** A share asking cores only is given its cores'
part of its GPU's memory and a whole GPU all of it (`units.memory_need_mmib`, placement's rule),
so a queue counts that (`given_memory`), for caps, shares and reclaim alike: counting only what
pods ask in `vgpu.io/memory` let a queue capped on memory pass its cap with pods asking cores
only. A pod that holds a place (reserved, assumed or bound) counts exactly what its place holds
(`held_memory`, on the GPUs it holds: half of a 16 GiB GPU is 8 GiB, though the cluster has
80 GiB GPUs). Before placement the GPU is not known: the caller names the largest healthy GPU
of the cluster (`given_memory`), the most any GPU gives, so a release never passes a cap; on a
cluster of one GPU size that is exactly what the pod will be given. Counting placed pods too as
on the largest GPU made a queue on smaller GPUs look fuller than it is, and shares and reclaim
unfair on mixed GPU sizes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from vgpu.core.model import GpuShare
from vgpu.core.queues.proportion import ZERO, Vec, add, sub
from vgpu.core.queues.release import Book, Job
from vgpu.core.units import memory_units_given, memory_units_held


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
    uid: str = ""
    whole: bool = False
    """Every GPU it asks is a whole one (`whole_gpus.asks_whole`)."""
    gpus: tuple[tuple[int, int | None], ...] = ()
    """(cores, memory MiB or None: in proportion) of each container asking GPUs, from which
    `given_memory` counts the memory it is given (empty: `ask` as it is)."""

    @property
    def ident(self) -> str:
        """Who the pod is in a gang's record: its UID (a pod made again under the same name is
        another pod), its key where the UID is not known."""
        return self.uid or self.key


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


def given_memory(pod: QueuedPod, gpu_memory_mib: int, unit_mib: int) -> QueuedPod:
    """The pod with the memory units it is given on a GPU of `gpu_memory_mib` as its ask's
    memory (module doc; `units.memory_units_given`), its cores unchanged: a pod not yet
    placed, on the largest GPU."""
    if not pod.gpus or gpu_memory_mib <= 0:
        return pod
    memory = sum(memory_units_given(c, m, gpu_memory_mib, unit_mib) for c, m in pod.gpus)
    return replace(pod, ask=(pod.ask[0], memory))


def held_memory(pod: QueuedPod, shares: Iterable[GpuShare], unit_mib: int) -> QueuedPod:
    """The pod with the memory units its place holds as its ask's memory: `shares` are what it
    holds (`Assignment.charged`), each counted by `units.memory_units_held` (module doc); its
    cores unchanged."""
    memory = sum(memory_units_held(s.cores, s.memory_mmib, unit_mib) for s in shares)
    return replace(pod, ask=(pod.ask[0], memory))


def group(
    pods: Iterable[QueuedPod],
    capacity: Vec,
    decided: Mapping[str, frozenset[str]] | None = None,
) -> Grouped:
    """The jobs among `pods` and the book of the released ones; `decided` is the leader's record
    of the gangs it decided to release, gang to members' `ident` (module doc)."""
    record = decided or {}
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
        if gang in record or len(gated) < len(found):
            done, why = _finishing(gang, found, record.get(gang))
            finishing += done
            waiting.update(why)
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
    for pod in pods_by_key(gangs.values(), finishing):
        # decided already: held by its queue from the decision on (a cap counts it at once)
        by_queue[pod.queue] = add(by_queue.get(pod.queue, ZERO), pod.ask)
        by_ns[pod.namespace] = add(by_ns.get(pod.namespace, ZERO), pod.ask)
        pending[pod.queue] = sub(pending[pod.queue], pod.ask)
    book = Book(capacity, by_queue, by_ns)
    return Grouped(tuple(jobs), members, tuple(finishing), waiting, book, pending)


def pods_by_key(groups: Iterable[list[QueuedPod]], keys: Iterable[str]) -> list[QueuedPod]:
    """The pods of `groups` named by `keys`."""
    wanted = set(keys)
    return [p for found in groups for p in found if p.key in wanted]


def _finishing(
    gang: str, found: list[QueuedPod], recorded: frozenset[str] | None
) -> tuple[list[str], dict[str, str]]:
    """A gang with a decision (or released members): its recorded members to finish, and why
    every other held member waits."""
    if recorded is None:
        why = (
            f"gang {gang} has released members and no record of a decision: a gang is decided "
            "whole, once; give this pod's gang a new name"
        )
        return [], {p.key: why for p in found if p.gated}
    done = sorted(p.key for p in found if p.gated and p.ident in recorded)
    why = (
        f"gang {gang} was released with {len(recorded)} members and cannot grow; "
        "give this pod's gang a new name"
    )
    return done, {p.key: why for p in found if p.gated and p.ident not in recorded}


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
        whole=_whole(pods),
    )


def _whole(pods: list[QueuedPod]) -> bool:
    """A job asks whole GPUs when each member that asks a GPU asks whole ones (a gang's CPU-only
    members, such as a parameter server, ask none)."""
    asking = [p for p in pods if p.ask[0] > 0]
    return bool(asking) and all(p.whole for p in asking)


def record_after(
    pods: Iterable[QueuedPod],
    decided: Mapping[str, frozenset[str]],
    released: Iterable[str],
    members: Mapping[str, tuple[str, ...]],
) -> dict[str, frozenset[str]]:
    """The leader's record after a pass: each gang it decided while a recorded member is still
    held, plus the gangs `released` (job keys) this pass with their members' identities.

    A gang leaves the record once none of its recorded members is held any more, so a member
    added later is never finished from it (module doc)."""
    by_key = {p.key: p for p in pods}
    held = {(p.gang, p.ident) for p in by_key.values() if p.gated and p.gang is not None}
    out = {g: ids for g, ids in decided.items() if any((g, i) in held for i in ids)}
    for job in released:
        if job.startswith("gang:"):
            out[job.removeprefix("gang:")] = frozenset(by_key[k].ident for k in members[job])
    return out
