"""The policy interface: what every placement policy answers for a node and a pod.

A policy is a small object with `evaluate(node, pod, rng) -> Evaluation | None` (None: the pod
does not fit). Higher scores win. `cacheable` says the result depends only on the node's state and
the pod's shape, so callers may memoise it until the node changes. `random_ties` says equal top
scores are broken uniformly at random (what kube-scheduler's selectHost does) rather than by node
order. The policies themselves live beside it: the baselines (`baselines`), FGD (`fgd`),
the project's default (`default`), all built by name from a `PolicySpec` (`specs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random

from vgpu.core.capacity import host_fits
from vgpu.core.model import PodRequest
from vgpu.core.placement import Choice, GpuPicker, best_fit_pick, choose
from vgpu.core.state import NodeState


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A node's score for a pod and the GPUs the pod would take there."""

    score: float
    choice: Choice


class Policy:
    """Base policy: choose GPUs with `pick`, then score the node with `node_score`."""

    name = "base"
    cacheable = True
    random_ties = False
    generation = 0
    """Bumped when the policy's scoring changes (e.g. a re-learned workload): stale memos."""
    pick: GpuPicker = staticmethod(best_fit_pick)

    def observe(self, pod: PodRequest) -> None:
        """Learn from a pod the scheduler is asked to place (once per pod key; default: no-op)."""

    def evaluate(self, ns: NodeState, pod: PodRequest, rng: Random) -> Evaluation | None:
        """Score the node for the pod, or None if the pod does not fit."""
        if not host_fits(ns, pod):
            return None
        choice: Choice = ()
        if pod.wants_gpu:
            found = choose(ns, pod, self.pick)
            if found is None:
                return None
            choice = found
        return Evaluation(self.node_score(ns, pod, choice), choice)

    def node_score(self, ns: NodeState, pod: PodRequest, choice: Choice) -> float:
        """The node's score for the pod placed with `choice`."""
        raise NotImplementedError

    def finish(self, ns: NodeState, pod: PodRequest, ev: Evaluation, rng: Random) -> Choice:
        """The final GPU choice on the selected node (random policies draw here)."""
        return ev.choice
