"""Building the arrival sequence of a replay, as the FGD paper's artifact does.

With seed s: the trace pods, sorted by name, are shuffled; then copies are drawn with replacement
from the name-sorted trace and appended (in draw order) until the next copy would take the total
GPU request past ``tune × cluster GPU capacity``. Like the artifact, the stop test adds the pod's
*per-GPU* share, so a multi-GPU draw can overshoot slightly; we keep that so the numbers compare.
Python's `random.Random(seed)` replaces Go's math/rand: sequences differ from the artifact's, the
statistics over seeds do not.
"""

from __future__ import annotations

from dataclasses import replace
from random import Random

from vgpu.core.ids import PodKey
from vgpu.core.model import PodRequest


def per_gpu_milli(pod: PodRequest) -> int:
    """The pod's GPU share per GPU in milli (1000 for whole GPUs, 0 for CPU-only)."""
    wanting = pod.gpu_containers
    if not wanting:
        return 0
    return max(1000 if c.whole else c.cores * 10 for c in wanting)


def arrivals(
    pods: tuple[PodRequest, ...], *, capacity_milli: int, tune: float, seed: int
) -> list[PodRequest]:
    """The replay order: shuffled originals, then sampled copies up to `tune` × capacity."""
    rng = Random(seed)
    ordered = sorted(pods, key=lambda p: p.key)
    sequence = list(ordered)
    rng.shuffle(sequence)
    total = sum(p.gpu_milli for p in sequence)
    target = tune * capacity_milli
    if not ordered or total >= target:
        return sequence
    if not any(p.gpu_milli for p in ordered):
        return sequence
    i = 0
    while True:
        pick = ordered[rng.randrange(len(ordered))]
        if total + per_gpu_milli(pick) > target:
            return sequence
        total += pick.gpu_milli
        sequence.append(replace(pick, key=PodKey(f"{pick.key}-tuned-{i}")))
        i += 1
