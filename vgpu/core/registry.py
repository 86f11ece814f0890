"""Policies by name, built once at start-up.

Names: random, dotprod, gpuclustering, gpupacking, bestfit, fgd (the paper's artifact), spread,
binpack, shape, and `default`, the project's default policy (`policy_default`). The default
policy's knobs can be set for experiments as ``default:key=value,...`` (e.g.
``default:cpu_weight=0``); such a spec is its own policy name in results.
"""

from __future__ import annotations

from collections.abc import Callable

from vgpu.core.errors import InvalidRequest
from vgpu.core.fgd import FgdPolicy
from vgpu.core.fragmentation import FragmentMeter
from vgpu.core.policies import (
    BestFitPolicy,
    BinpackPolicy,
    DotProductPolicy,
    GpuClusteringPolicy,
    GpuPackingPolicy,
    Policy,
    RandomPolicy,
    ShapePolicy,
    SpreadPolicy,
)
from vgpu.core.policy_default import DefaultConfig, DefaultPolicy
from vgpu.core.workload import Workload

PAPER_POLICIES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd")
POLICY_NAMES = (*PAPER_POLICIES, "spread", "binpack", "shape", "default")


_BUILDERS: dict[str, Callable[[Workload], Policy]] = {
    "random": lambda w: RandomPolicy(),
    "dotprod": lambda w: DotProductPolicy(),
    "gpuclustering": lambda w: GpuClusteringPolicy(),
    "gpupacking": lambda w: GpuPackingPolicy(),
    "bestfit": lambda w: BestFitPolicy(),
    "fgd": lambda w: FgdPolicy(FragmentMeter(w), quantize=True),
    "spread": lambda w: SpreadPolicy(),
    "binpack": lambda w: BinpackPolicy(),
    "shape": lambda w: ShapePolicy(),
    "default": lambda w: DefaultPolicy(w),
}


def is_policy_name(name: str) -> bool:
    """Whether `make_policy` knows the name (or `default:...` spec)."""
    return name in _BUILDERS or name.startswith("default:")


def learns_online(name: str) -> bool:
    """Whether the named policy learns its workload from observed pods (then the workload given
    to `make_policy` is only a prior, and may be empty)."""
    if name == "default":
        return True
    return name.startswith("default:") and DefaultConfig.parse(name[8:]).online


def make_policy(name: str, workload: Workload) -> Policy:
    """Build a policy by name for a target workload (used by workload-aware policies)."""
    if name.startswith("default:"):
        return DefaultPolicy(workload, DefaultConfig.parse(name[8:]), name=name)
    try:
        return _BUILDERS[name](workload)
    except KeyError:
        raise InvalidRequest(
            "policy", f"unknown policy {name!r}", "choose one of " + ", ".join(POLICY_NAMES)
        ) from None
