"""Elastic cores: how much of one GPU's busy time each container may use right now.

A container is guaranteed `cores` (percent of the GPU) and may grow to `limit`
(`vgpu.io/cores-limit`) while the GPU has idle capacity, as in GaiaGPU. The node agent knows every
share on a GPU and which containers launched kernels recently (the `activity` file the
interposer writes); every refill period it recomputes the allowances and writes them into the
containers' limits files, and the interposer throttles each container to its allowance.

The rule, per GPU:

- every container gets at least its guarantee, whatever its neighbours do (an idle container is
  held at its guarantee, so that when it starts it is entitled to exactly that at once);
- the capacity that active containers' guarantees leave free (idle neighbours' guarantees
  included: they are lent, not reserved) is shared among the active containers that are below
  their limit, max-min fair (equal extra points, each capped at its limit; integer points, the
  remainder to the lowest keys first, so the result is deterministic);
- so when a neighbour becomes active, the lent points return within one period, and the active
  containers' allowances never add up to more than the GPU when the guarantees fit in it.

Pure: no I/O, no clock (activity is an input).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

GPU_CAPACITY = 100


@dataclass(frozen=True, slots=True)
class ElasticShare:
    """One container's share of one GPU: `key` names it (unique per GPU)."""

    key: str
    cores: int
    limit: int
    active: bool

    def __post_init__(self) -> None:
        if not 0 < self.cores <= self.limit <= GPU_CAPACITY:
            raise ValueError(
                f"share {self.key}: need 0 < cores ({self.cores}) <= limit ({self.limit}) <= 100"
            )


def allowances(shares: Sequence[ElasticShare], capacity: int = GPU_CAPACITY) -> dict[str, int]:
    """Each share's allowance on one GPU (by key)."""
    result = {s.key: s.cores for s in shares}
    active = sorted((s for s in shares if s.active), key=lambda s: s.key)
    spare = capacity - sum(s.cores for s in active)
    if spare <= 0 or not active:
        return result
    room = {s.key: s.limit - s.cores for s in active}
    level = _water_level(list(room.values()), spare)
    for s in active:
        result[s.key] += min(room[s.key], level)
    left = spare - sum(min(r, level) for r in room.values())
    for s in active:  # one more point each, lowest keys first, to those still below their limit
        if left > 0 and room[s.key] > level:
            result[s.key] += 1
            left -= 1
    return result


def _water_level(rooms: list[int], spare: int) -> int:
    """The largest equal extra every share gets (capped by its room) within `spare` points."""
    low, high = 0, max(rooms)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(r, mid) for r in rooms) <= spare:
            low = mid
        else:
            high = mid - 1
    return low


def is_active(last_launch_ns: int, now_ns: int, window_ns: int) -> bool:
    """Whether a container that last launched at `last_launch_ns` (0: never) wants its GPU."""
    return last_launch_ns != 0 and now_ns - last_launch_ns < window_ns
