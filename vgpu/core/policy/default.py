"""vgpu's default placement policy: FGD's measure, learned online, with CPU and packing terms.

The core is fragmentation-gradient descent (see `fgd`): place the pod where the node's expected
fragmentation over the target workload grows least, trying every GPU of the node that fits a
share. What this policy adds, each measured on the openb trace (docs/research/policies.md):

* The workload is *learned online* from the pods the scheduler is asked to place (a
  `WorkloadLearner`, optionally seeded with a prior), because a live extender has no trace.
* Free GPU that the node's free CPU cannot feed at the workload's CPU:GPU ratio counts as
  fragment too (*CPU stranding*): FGD only notices CPU when a whole shape stops fitting.
* On a GPU that fits a share, what is left after packing it with copies of that share counts as
  fragment too (*residue*), so a 470 that leaves 60 unusable is told from one that leaves 530.
* GPU models that GPU-type-constrained pods claim (`model_demand`) are kept for them: stranding weighs
  less there, and a pod that could run elsewhere pays for taking such a GPU.
* Growths within one of FGD's integer score buckets are equal, and the tie goes to the first node
  in node order, as in the paper's artifact. (Ties to the *fullest* node, `tie=packed`, score
  the same on openb default but lose 1.8 points on gpuspec10: fullness favours small nodes, whose
  scarce GPU models the constrained pods then miss.)

Both GPU axes count: a GPU fits a shape only with the cores *and* the memory, and residues count
copies limited by either axis.
"""

from __future__ import annotations

import math
from itertools import count
from random import Random

from vgpu.core.capacity import candidates, host_fits
from vgpu.core.fragmentation import FragmentMeter, GpuKey
from vgpu.core.learning import WorkloadLearner
from vgpu.core.model import Node, PodRequest
from vgpu.core.model_demand import ModelDemand
from vgpu.core.placement import share_of
from vgpu.core.policy.fgd import sigmoid_score, take_choice
from vgpu.core.policy.interface import Evaluation, Policy
from vgpu.core.policy.knobs import DefaultConfig
from vgpu.core.state import NodeState
from vgpu.core.stranding import Feed, feed
from vgpu.core.units import CORES_PER_GPU
from vgpu.core.workload import Workload

_MISSING = object()
MEMO_LIMIT = 4096
"""Evaluations kept for nodes-in-the-same-state reuse before the memo is cleared: about 2 KB
each, so at most ~8 MiB, and room for one filter over 4,096 nodes in distinct states. (At
200,000 the memo grew with pods scheduled to ~400 MiB before it cleared.)"""
_TOKENS = count()
"""Unique keys for per-node memos (one per meter, so a re-learned workload never hits old ones)."""


