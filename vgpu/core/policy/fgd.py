"""Fragmentation-gradient descent (Weng et al., USENIX ATC'23).

Place the pod where the node's expected fragmentation (see `fragmentation`) grows least; inside
the node, try every GPU that fits a fractional pod and keep the one with the smallest growth.

`FgdPolicy(quantize=True)` mirrors the paper's artifact exactly: the score is
``int(100 * sigmoid((F_before - F_after) / 1000))`` and equal top scores go to the first node in
order (see `baselines` for why). With ``quantize=False`` the raw growth is the score, so
ties are rarer and mean real equality.
"""

from __future__ import annotations

import math
from random import Random

from vgpu.core.capacity import candidates, host_fits
from vgpu.core.fragmentation import FragmentMeter, GpuKey
from vgpu.core.model import ContainerRequest, PodRequest
from vgpu.core.placement import Choice, choose, share_of
from vgpu.core.policy.interface import Evaluation, Policy
from vgpu.core.state import NodeState


def sigmoid_score(reduction: float) -> float:
    """The artifact's integer score for a fragmentation reduction (milli-GPU)."""
    x = reduction / 1000
    if x < -700:
        return 0.0
    return float(int(100 / (1 + math.exp(-x))))


def take_choice(ns: NodeState, pod: PodRequest, gpus: list[GpuKey]) -> tuple[Choice, int] | None:
    """Choose GPUs for a pod (whole-GPU or several containers) and subtract its shares from the
    per-GPU keys `gpus` in place: (choice, cores taken), or None if it does not fit.

    A pod without GPU containers takes nothing: ((), 0).
    """
    if not pod.gpu_containers:
        return (), 0
    choice = choose(ns, pod)
    if choice is None:
        return None
    taken = 0
    for c, positions in zip(pod.gpu_containers, choice, strict=True):
        for p in positions:
            cores, mem = share_of(ns, p, c)
            cid, fc, fm = gpus[p]
            gpus[p] = (cid, fc - cores, fm - mem)
            taken += cores
    return choice, taken


class FgdPolicy(Policy):
    """Least growth of expected fragmentation wins."""

    name = "fgd"
    random_ties = False

    def __init__(self, meter: FragmentMeter, *, quantize: bool = True, name: str = "fgd") -> None:
        self.meter = meter
        self.quantize = quantize
        self.name = name

    def _score(self, before: float, after: float) -> float:
        return sigmoid_score(before - after) if self.quantize else before - after

    def _gpus(self, ns: NodeState) -> list[GpuKey]:
        classes = self.meter.classes_of(ns)
        return list(zip(classes, ns.free_cores, ns.free_mem, strict=True))

    def evaluate(self, ns: NodeState, pod: PodRequest, rng: Random) -> Evaluation | None:
        if not host_fits(ns, pod):
            return None
        meter = self.meter
        gpus = self._gpus(ns)
        before = meter.of_key(meter.cpu_level(ns.cpu_free), tuple(sorted(gpus)))
        level = meter.cpu_level(ns.cpu_free - pod.cpu_milli)
        wanting = pod.gpu_containers
        if len(wanting) == 1 and not wanting[0].whole:
            return self._fractional(ns, pod, wanting[0], gpus, before, level)
        taken = take_choice(ns, pod, gpus)
        if taken is None:
            return None
        choice, _ = taken
        after = meter.of_key(level, tuple(sorted(gpus)))
        return Evaluation(self._score(before, after), choice)

    def _fractional(
        self,
        ns: NodeState,
        pod: PodRequest,
        c: ContainerRequest,
        gpus: list[GpuKey],
        before: float,
        level: int,
    ) -> Evaluation | None:
        cands = candidates(ns, c, pod.selector)
        if not cands:
            return None
        best_pos, best_score = -1, -math.inf
        seen: set[GpuKey] = set()
        for p in cands:
            if gpus[p] in seen:
                continue  # an identical GPU earlier in index order already scored the same
            seen.add(gpus[p])
            cores, mem = share_of(ns, p, c)
            cid, fc, fm = gpus[p]
            gpus[p] = (cid, fc - cores, fm - mem)
            score = self._score(before, self.meter.of_key(level, tuple(sorted(gpus))))
            gpus[p] = (cid, fc, fm)
            if score > best_score:
                best_pos, best_score = p, score
        return Evaluation(best_score, ((best_pos,),))
