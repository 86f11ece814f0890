"""The kubelet's topology manager as far as device plugins meet it, modelled from its source.

* pkg/kubelet/cm/devicemanager/topology_hints.go (`generateDeviceTopologyHints`): for a resource
  whose devices report NUMA nodes, a hint is every NUMA mask whose available devices (plus the
  container's reusable ones) cover the request; a hint is *preferred* when its width equals the
  narrowest mask that all the resource's healthy devices could cover it with. Devices without
  topology give no hint ("don't care"). A request nothing can cover gives an empty list.
* pkg/kubelet/cm/topologymanager/policy.go (`mergeFilteredHints`), policy_best_effort.go,
  policy_restricted.go, policy_single_numa_node.go, bitmask/bitmask.go (`IsNarrowerThan`): the
  providers' hints are merged by AND over one hint per resource (preferred only if all are);
  the best is a preferred one before a non-preferred one, then the narrowest, then the one with
  lower NUMA bits. `single-numa-node` keeps single-node hints only. `restricted` and
  `single-numa-node` reject the pod (TopologyAffinityError) when the best is not preferred;
  `best-effort` admits it anyway; `none` computes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


@dataclass(frozen=True)
class Hint:
    mask: frozenset[int]
    preferred: bool


def _masks(nodes: list[int]) -> Iterable[frozenset[int]]:
    for width in range(1, len(nodes) + 1):
        for combo in itertools.combinations(nodes, width):
            yield frozenset(combo)


def device_hints(
    numa: Mapping[str, int | None], available: Iterable[str], request: int
) -> list[Hint] | None:
    """The device manager's hints for one resource (None: the devices report no topology)."""
    if not numa or all(n is None for n in numa.values()):
        return None
    nodes = sorted({n for n in numa.values() if n is not None})
    usable = [d for d in available if numa.get(d) is not None]
    narrowest = min(
        (len(m) for m in _masks(nodes) if sum(1 for n in numa.values() if n in m) >= request),
        default=len(nodes),
    )
    return [
        Hint(m, len(m) == narrowest)
        for m in _masks(nodes)
        if sum(1 for d in usable if numa[d] in m) >= request
    ]


def _narrower(a: frozenset[int], b: frozenset[int]) -> bool:
    if len(a) != len(b):
        return len(a) < len(b)
    return sorted(a) < sorted(b)


def best_hint(
    policy: str, per_resource: list[list[Hint] | None], all_nodes: frozenset[int]
) -> tuple[Hint | None, bool]:
    """(the merged hint or None for no narrowing, whether the pod is admitted)."""
    if policy == "none":
        return None, True
    lists = [h for h in per_resource if h is not None]
    if not lists:
        return None, True
    best: Hint | None = None
    for combo in itertools.product(*lists):
        mask = frozenset(all_nodes)
        for h in combo:
            mask &= h.mask
        if not mask:
            continue
        merged = Hint(mask, all(h.preferred for h in combo))
        if policy == "single-numa-node" and len(mask) != 1:
            continue
        if (
            best is None
            or (merged.preferred and not best.preferred)
            or (merged.preferred == best.preferred and _narrower(merged.mask, best.mask))
        ):
            best = merged
    if best is None:
        best = Hint(all_nodes, False)
    admitted = policy == "best-effort" or best.preferred
    return best, admitted
