"""The DRA contract: names the driver publishes and the reading of an allocated ResourceClaim.

In DRA mode a GPU is one device of the driver's ResourceSlice (`resource.k8s.io/v1`), shared by
several claims (`allowMultipleAllocations`). It has two consumable capacities, `cores` (100, one
per percent of the GPU, step 1) and `memory` (its memory in whole memory units, step one unit).
Both request policies default to the whole capacity, so a request that names no capacity takes
the whole GPU, and a share names both, e.g. `cores: 30` and `memory: 8Gi`.

The scheduler records what each claim consumed in `status.allocation.devices.results[]`
(`consumedCapacity`); the driver prepares exactly that, and `kubectl inspect vgpu` reads the same
fields. Both go through `claim_shares` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.quantity import mib_ceil, whole_count
from vgpu.core.errors import InvalidRequest
from vgpu.core.units import CORES_PER_GPU

DRIVER = "vgpu.io"
"""The DRA driver name, and the name of the DeviceClass that selects its devices."""
CORES = "cores"
MEMORY = "memory"
API_VERSION = "resource.k8s.io/v1"
DEVICE_PREFIX = "gpu-"
ATTRIBUTES = (
    "uuid",
    "index",
    "model",
    "memoryMiB",
    "numaNode",
    "pciBusID",
    "computeCapability",
    "driverVersion",
    "nvlinkIsland",
    "memoryBackend",
)
"""Device attributes (unqualified names, i.e. in the driver's `vgpu.io` domain)."""


def device_name(index: int) -> str:
    """The device name of the GPU with this index ("gpu-0"): a DNS label, stable across
    restarts (the index is the driver's, not the order of discovery)."""
    return f"{DEVICE_PREFIX}{index}"


def device_index(name: str) -> int | None:
    """The GPU index a device name stands for, or None if it is not one of ours."""
    digits = name.removeprefix(DEVICE_PREFIX)
    if digits == name or not digits.isdigit() or len(digits) > 4:
        return None
    return int(digits)


def uses_claims(pod_spec: Mapping[str, Any]) -> bool:
    """Whether a pod's spec (`Pod.spec`) names ResourceClaims, whatever their driver: such a pod
    gets devices from kube-scheduler's DRA allocator, which the extender does not model (it
    reads no claims or slices), so the extender leaves its node to kube-scheduler."""
    claims = pod_spec.get("resourceClaims")
    return isinstance(claims, list) and len(claims) > 0


@dataclass(frozen=True, slots=True)
class DeviceShare:
    """One allocated device of a claim: which device, for which request, and what it consumed.

    `cores` and `memory_mib` are None when the allocation recorded no consumed capacity (a
    device allocated exclusively, without consumable capacity): the whole GPU."""

    request: str
    pool: str
    device: str
    share_id: str | None
    cores: int | None
    memory_mib: int | None


def _consumed(raw: object, where: str) -> tuple[int | None, int | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping):
        raise InvalidRequest(where, "is not an object", "the scheduler writes a map of quantities")
    cores = raw.get(CORES)
    memory = raw.get(MEMORY)
    return (
        None if cores is None else whole_count(cores, f"{where}.{CORES}"),
        None if memory is None else mib_ceil(memory, f"{where}.{MEMORY}"),
    )


def claim_shares(claim: Mapping[str, Any], driver: str = DRIVER) -> list[DeviceShare]:
    """The devices of `driver` allocated to a claim, in result order; [] if not allocated.

    Raises `InvalidRequest` naming the field when the allocation is malformed."""
    status = claim.get("status") or {}
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    if not allocation:
        return []
    results = (allocation.get("devices") or {}).get("results") or []
    if not isinstance(results, list):
        raise InvalidRequest("status.allocation.devices.results", "is not a list", "")
    shares = []
    for i, result in enumerate(results):
        where = f"status.allocation.devices.results[{i}]"
        if not isinstance(result, Mapping) or result.get("driver") != driver:
            continue
        cores, memory = _consumed(result.get("consumedCapacity"), f"{where}.consumedCapacity")
        if cores is not None and not 0 < cores <= CORES_PER_GPU:
            raise InvalidRequest(
                f"{where}.consumedCapacity.{CORES}",
                f"{cores} is out of range",
                f"a share is 1..{CORES_PER_GPU} cores",
            )
        share_id = result.get("shareID")
        shares.append(
            DeviceShare(
                request=str(result.get("request") or ""),
                pool=str(result.get("pool") or ""),
                device=str(result.get("device") or ""),
                share_id=None if share_id is None else str(share_id),
                cores=cores,
                memory_mib=memory,
            )
        )
    return shares
