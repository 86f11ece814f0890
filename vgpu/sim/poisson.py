"""Synthetic Poisson arrivals per queue, each pod drawn from the trace with its own duration.

The trace's own timestamps never contend the cluster (its pods span 149 days), so a queued replay
makes its own arrivals: queue q sends pods as a Poisson process of rate

    rate_q = load x cluster cores / mean(cores x duration over q's pods)

so that at load 1.0 the queue alone asks, on average, exactly the cluster's cores. Each arrival is a
pod drawn uniformly from the queue's part of the trace, keeping that pod's duration
(``deletion_time - creation_time``, at least 1 s, at most `max_duration_s`: a handful of pods run
for months and would otherwise set the mean alone). Only pods that ask for a GPU take part.

**Which trace pods a queue draws from** is decided by a stable hash of the pod's name: the first 8
bytes of ``sha256(name)`` as a big-endian integer, modulo the number of queues, indexes the queues
in flag order (not Python's `hash()`, which is salted per process). With a *large* queue, that queue
gets every pod asking one whole GPU or more and the others share the fractional pods by the same
hash: the fragmentation case of a queue of large shares beside queues of small ones.

**A queue asking memory** (`--queue-memory B`): B's fractional pods ask `vgpu.io/memory`
explicitly, drawn independently of their cores as in the `two-axis` variant (`variants.two_axis`),
so the replay's fair order, deserved shares and reclaim count a second dimension that only B asks,
in units of `MEMORY_UNIT_MIB` (the extender's default `vgpu.io/memory` unit).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, replace
from random import Random

from vgpu.core.ids import PodKey
from vgpu.core.model import PodRequest
from vgpu.core.queues.whole_gpus import asks_whole
from vgpu.core.units import DEFAULT_MEMORY_UNIT_MIB
from vgpu.sim.queues.settings import QueueSetup
from vgpu.sim.trace import TraceError, TraceText
from vgpu.sim.variants import two_axis

LIFETIME_COLUMNS = ("name", "creation_time", "deletion_time")
MEMORY_UNIT_MIB = DEFAULT_MEMORY_UNIT_MIB
"""One `vgpu.io/memory` unit, in MiB, as the extender counts it by default."""


@dataclass(frozen=True, slots=True)
class Arrival:
    """One synthetic pod: when it arrives, its queue, what it asks and how long it runs."""

    at: float
    queue: str
    pod: PodRequest
    duration: float
    cores: int = 0
    """Core units the pod asks (1 % of a GPU each), kept: a replay reads it on every pass."""
    shape: object = None
    """`pod.shape`, kept for the same reason."""
    memory: int = 0
    """`vgpu.io/memory` units (`MEMORY_UNIT_MIB` each) the pod asks explicitly; none for a pod
    whose memory is its cores' proportion of a GPU (every trace pod, `--queue-memory` aside)."""
    whole: bool = False
    """Every GPU the pod asks is a whole one (`whole_gpus.asks_whole`), kept: each pass that
    offers the pod asks it."""

    @classmethod
    def of(cls, at: float, queue: str, pod: PodRequest, duration: float) -> Arrival:
        """An arrival with its pod's cores, shape and memory units worked out once."""
        return cls(
            at, queue, pod, duration, _cores(pod), pod.shape, _memory_units(pod), asks_whole(pod)
        )


def parse_lifetimes(file: TraceText) -> dict[str, float]:
    """Each pod's lifetime in seconds (deletion - creation) from a trace pod CSV."""
    path = file.source
    reader = csv.DictReader(file.text.splitlines(keepends=True))
    missing = [c for c in LIFETIME_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise TraceError(
            f"{path}: --queues needs the column(s) {', '.join(missing)} (pod lifetimes); "
            "use a pod list of the openb format"
        )
    out: dict[str, float] = {}
    for row in reader:
        try:
            out[row["name"].strip()] = float(row["deletion_time"]) - float(row["creation_time"])
        except ValueError:
            raise TraceError(
                f"{path}:{reader.line_num}: creation_time/deletion_time must be numbers"
            ) from None
    return out


def bucket(key: str, n: int) -> int:
    """The stable hash: sha256 of the name, first 8 bytes big-endian, modulo `n`."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % n


def is_large(pod: PodRequest) -> bool:
    """Whether the pod asks for one whole GPU or more."""
    return any(c.whole for c in pod.gpu_containers)


def split(
    pods: tuple[PodRequest, ...], names: tuple[str, ...], large: str | None
) -> dict[str, list[PodRequest]]:
    """Each queue's part of the trace's GPU pods, by the stable hash (or by size, see above)."""
    parts: dict[str, list[PodRequest]] = {n: [] for n in names}
    others = tuple(n for n in names if n != large)
    for pod in sorted((p for p in pods if p.wants_gpu), key=lambda p: p.key):
        if large is not None and is_large(pod):
            parts[large].append(pod)
        elif large is None or not is_large(pod):
            parts[others[bucket(pod.key, len(others))]].append(pod)
    return parts


def generate(
    setup: QueueSetup,
    pods: tuple[PodRequest, ...],
    lifetimes: dict[str, float],
    *,
    cluster_cores: int,
    seed: int,
) -> list[Arrival]:
    """Every queue's arrivals from its start to the end of the replay, in time order."""
    parts = split(pods, setup.names, setup.large)
    if setup.memory is not None:
        parts[setup.memory] = list(two_axis(tuple(parts[setup.memory]), seed))
    out: list[Arrival] = []
    for name, part in parts.items():
        if not part:
            raise TraceError(f"queue {name} gets no GPU pods of the trace; use fewer queues")
        durations = [_duration(lifetimes, p, setup.max_duration_s) for p in part]
        mean_core_s = sum(_cores(p) * d for p, d in zip(part, durations, strict=True)) / len(part)
        rate = setup.load * cluster_cores / mean_core_s
        rng = Random(f"{seed}/{name}")  # str seeds are hashed with SHA-512, not salted
        at = setup.start_s.get(name, 0.0)
        serial = 0
        while True:
            at += rng.expovariate(rate)
            if at >= setup.end_s:
                break
            i = rng.randrange(len(part))
            pod = replace(part[i], key=PodKey(f"{name}-{serial}-{part[i].key}"))
            out.append(Arrival.of(at, name, pod, durations[i]))
            serial += 1
    out.sort(key=lambda a: (a.at, a.pod.key))
    return out


def _cores(pod: PodRequest) -> int:
    return sum(c.cores for c in pod.gpu_containers)


def _memory_units(pod: PodRequest) -> int:
    """The units of GPU memory the pod asks explicitly, rounded up (the extender reads
    `vgpu.io/memory` in these units)."""
    return sum(-(-c.memory_mib // MEMORY_UNIT_MIB) for c in pod.gpu_containers if c.memory_mib)


def _duration(lifetimes: dict[str, float], pod: PodRequest, longest: float) -> float:
    return min(max(lifetimes.get(pod.key, 1.0), 1.0), longest)
