"""The default policy's knobs, each an ablation row in docs/research/policies.md.

Policy specs such as ``default:key=value,...`` (`specs.parse_policy`) reach them through
`DefaultConfig.parse`; bad input is an `InvalidRequest` naming the knob and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.core.errors import InvalidRequest

CONTESTED = ("pressure", "step", "off", "full")
"""Stranding weight rules on a node whose GPU model constrained shapes claim (`claims`)."""


@dataclass(frozen=True, slots=True)
class DefaultConfig:
    """The policy's knobs (each one is an ablation row in docs/research/policies.md)."""

    band: float = 0.0
    """Growths within one band (milli-GPU) count as equal; 0: FGD's integer sigmoid buckets."""
    tie: str = "order"
    """Secondary key among equal buckets: "order" (node order) or "packed" (fullest node)."""
    gpu_tie: str = "index"
    """Among equally good GPUs inside a node: "index" (lowest) or "fullest"."""
    online: bool = True
    """Learn the workload from observed pods (the given workload is then only a prior)."""
    prior_weight: float = 256.0
    """How many observed pods the prior is worth."""
    cpu_weight: float = 1.0
    """Weight of CPU stranding in the fragmentation (0: FGD's measure)."""
    residue_weight: float = 1.0
    """Weight of per-GPU residues after packing copies of each share (0: FGD's measure)."""
    typed: bool = True
    """CPU stranding only from the shapes that could run on the node's GPU models, and none on a
    node a GPU-type-constrained shape may use (0: all shapes, every node)."""
    strand: str = "mean"
    """CPU stranding against the shapes' mean CPU:GPU ratio ("mean") or each shape's ("shape")."""
    contested: str = "pressure"
    """With `typed`, the stranding weight on a node that a GPU-type-constrained shape may use:
    "pressure" (1 minus the share of its GPU model's capacity that constrained shapes claim,
    floored at 0), "step" (0 once they claim it all, else 1), "off" (0) or "full" (1)."""
    reserve: float = 1.0
    """With `typed`, the growth added per milli-GPU a pod takes on a GPU model that
    GPU-type-constrained shapes claim in full (pressure >= 1), beyond the least claimed model
    the pod could use (0: none)."""
    reserve_lo: float = 0.25
    """Pressure from which `reserve` ramps up linearly to its full value at pressure 1
    (1: a step at 1)."""

    @classmethod
    def parse(cls, text: str) -> DefaultConfig:
        """Knobs from ``"key=value,key=value"`` (as in ``--policy default:cpu_weight=0``)."""
        values: dict[str, object] = {}
        fields = cls.__dataclass_fields__
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, _, raw = part.partition("=")
            if key not in fields or not raw:
                raise InvalidRequest(
                    "policy",
                    f"bad default-policy option {part!r}",
                    f"use key=value with keys {', '.join(fields)}",
                )
            kind = fields[key].type
            try:
                values[key] = (
                    raw in ("1", "true", "yes")
                    if kind == "bool"
                    else float(raw)
                    if kind == "float"
                    else raw
                )
            except ValueError:
                raise InvalidRequest(
                    "policy", f"{key}={raw!r} is not a number", "use e.g. 0.5"
                ) from None
        config = cls(**values)  # type: ignore[arg-type]
        if (
            config.tie not in ("packed", "order")
            or config.gpu_tie not in ("index", "fullest")
            or config.strand not in ("mean", "shape")
            or config.contested not in CONTESTED
        ):
            raise InvalidRequest(
                "policy",
                f"bad choice in {text!r}",
                "tie=packed|order, gpu_tie=index|fullest, strand=mean|shape, "
                "contested=" + "|".join(CONTESTED),
            )
        return config
