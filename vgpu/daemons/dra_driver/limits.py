"""The driver memory backend in the DRA driver: `NodePrepareResources` sets the driver's
memory limit on the cgroup of each pod the claim is reserved for (`vgpu.dra.pod_limits` says
why then and how much), before the claim counts as prepared.

Fail closed, as the node agent's PreStart: a limit that cannot be set refuses the claim with a
message naming the cause (the kubelet shows it on the pod and retries), and a claim none of
whose pods has a cgroup here is refused too, since the pod being started must have one by now.
The pod cgroup's removal clears its limits (NVML reference, `nvmlSetMemoryLimits_v1_t`), so
unprepare has nothing to clear.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vgpu.adapters.dmem import LimitError, pod_cgroup
from vgpu.adapters.kube.calls import KubeError
from vgpu.adapters.kube.dra_calls import DraKubeApi
from vgpu.core.errors import InvalidRequest
from vgpu.dra.pod_limits import PodRef, pod_claim_names, pod_limits, reserved_pods
from vgpu.node.driver_limits import Limits
from vgpu.node.grants import Refusal
from vgpu.node.model import GpuInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ClaimLimits:
    """Sets the limits of a claim's pods (module doc)."""

    kube: DraKubeApi
    limits: Limits
    cgroupfs: Path
    soft: bool = False

    def apply(
        self,
        claim: Mapping[str, Any],
        pool: str,
        gpus: Mapping[int, GpuInfo],
        *,
        missing_ok: bool = False,
    ) -> Refusal | None:
        """Set the limits; a Refusal names what failed. `missing_ok`: a claim none of whose
        pods has a cgroup here is no failure (a later pass: they ended)."""
        meta = claim.get("metadata") or {}
        where = f"claim {meta.get('namespace')}/{meta.get('name')}"
        pods = [(ref, pod_cgroup(ref.uid, self.cgroupfs)) for ref in reserved_pods(claim)]
        here = [(ref, cgroup) for ref, cgroup in pods if cgroup is not None]
        if not here and missing_ok:
            return None
        if not here:
            names = ", ".join(ref.name for ref, _ in pods) or "none reserved"
            return Refusal(
                f"{where}: no pod of the claim ({names}) has a cgroup under {self.cgroupfs} "
                "(looked for the systemd and cgroupfs layouts), so the driver's memory limit "
                "cannot be set"
            )
        for ref, cgroup in here:
            refused = self.apply_pod(claim, ref, cgroup, pool, gpus)
            if refused is not None:
                return Refusal(f"{where}: {refused}")
        return None

    def apply_pod(
        self,
        claim: Mapping[str, Any],
        ref: PodRef,
        cgroup: Path,
        pool: str,
        gpus: Mapping[int, GpuInfo],
    ) -> str | None:
        """Set one pod's limits on `cgroup`; what failed, or None."""
        namespace = str((claim.get("metadata") or {}).get("namespace") or "")
        try:
            claims = self._claims_of(namespace, ref, claim)
            memory = pod_limits(claims, pool, gpus)
        except (KubeError, InvalidRequest) as e:
            return f"cannot read pod {ref.name}'s claims: {e}"
        for uuid, hard in memory.items():
            try:
                self.limits.set(uuid, cgroup, hard=hard, soft=hard if self.soft else 0)
            except LimitError as e:
                return (
                    f"cannot set the driver's memory limit of {hard} bytes on GPU {uuid} for "
                    f"pod {ref.name} ({cgroup}): {e}"
                )
        log.info("pod %s: driver memory limits set on %s: %s", ref.name, cgroup, memory)
        return None

    def _claims_of(
        self, namespace: str, ref: PodRef, claim: Mapping[str, Any]
    ) -> list[Mapping[str, Any]]:
        """The pod's claims as the API server has them (this one as the kubelet named it)."""
        pod = self.kube.get_pod(namespace, ref.name)
        if (pod.get("metadata") or {}).get("uid") != ref.uid:
            raise KubeError(f"pod {namespace}/{ref.name} is no longer UID {ref.uid}")
        name = str((claim.get("metadata") or {}).get("name") or "")
        return [
            claim if other == name else self.kube.get_resource_claim(namespace, other)
            for other in sorted({name, *pod_claim_names(pod)})
        ]
