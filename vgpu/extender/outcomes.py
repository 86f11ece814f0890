"""A node's filter answer for a pod shape (`Outcome`), and what the extender's per-shape answer sets
are keyed by: the filter and prioritize verbs (`service`) share these."""

from __future__ import annotations

from typing import NamedTuple

from vgpu.api.podspec import PodSpec
from vgpu.core.fit import Code, Verdict
from vgpu.core.model import Assignment
from vgpu.extender.answers import FeedView
from vgpu.extender.filter_answers import FilterAnswers


class Outcome(NamedTuple):
    """A node's filter answer for a pod shape; `FIT` (compared by identity) if it fits."""

    code: str
    """The core's `Code` value (or "unknown-node"), counted in the rejection metrics."""
    unresolvable: bool
    """True when preempting pods would not help (GPU type, count, missing inventory)."""
    reason: str


FIT = Outcome(Code.FITS.value, False, "")
UNKNOWN = Outcome("unknown-node", False, "node is not in the vgpu extender's cache yet")
NO_GPU = Code.NO_GPU.value


def outcome_of(verdict: Verdict) -> Outcome:
    if verdict.code is Code.FITS:
        return FIT
    return Outcome(verdict.code.value, not verdict.resolvable, str(verdict))


def placed_outcome(placed: Assignment | Verdict) -> Outcome:
    return outcome_of(placed) if isinstance(placed, Verdict) else FIT


def filter_answers(feed: FeedView) -> FilterAnswers[Outcome]:
    return FilterAnswers(feed, FIT)


def shape_key(spec: PodSpec) -> tuple[object, ...]:
    """What a pod's answers depend on besides the node: its shape, and for invariant-I
    placements its container names (reasons quote them) and memory blocks."""
    req = spec.request
    blocks = tuple(sorted(spec.memory_blocks.items()))
    roles = tuple(sorted((name, role.value) for name, role in spec.roles.items()))
    return (req.shape, tuple(c.name for c in req.containers), blocks, roles, spec.cores_limit)
