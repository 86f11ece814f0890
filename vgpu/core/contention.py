"""Cores under contention: the correction that gives each busy container its allowance for real.

The interposer holds a container to its allowance by the busy time its own CUDA events measure.
While other processes share the GPU (time-sliced, without MPS) those events also measure the
other contexts' turns (NVIDIA documents that the time between two events may include other
work), so the container is held to less than its allowance and the GPU idles. The in-process
events stay the fast inner loop; the agent, which sees every process's real share through NVML,
runs the slow outer loop here: each container's `scale` (permille: how much measured busy time
one percent of allowance buys, 1000 = the measure as it is) is corrected until its real share
equals its allowance.

The rule, per container and GPU, every step:

- the scale is multiplied by (allowance / real share) ** GAIN, each step's factor held within
  [1 / MAX_STEP, MAX_STEP]; a real share within DEADBAND points of the allowance leaves it as it
  is (sampling noise is not chased). Alone on its GPU too: its events then measure only its own
  work, but each stream's span of it, so a container on several streams at once measures a
  multiple of its wall time there as well, and a neutral scale would hold it at its allowance
  divided by its overlap for good;
- the scale stays within [SCALE_NEUTRAL, ceiling(allowance)]: one stream's events never measure
  more than the wall time (its kernels' spans follow one another), but a container running
  kernels on several streams at once is charged each stream's span, so its measure can be a
  multiple of the wall time and a budget of one period of measured time would hold it below its
  allowance for good. The ceiling buys back up to OVERLAP streams at once (OVERLAP periods of
  measured time, within the library's SCALE_MAX); a scale above that would only wind up. The
  cost: a scale wound up while its container wanted less than its allowance can be up to OVERLAP
  times higher than under a one-period ceiling, so once the container turns busy it comes back
  down in a few more steps (a 30 of 30/70 from its ceiling: 11 corrections of the model in
  tests/core/test_contention.py before it is within a point, 7 with one period). A faster fall than rise was tried and
  left the GPU idler: with noisy shares an asymmetric law settles below the allowance. (The
  interposer has since charged overlapping spans of one context once, vgpu-core/README.md,
  "Several streams"; the ceiling stays for what that misses, e.g. several contexts of one
  process on one GPU, whose spans it does not join);
- a container that got the whole GPU (within DEADBAND) falls by the largest step: its share is
  saturated, so (allowance / real share) understates how far past its allowance its scale lets
  it go; alone, a 90 wound up to its ceiling would otherwise take 30 corrections, most of them
  at 100 (3 with this rule, on the model);
- an inactive container (no recent launch) goes back to neutral;
- while some of the GPU's utilisation belongs to no known container (a process the agent cannot
  attribute, perhaps one hiding from it), no scale on that GPU rises: a container that hid its
  own processes would otherwise look starved and be given more.

So a scale only rises while the container got less than its allowance and only falls while it
got more: the correction never pushes a container past its allowance (nor its limit, which
bounds the allowance), and never holds a busy container below it. A container that launches but
needs less than its allowance keeps a raised scale (it wanted nothing more); should it turn busy,
it may run above its allowance for the few steps the decrease takes (each step divides the
excess by up to MAX_STEP). The same holds when its neighbours leave: a scale raised against
their time slices comes down by the law, not at once.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

SCALE_NEUTRAL = 1000
SCALE_MAX = 8000
GAIN = 0.5  # 0.35 was slower to settle: a 50/50 pair on the stand-in up to 4 points apart after 4 s
MAX_STEP = 2.0
OVERLAP = 4  # streams of one container running at once that the scale makes up for
DEADBAND = 1.0  # points of the GPU: NVML reports whole percents


@dataclass(frozen=True, slots=True)
class Observed:
    """What the agent saw of one container on one GPU over the last window.

    `real` is the container's share of the GPU (percent, all its processes together, from the
    driver's per-process utilisation); `attributed` whether every process that ran there belongs
    to a known container. Whether neighbours ran there changes nothing: alone or not, the
    container's events can measure more than its real share."""

    allowance: int
    real: float
    active: bool
    attributed: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.allowance <= 100:
            raise ValueError(f"allowance {self.allowance}: need 0 < allowance <= 100")
        if not 0.0 <= self.real <= 100.0:
            raise ValueError(f"real share {self.real}: need 0 <= share <= 100 (percent)")


def next_scale(scale: int, seen: Observed) -> int:
    """The scale to write for the next window, from the one in force during `seen`."""
    if not seen.active or seen.allowance >= 100:
        return SCALE_NEUTRAL  # nothing is measured (or nothing is held back)
    if abs(seen.real - seen.allowance) <= DEADBAND:
        return _bounded(scale, seen.allowance)
    ratio = seen.allowance / max(seen.real, seen.allowance / MAX_STEP)
    factor = min(MAX_STEP, max(1 / MAX_STEP, ratio**GAIN))
    if seen.real >= 100 - DEADBAND:
        factor = 1 / MAX_STEP  # the whole GPU: how far past its allowance it would go is unknown
    if not seen.attributed:
        factor = min(1.0, factor)
    return _bounded(round(scale * factor), seen.allowance)


def ceiling(allowance: int) -> int:
    """The largest useful scale: allowance * scale reaches OVERLAP periods of measured time (as
    many as OVERLAP streams at once measure)."""
    return min(SCALE_MAX, max(SCALE_NEUTRAL, OVERLAP * 100 * SCALE_NEUTRAL // allowance))


def _bounded(scale: int, allowance: int) -> int:
    return min(ceiling(allowance), max(SCALE_NEUTRAL, scale))
