"""Policies by name: a specification parsed once at the edge, then built from it.

Names: random, dotprod, gpuclustering, gpupacking, bestfit, fgd (the paper's artifact), spread,
binpack, shape, and `default`, the project's default policy (its module: `default`). The default
policy's knobs can be set for experiments as ``default:key=value,...`` (e.g.
``default:cpu_weight=0``); such a spec is its own policy name in results.

`parse_policy` turns the text into a `PolicySpec` (raising `InvalidRequest` naming the flag or
annotation); `vgpu simulate`, the simulator's jobs and the extender carry that value, never the
text, and `make_policy` builds a policy from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vgpu.core.errors import InvalidRequest
from vgpu.core.fragmentation import FragmentMeter
from vgpu.core.policy.baselines import (
    BestFitPolicy,
    BinpackPolicy,
    DotProductPolicy,
    GpuClusteringPolicy,
    GpuPackingPolicy,
    RandomPolicy,
    ShapePolicy,
    SpreadPolicy,
)
from vgpu.core.policy.default import DefaultPolicy
from vgpu.core.policy.fgd import FgdPolicy
from vgpu.core.policy.interface import Policy
from vgpu.core.policy.knobs import DefaultConfig
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


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A parsed policy specification: its text (the name in results), base name and knobs."""

    name: str
    base: str
    config: DefaultConfig | None = None
    """The default policy's knobs when given as ``default:...`` (None: the plain policy)."""

    @property
    def learns_online(self) -> bool:
        """Whether the policy learns its workload from observed pods (then the workload given
        to `make_policy` is only a prior, and may be empty)."""
        return self.base == "default" and (self.config or DefaultConfig()).online

    @property
    def plans_gangs(self) -> bool:
        """Whether gangs are planned all-or-nothing by default (the project's own policy)."""
        return self.base == "default"


def parse_policy(text: str, field: str = "policy") -> PolicySpec:
    """The specification `text` names; raises `InvalidRequest` naming `field` if it is bad."""
    base, colon, knobs = text.partition(":")
    if colon and base == "default":
        try:
            return PolicySpec(text, base, DefaultConfig.parse(knobs))
        except InvalidRequest as err:
            raise InvalidRequest(field, err.problem, err.fix) from None
    if colon or text not in _BUILDERS:
        raise InvalidRequest(
            field, f"unknown policy {text!r}", "choose one of " + ", ".join(POLICY_NAMES)
        )
    return PolicySpec(text, text)


def make_policy(spec: PolicySpec | str, workload: Workload) -> Policy:
    """Build a policy for a target workload (used by workload-aware policies). A string is
    parsed here, for one-off callers; the commands parse once and pass the `PolicySpec`."""
    if isinstance(spec, str):
        spec = parse_policy(spec)
    if spec.config is not None:
        return DefaultPolicy(workload, spec.config, name=spec.name)
    return _BUILDERS[spec.base](workload)
