"""How the kubelet's device manager shares devices between the containers of one pod.

From pkg/kubelet/cm/devicemanager/manager.go (`Allocate`, `allocateContainerResources`,
`devicesToAllocate`; the pool is `devicesToReuse`), per extended resource:

* containers are allocated in order: init containers, then app containers, each in spec order;
* a container first draws devices from the pod's reuse pool, then takes new ones (when the pool
  covers the request GetPreferredAllocation is not called; otherwise the drawn IDs are passed as
  `must_include`);
* a regular init container's devices then join the pool (it has finished before the next
  container starts);
* a restartable init container ("sidecar", `restartPolicy: Always`) and an app container keep
  their devices: what they drew leaves the pool.

So a pod holds `sum(new devices)` of each resource, not the sum of its containers' asks:
`new_devices` computes it. Which of the pool's IDs a container draws is the set's iteration
order, that is arbitrary, so vgpu places every vGPU container of a pod with a vGPU init
container on one GPU (`place_reusing`): whatever IDs the kubelet hands on, they are on the GPU
the assignment names, and the pod is charged what the kubelet really holds. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import replace

from vgpu.core.fit import Code, Verdict
from vgpu.core.ids import NodeName
from vgpu.core.model import (
    Assignment,
    ContainerAssignment,
    ContainerRequest,
    GpuShare,
    PodRequest,
)
from vgpu.core.policy.interface import Policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.units import CORES_PER_GPU, MMIB_PER_MIB, memory_need_mmib


class Role(enum.Enum):
    """A container's part in device reuse."""

    INIT = "init"  # regular init container: its devices are reused by later containers
    SIDECAR = "sidecar"  # restartable init container: keeps its devices
    APP = "app"


def new_devices(asks: Sequence[tuple[Role, int]]) -> list[int]:
    """Per container (in allocation order), how many devices of one resource it takes new."""
    pool = 0
    out = []
    for role, n in asks:
        drawn = min(n, pool)
        out.append(n - drawn)
        # An init container's devices join the pool (pool ∪ its own: max of the two sizes);
        # what a sidecar or app container drew leaves it.
        pool = max(pool, n) if role is Role.INIT else pool - drawn
    return out


def reuses(pod: PodRequest, roles: Mapping[str, Role]) -> bool:
    """Whether the kubelet may hand a vGPU init container's devices to a later container."""
    return any(roles.get(c.name) is Role.INIT for c in pod.gpu_containers)


def held(
    containers: Sequence[ContainerRequest], roles: Mapping[str, Role], values: list[int]
) -> int:
    """Total the kubelet holds of a per-container quantity (cores, memory) after reuse."""
    return sum(
        new_devices(
            [(roles.get(c.name, Role.APP), v) for c, v in zip(containers, values, strict=True)]
        )
    )


def merged(pod: PodRequest, roles: Mapping[str, Role], gpu_mib: int) -> PodRequest | Verdict:
    """The pod as one container asking what the kubelet holds after reuse (memory sized for a
    GPU of `gpu_mib`, the largest candidate), to choose its GPU with any placement policy."""
    wanting = pod.gpu_containers
    if any(c.cores > CORES_PER_GPU for c in wanting):
        return Verdict(
            Code.NO_GPU,
            (
                "a pod with vGPU init containers must fit on one GPU (the kubelet hands the init "
                "container's devices to later containers); ask at most 100 cores per container",
            ),
        )
    cores = held(wanting, roles, [c.cores for c in wanting])
    memory = None
    if any(c.memory_mib is not None for c in wanting):
        need = [memory_need_mmib(c.cores, c.memory_mib, gpu_mib) for c in wanting]
        memory = -(-held(wanting, roles, need) // MMIB_PER_MIB)
    return replace(pod, containers=(ContainerRequest("pod", cores, memory),))


def expand(
    placed: Assignment, pod: PodRequest, roles: Mapping[str, Role], gpu_mib: int
) -> Assignment:
    """The merged placement as the pod's real assignment: each container's own share on the
    chosen GPU (of `gpu_mib`), and `reused` what the kubelet holds once for several."""
    wanting = pod.gpu_containers
    uuid = placed.shares[0].uuid
    shares = [
        GpuShare(uuid, c.cores, memory_need_mmib(c.cores, c.memory_mib, gpu_mib)) for c in wanting
    ]
    cores = held(wanting, roles, [c.cores for c in wanting])
    mem_held = held(wanting, roles, [s.memory_mmib for s in shares])
    reused = GpuShare(
        uuid, sum(s.cores for s in shares) - cores, sum(s.memory_mmib for s in shares) - mem_held
    )
    return replace(
        placed,
        containers=tuple(
            ContainerAssignment(c.name, (s,)) for c, s in zip(wanting, shares, strict=True)
        ),
        reused=(reused,) if reused.cores or reused.memory_mmib else (),
    )


def place_reusing(
    scheduler: Scheduler,
    pod: PodRequest,
    node: NodeName,
    roles: Mapping[str, Role],
    policy: Policy | None = None,
) -> Assignment | Verdict:
    """Place a pod whose init containers' devices are reused: every vGPU container on one GPU,
    charged what the kubelet holds after reuse (`Assignment.reused` carries the difference)."""
    ns = scheduler.state.node(node)
    one = merged(pod, roles, max((g.memory_mib for g in ns.gpus), default=0))
    if isinstance(one, Verdict):
        return one
    first = scheduler.place(one, node, policy)
    if isinstance(first, Verdict):
        return first
    gpu = next(g for g in ns.gpus if g.uuid == first.shares[0].uuid)
    assignment = expand(first, pod, roles, gpu.memory_mib)
    problem = scheduler.state.can_charge(assignment)
    if problem is not None:
        return Verdict(Code.NO_GPU, (problem,))
    return assignment
