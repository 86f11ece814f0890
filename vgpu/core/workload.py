"""The target workload: a probability distribution over task shapes.

FGD (Weng et al., USENIX ATC'23) measures a node's fragmentation *from the point of view of the
tasks expected to arrive*. A shape is what placement depends on (CPU, per-GPU cores, GPU count,
GPU memory ask, GPU-type constraint); the distribution keeps the most popular shapes until they
cover a popularity threshold (95 % by default) and renormalises them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.core.model import ANY_GPU, GpuSelector, PodRequest


@dataclass(frozen=True, slots=True)
class TaskShape:
    """A task shape: CPU, per-GPU cores (100 = whole), GPU count, memory ask, allowed GPUs."""

    cpu_milli: int
    cores: int
    gpus: int
    memory_mib: int | None = None
    selector: GpuSelector = ANY_GPU


@dataclass(frozen=True, slots=True)
class Workload:
    """Task shapes with their probabilities (summing to 1)."""

    shapes: tuple[TaskShape, ...]
    probs: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.probs):
            raise ValueError("shapes and probs differ in length")


def shape_of(pod: PodRequest) -> TaskShape:
    """The shape of a pod (its largest GPU container stands for the pod's GPU ask)."""
    wanting = pod.gpu_containers
    if not wanting:
        return TaskShape(pod.cpu_milli, 0, 0, None, pod.selector)
    main = max(wanting, key=lambda c: c.cores)
    per_gpu = 100 if main.whole else main.cores
    gpus = sum(c.gpus for c in wanting)
    return TaskShape(pod.cpu_milli, per_gpu, gpus, main.memory_mib, pod.selector)


def workload_from(pods: Iterable[PodRequest], *, coverage: float = 0.95) -> Workload:
    """The most popular shapes of `pods` covering `coverage` of them, renormalised.

    Ties in popularity keep first-seen order, so the result is deterministic for a given input.
    """
    counts = Counter(shape_of(p) for p in pods)
    return workload_from_counts(counts, coverage=coverage)


def workload_from_counts(counts: Counter[TaskShape], *, coverage: float = 0.95) -> Workload:
    """As `workload_from`, from shape counts."""
    total = sum(counts.values())
    if total == 0:
        return Workload((), ())
    kept: list[tuple[TaskShape, int]] = []
    covered = 0
    for shape, n in counts.most_common():
        kept.append((shape, n))
        covered += n
        if covered >= coverage * total:
            break
    mass = sum(n for _, n in kept)
    return Workload(tuple(s for s, _ in kept), tuple(n / mass for _, n in kept))


DEFAULT_WORKLOAD = Workload(
    tuple(
        TaskShape(4000, c, g)
        for c, g in ((10, 1), (25, 1), (50, 1), (100, 1), (100, 2), (100, 4), (100, 8))
    ),
    (0.2, 0.2, 0.2, 0.2, 0.1, 0.05, 0.05),
)
"""Target task shapes for workload-aware policies (FGD) until the operator configures one: the
extender's, and the web view's where a waiting pod could go."""