class DefaultPolicy(Policy):
    """Least growth of expected fragmentation (CPU- and residue-aware, bucketed), learned online."""

    name = "default"
    random_ties = False
    learns_online = True

    def __init__(
        self, workload: Workload, config: DefaultConfig | None = None, *, name: str = "default"
    ) -> None:
        self.config = config or DefaultConfig()
        self.name = name
        self.learns_online = self.config.online
        self.learner: WorkloadLearner | None = None
        if self.config.online:
            self.learner = WorkloadLearner(workload, prior_weight=self.config.prior_weight)
            workload = self.learner.workload
        self.meter = FragmentMeter(workload, residue_weight=self.config.residue_weight)
        self.generation = 0
        self._base_key = ("default-base", next(_TOKENS))
        self._feeds: dict[tuple[int, ...], Feed] = {}
        self.demand = ModelDemand(reserve=self.config.reserve, lo=self.config.reserve_lo)
        self._sigs: dict[str, tuple[Node, tuple[object, ...]]] = {}
        self._same: dict[tuple[object, ...], Evaluation | None] = {}

    def observe(self, pod: PodRequest) -> None:
        """Learn from a pod about to be placed (rebuilds the meter now and then), and recount
        the claims on GPU models when the workload or the inventory seen has changed."""
        learner = self.learner
        if learner is not None and learner.observe(pod):
            self.meter = FragmentMeter(learner.workload, residue_weight=self.config.residue_weight)
            self.demand.refresh(self.meter, learner.whole)
            self._stale()
        elif self.demand.dirty and self.config.typed:
            whole = learner.whole if learner is not None else self.meter.workload
            if self.demand.refresh(self.meter, whole):
                self._stale()

    def _stale(self) -> None:
        """Scores changed: forget every memoised evaluation (a new `generation`)."""
        self._feeds.clear()
        self.generation += 1
        self._same.clear()
        self._base_key = ("default-base", next(_TOKENS))

    def _primary(self, reduction: float) -> float:
        band = self.config.band
        if band <= 0:
            return sigmoid_score(reduction)
        return float(math.floor(reduction / band + 1e-9))

    def _feed(self, ns: NodeState) -> Feed:
        """How the node's free CPU feeds its free GPU, over the shapes that could run on it,
        weighted down where GPU-type-constrained shapes need the node's models (`_weight`)."""
        classes = self.meter.classes_of(ns)
        hit = self._feeds.get(classes)
        if hit is None:
            per_shape = self.config.strand == "shape"
            workload = self.meter.workload
            if not self.config.typed:
                hit = feed(workload, None, per_shape=per_shape)
            else:
                kinds = set(classes)
                allowed = [any(col) for col in zip(*map(self.meter.allowed, kinds), strict=True)]
                weight = self._weight(kinds, allowed)
                hit = feed(workload, allowed, per_shape=per_shape, weight=weight)
            self._feeds[classes] = hit
        return hit

    def _weight(self, kinds: set[int], allowed: list[bool]) -> float:
        """Stranding weight of a node with GPU classes `kinds` (on which shapes `allowed` run).

        1 where no type-constrained shape may run. Elsewhere the term's pull (CPU-light pods
        onto CPU-poor nodes) can hand GPUs that constrained pods need to pods that could run
        anywhere, which costs most where those pods claim most of a model
        (docs/research/policies.md, GPU-type constraints), so by default the weight falls with
        that claim (`pressures`).
        """
        rule = self.config.contested
        shapes = self.meter.workload.shapes
        if rule == "full" or not any(
            ok and not s.selector.is_any for ok, s in zip(allowed, shapes, strict=True)
        ):
            return 1.0
        if rule == "off":
            return 0.0
        claim = max(map(self.demand.of, kinds))
        if rule == "step":
            return 0.0 if claim >= 1 else 1.0
        return max(0.0, 1.0 - claim)

    def _reserve(self, pod: PodRequest, cid: int, cores: int) -> float:
        """Growth for taking `cores` of a GPU of class `cid` that constrained shapes claim
        (`model_demand`); 0 unless type-aware."""
        return self.demand.cost(pod.selector, cid, cores) if self.config.typed else 0.0

    def _stranded(self, ns: NodeState, cpu_free: int, free_cores: int) -> float:
        """Weighted free GPU (milli) that the free CPU cannot feed (see `stranding`)."""
        w = self.config.cpu_weight
        if not w or not ns.gpus:
            return 0.0
        return w * self._feed(ns).stranded(cpu_free, free_cores * 10)

    def _secondary(self, ns: NodeState, pod: PodRequest, used_after: int) -> float:
        if self.config.tie == "packed" and ns.gpus:
            return 0.999 * used_after / (len(ns.gpus) * CORES_PER_GPU)
        return 0.0

    def _base(self, ns: NodeState) -> tuple[list[GpuKey], float, int]:
        """The node's GPU keys, its fragmentation (with CPU stranding) and its used cores."""
        meter = self.meter
        gpus = list(zip(meter.classes_of(ns), ns.free_cores, ns.free_mem, strict=True))
        key = self._base_key
        hit = ns.cache.get(key)
        if hit is None:
            free = sum(ns.free_cores)
            before = meter.of_key(meter.cpu_level(ns.cpu_free), tuple(sorted(gpus)))
            before += self._stranded(ns, ns.cpu_free, free)
            hit = ns.cache[key] = (before, len(gpus) * CORES_PER_GPU - free)
        return gpus, hit[0], hit[1]  # type: ignore[index]

    def _signature(self, ns: NodeState) -> tuple[object, ...]:
        """What about a node's inventory placement depends on (not its name or GPU uuids)."""
        hit = self._sigs.get(ns.name)
        if hit is None or hit[0] is not ns.node:
            where = ns.positions
            sig = tuple(
                (
                    g.model,
                    g.memory_mib,
                    g.healthy,
                    g.numa,
                    tuple(sorted(where[u] for u in g.nvlink_peers if u in where)),
                )
                for g in ns.gpus
            )
            hit = self._sigs[ns.name] = (ns.node, sig)
            self.demand.note(ns.node)
        return hit[1]

    def evaluate(self, ns: NodeState, pod: PodRequest, rng: Random) -> Evaluation | None:
        # Nodes in the same state get the same answer: in a cluster of many identical machines
        # that saves most evaluations, notably right after a re-learned workload.
        key = (
            self._signature(ns),
            ns.cpu_free,
            pod.memory_mib <= ns.mem_free,
            tuple(ns.free_cores),
            tuple(ns.free_mem),
            pod.shape,
            _named(ns, pod),
        )
        hit = self._same.get(key, _MISSING)
        if hit is _MISSING:
            if len(self._same) >= MEMO_LIMIT:
                self._same.clear()
            hit = self._same[key] = self._evaluate(ns, pod)
        return hit  # type: ignore[return-value]

    def _evaluate(self, ns: NodeState, pod: PodRequest) -> Evaluation | None:
        if not host_fits(ns, pod):
            return None
        meter = self.meter
        gpus, before, used = self._base(ns)
        total = len(gpus) * CORES_PER_GPU
        cpu_after = ns.cpu_free - pod.cpu_milli
        level = meter.cpu_level(cpu_after)
        wanting = pod.gpu_containers
        if len(wanting) == 1 and not wanting[0].whole:
            return self._fractional(ns, pod, gpus, before, used)
        taken = take_choice(ns, pod, gpus)
        if taken is None:
            return None
        choice, cores = taken
        used += cores
        after = meter.of_key(level, tuple(sorted(gpus))) + self._stranded(
            ns, cpu_after, total - used
        )
        if cores and self.config.reserve:
            after += sum(
                self._reserve(pod, g[0], f - g[1])
                for f, g in zip(ns.free_cores, gpus, strict=True)
                if f != g[1]
            )
        return Evaluation(self._primary(before - after) + self._secondary(ns, pod, used), choice)

    def _fractional(
        self, ns: NodeState, pod: PodRequest, gpus: list[GpuKey], before: float, used: int
    ) -> Evaluation | None:
        """Try each distinct GPU that fits the share; keep the best (then fullest, then first)."""
        c = pod.gpu_containers[0]
        cands = candidates(ns, c, pod.selector)
        if not cands:
            return None
        meter = self.meter
        cpu_after = ns.cpu_free - pod.cpu_milli
        level = meter.cpu_level(cpu_after)
        stranded = self._stranded(ns, cpu_after, len(gpus) * CORES_PER_GPU - used - c.cores)
        fullest = self.config.gpu_tie == "fullest"
        best_pos, best = -1, (-math.inf, 0)
        seen: set[GpuKey] = set()
        for p in cands:
            cid, fc, fm = old = gpus[p]
            if old in seen:
                continue
            seen.add(old)
            cores, mem = share_of(ns, p, c)
            gpus[p] = (cid, fc - cores, fm - mem)
            after = meter.of_key(level, tuple(sorted(gpus))) + stranded
            if self.config.reserve:
                after += self._reserve(pod, cid, cores)
            gpus[p] = old
            key = (self._primary(before - after), -fc if fullest else 0)
            if key > best:
                best_pos, best = p, key
        return Evaluation(best[0] + self._secondary(ns, pod, used + c.cores), ((best_pos,),))


def _named(ns: NodeState, pod: PodRequest) -> tuple[int, ...] | None:
    """The node's GPUs a selector naming GPUs by UUID allows (None: it names none). Two nodes
    in the same state differ for such a pod: their UUIDs do (a pod placed on one named GPU was
    given the answer of another node in the same state, where it fits nowhere)."""
    sel = pod.selector
    if not (sel.include_uuids or sel.exclude_uuids):
        return None
    return tuple(p for p, gpu in enumerate(ns.gpus) if sel.allows(gpu))
