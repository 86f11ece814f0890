"""Placement policies: how a node is scored for a pod, and which of its GPUs are taken.

`interface` (`Policy`, `Evaluation`: what every policy answers), `baselines` (the FGD paper's
baselines and the classic Kubernetes strategies), `fgd` (fragmentation-gradient descent, the
paper's artifact), `default` (the project's default policy) with its knobs in `knobs`, and
`specs` (a `PolicySpec` parsed once at the edge and the policy built from it by name). Pure, as
the rest of `vgpu.core`.
"""
