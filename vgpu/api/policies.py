"""The policies that place pods: the operator's default (`--policy`) and those a pod may name
with the `vgpu.io/policy` annotation (`--allow-pod-policy`).

One book for every reader of a pod's policy: the extender places with it, and the web view's
"where it could go" (`vgpu.inspect.web.where`) asks it the same question, so a pod naming a
policy the operator did not allow gets the extender's own refusal there too.
"""

from __future__ import annotations

from collections.abc import Iterable

from vgpu.api.podspec import POLICY as POLICY_ANNOTATION
from vgpu.core.errors import InvalidRequest
from vgpu.core.policy.interface import Policy
from vgpu.core.policy.specs import PolicySpec, make_policy
from vgpu.core.workload import DEFAULT_WORKLOAD, Workload


class PolicyBook:
    """The default policy and the policies pods may ask for by name (`vgpu.io/policy`), each
    built once at start-up. Pods choose only among what the operator allowed
    (`--allow-pod-policy`), so no pod can make the extender build (and keep) a policy of its
    own: memory stays bounded by the operator's list."""

    def __init__(
        self,
        default: PolicySpec,
        allowed: Iterable[PolicySpec] = (),
        workload: Workload = DEFAULT_WORKLOAD,
    ) -> None:
        self.default = make_policy(default, workload)
        self._allowed: dict[str, Policy] = {default.name: self.default}
        for spec in allowed:
            if spec.name not in self._allowed:
                self._allowed[spec.name] = make_policy(spec, workload)

    @property
    def names(self) -> list[str]:
        """The policies pods may name."""
        return list(self._allowed)

    def get(self, name: str) -> Policy:
        """The policy a pod names; raises `InvalidRequest` for one the operator did not allow."""
        policy = self._allowed.get(name)
        if policy is None:
            shown = name if len(name) <= 64 else name[:61] + "..."
            raise InvalidRequest(
                f"metadata.annotations[{POLICY_ANNOTATION}]",
                f"policy {shown!r} is not allowed for pods",
                "use one of " + ", ".join(self._allowed) + " or drop the annotation "
                "(the operator allows more with --allow-pod-policy)",
            )
        return policy
