"""Who chooses the GPU inside the chosen node: our policy, or the in-tree DRA allocator.

Under Dynamic Resource Allocation the kube-scheduler's DRA plugin allocates each ResourceClaim;
an extender can only steer the *node*. The allocator (k8s.io/dynamic-resource-allocation,
`structured/internal/incubating/allocator_incubating.go`, `allocateOne`, used when consumable
capacity is on) walks pools sorted by ID, their slices, and the devices of each slice *in the
order the driver published them*, and takes the first device that matches the request's
selectors and still has the requested capacity (`CmpRequestOverCapacity`); there is no scoring.

Device choices modelled here, for `vgpu simulate --device-choice`:

* ``extender``: the policy's own GPU choice (device-plugin mode, or a DRA design that allocates
  the claim itself).
* ``dra``: first fit in a static slice order, GPU index order (what a driver publishes when it
  lists its GPUs once).
* ``dra-sorted``: first fit in a slice the driver keeps ordered fullest first (fewest free cores,
  then memory, then index), re-published after every allocation on its node. First fit over that
  order is best fit; the model assumes the re-published slice is seen before the next pod.

Capacity is checked with the core's own fit rule (`capacity.candidates`) and charged by the
core's own take-and-undo loop (`placement.take_in_turn`), so the comparison isolates the choice
of device: a claim is taken to ask exactly what our model charges. A pod's claims are
allocated in container order, each greedily; when greedy first fit leaves no room for a later
claim (the real allocator would backtrack), the policy's choice stands in.
"""

from __future__ import annotations

from collections.abc import Callable

from vgpu.core.model import ContainerRequest, PodRequest
from vgpu.core.placement import Choice, take_in_turn
from vgpu.core.state import NodeState

DEVICE_CHOICES = ("extender", "dra", "dra-sorted")
DeviceChooser = Callable[[NodeState, PodRequest, Choice], Choice]


def _static(ns: NodeState, positions: list[int]) -> list[int]:
    return sorted(positions)


def _fullest_first(ns: NodeState, positions: list[int]) -> list[int]:
    return sorted(positions, key=lambda p: (ns.free_cores[p], ns.free_mem[p], p))


def first_fit(
    ns: NodeState, pod: PodRequest, order: Callable[[NodeState, list[int]], list[int]]
) -> Choice | None:
    """The allocator's greedy choice for the pod's claims (container order), or None."""

    def first(ns: NodeState, c: ContainerRequest, cands: list[int]) -> tuple[int, ...] | None:
        count = c.gpus if c.whole else 1
        return tuple(order(ns, cands)[:count]) if len(cands) >= count else None

    return take_in_turn(ns, pod, range(len(pod.gpu_containers)), first)


def chooser(name: str) -> DeviceChooser | None:
    """The device chooser for a `--device-choice` name; None keeps the policy's choice."""
    if name not in DEVICE_CHOICES:
        raise ValueError(f"unknown device choice {name!r}")
    if name == "extender":
        return None
    order = _static if name == "dra" else _fullest_first

    def choose(ns: NodeState, pod: PodRequest, policy_choice: Choice) -> Choice:
        return first_fit(ns, pod, order) or policy_choice

    return choose
