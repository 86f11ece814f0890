"""Synthetic variants of a trace, for what the Alibaba trace cannot show (seeded, reproducible).

* ``two-axis``: the trace has one GPU share per pod standing for compute *and* memory. Our
  resource model has both axes, so this variant redraws the GPU *memory* of every fractional pod
  independently of its compute share, from the trace's own distribution of shares, and asks it
  in MiB as that share of a 32 GiB GPU (the size of most GPUs in the openb cluster; on a 16 GiB
  GPU the same ask is twice the share, and asks above 16 GiB need a bigger GPU). A pod asking
  20 cores may thus want 60 % of the memory, and the other way round. Whole-GPU and CPU-only pods
  are unchanged.
* ``gangs``: groups of 2, 4, 8 or 16 one-GPU or fractional pods that must be placed all or
  nothing. After the arrival sequence is built, a pod that wants one GPU or a share starts a gang
  with probability `GANG_START`; the gang's other members are the next one-GPU or fractional pods
  of the sequence, which move up to arrive with it. The set of pods and the total GPU demand are
  unchanged: only grouping and order differ. Members carry a `GangRef` (key ``gang-<n>``).
"""

from __future__ import annotations

from dataclasses import replace
from random import Random

from vgpu.core.ids import GangKey
from vgpu.core.model import ContainerRequest, GangRef, PodRequest

VARIANTS = ("none", "two-axis", "gangs")
TWO_AXIS_BASE_MIB = 32 * 1024
"""The GPU size a two-axis memory share is measured against."""
GANG_START = 0.04
"""Probability that a one-GPU or fractional pod starts a gang."""
GANG_SIZES = ((2, 4), (4, 3), (8, 2), (16, 1))
"""Gang sizes and their relative weights."""


def _share_of_gpu(pod: PodRequest) -> int | None:
    """The cores of a pod's single fractional container, else None."""
    wanting = pod.gpu_containers
    if len(wanting) == 1 and not wanting[0].whole:
        return wanting[0].cores
    return None


def two_axis(pods: tuple[PodRequest, ...], seed: int) -> tuple[PodRequest, ...]:
    """Fractional pods with a GPU memory ask drawn independently of their compute share."""
    rng = Random(f"two-axis-{seed}")
    shares = [c for c in (_share_of_gpu(p) for p in pods) if c is not None]
    if not shares:
        return pods
    out = []
    for pod in pods:
        cores = _share_of_gpu(pod)
        if cores is None:
            out.append(pod)
            continue
        mib = rng.choice(shares) * TWO_AXIS_BASE_MIB // 100
        containers = tuple(
            ContainerRequest(c.name, c.cores, mib) if c.wants_gpu else c for c in pod.containers
        )
        out.append(replace(pod, containers=containers))
    return tuple(out)


def _gang_member(pod: PodRequest) -> bool:
    wanting = pod.gpu_containers
    return len(wanting) == 1 and (not wanting[0].whole or wanting[0].gpus == 1)


def _gang_size(rng: Random) -> int:
    sizes, weights = zip(*GANG_SIZES, strict=True)
    return rng.choices(sizes, weights)[0]


def gangs(pods: list[PodRequest], seed: int) -> list[list[PodRequest]]:
    """The arrival sequence grouped into units: a single pod, or all members of one gang."""
    rng = Random(f"gangs-{seed}")
    taken = [False] * len(pods)
    units: list[list[PodRequest]] = []
    for i, pod in enumerate(pods):
        if taken[i]:
            continue
        taken[i] = True
        if not _gang_member(pod) or rng.random() >= GANG_START:
            units.append([pod])
            continue
        size = _gang_size(rng)
        members = [pod]
        j = i + 1
        while len(members) < size and j < len(pods):
            if not taken[j] and _gang_member(pods[j]):
                taken[j] = True
                members.append(pods[j])
            j += 1
        if len(members) == 1:
            units.append([pod])
            continue
        ref = GangRef(GangKey(f"gang-{len(units)}"), len(members))
        units.append([replace(m, gang=ref) for m in members])
    return units
