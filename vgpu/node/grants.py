"""What a container gets for its GPU shares: environment variables and container annotations.

A `ContainerGrant` is plain data; the kubelet adapter turns it into a
`ContainerAllocateResponse`. The kubelet calls Allocate once per resource, so the cores and
memory grants of one container are built separately and must not set the same variables:

| variable | set by | value |
|---|---|---|
| `NVIDIA_VISIBLE_DEVICES`, `CUDA_VISIBLE_DEVICES` | cores | GPU UUIDs, comma-separated, by index |
| `VGPU_CORES` | cores | cores (percent of SMs) per visible GPU, same order |
| `VGPU_MEMORY_GPUS` | memory | GPU UUIDs holding the memory share |
| `VGPU_MEMORY_LIMIT_MIB` | memory | memory limit in MiB per GPU, same order as `VGPU_MEMORY_GPUS` |

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ContainerGrant:
    envs: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Allocation refused; `reason` goes back to the kubelet and ends up in the pod's status."""

    reason: str


def cores_grant(shares: Sequence[tuple[str, int]]) -> ContainerGrant:
    """Grant for (gpu_uuid, cores) pairs, already in GPU index order."""
    uuids = ",".join(uuid for uuid, _ in shares)
    return ContainerGrant(
        envs={
            "NVIDIA_VISIBLE_DEVICES": uuids,
            "CUDA_VISIBLE_DEVICES": uuids,
            "VGPU_CORES": ",".join(str(cores) for _, cores in shares),
        }
    )


def memory_grant(shares: Sequence[tuple[str, int]]) -> ContainerGrant:
    """Grant for (gpu_uuid, memory MiB) pairs, already in GPU index order."""
    return ContainerGrant(
        envs={
            "VGPU_MEMORY_GPUS": ",".join(uuid for uuid, _ in shares),
            "VGPU_MEMORY_LIMIT_MIB": ",".join(str(mib) for _, mib in shares),
        }
    )
