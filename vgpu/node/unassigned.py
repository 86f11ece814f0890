"""The grant of a container admitted without an assignment (`--allow-unassigned`), per mode.

The kubelet makes one Allocate per resource of a container, in random order (it walks the
container's `resources.limits` as a Go map), and merges the answers: for a variable or a mount's
container path it keeps the first answer's value, in the order of another Go map, so in no fixed
order either (pkg/kubelet/cm/devicemanager/pod_devices.go, `deviceRunContainerOptions`). Nothing
in the two calls says they are for the same container: no pod, no container name, only device IDs.
With the hand-off this is solved by the signed assignment: the cores answer carries the whole
grant and the memory answer only acknowledges. Without an assignment:

- mode `plain` enforces nothing, so each answer keeps its own variables as before (cores:
  visible devices and `VGPU_CORES`; memory: `VGPU_MEMORY_GPUS`, `VGPU_MEMORY_LIMIT_MIB`);
- an enforcing mode must give the container exactly one, complete set of limits whatever the
  order. The cores answer alone decides: the container gets its cores and the memory a share of
  that size takes when it does not ask for memory (proportional: 30 cores → 30 % of the GPU's
  memory), with the mode's full enforcement. An unassigned **memory** Allocate is refused: it
  cannot be tied to the cores answer of the same container, and admitting it would either grant
  memory that no limit holds or depend on the kubelet's map order. So, unassigned, a container
  asks cores only (fail closed; schedule through the vgpu extender for an explicit memory ask).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu.core.units import CORES_PER_GPU
from vgpu.node.devices import UnitKind
from vgpu.node.grants import (
    ContainerGrant,
    GpuLimit,
    GrantSettings,
    Refusal,
    container_grant,
    cores_grant,
    memory_grant,
)
from vgpu.node.model import GpuInfo


def unassigned_grant(
    kind: UnitKind,
    shares: Sequence[tuple[str, int]],
    gpus: Mapping[str, GpuInfo],
    unit_mib: int,
    settings: GrantSettings,
) -> ContainerGrant | Refusal:
    """The answer for (gpu_uuid, units) `shares` of `kind`, in GPU index order."""
    if not settings.mode.enforcing:
        if kind is UnitKind.CORES:
            return cores_grant(shares, settings.devices)
        return memory_grant([(uuid, n * unit_mib) for uuid, n in shares])
    if kind is UnitKind.MEMORY:
        return Refusal(
            f"mode {settings.mode.value}: an unassigned container's vgpu memory ask cannot be "
            "tied to its cores (the kubelet allocates them in separate calls), so it is not "
            "admitted; ask vgpu cores only (memory follows the cores) or schedule the pod with "
            "the vgpu extender"
        )
    limits = [
        GpuLimit(uuid, cores, gpus[uuid].memory_mib * cores // CORES_PER_GPU)
        for uuid, cores in shares
    ]
    return container_grant(limits, settings)
