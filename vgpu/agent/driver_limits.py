"""The driver memory backend in the node agent: the kubelet's `PreStartContainer` sets the pod's
limit on each granted GPU before the container starts.

The kubelet calls `PreStartContainer` before EVERY start of a container that holds devices of a
plugin asking for it, restarts included, so a limit that a driver reload or the pod cgroup's
re-creation lost is set again. A call that cannot set the limit fails: the kubelet then fails the
container's start with our message, and no container runs without its limit (fail closed).
Removing the pod's cgroup clears its limits (NVML reference, `nvmlSetMemoryLimits_v1_t`), so
nothing is left to clear when the pod goes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from vgpu.adapters.dmem import CGROUPFS, LimitError, pod_cgroup
from vgpu.core.kubelet_reuse import Role
from vgpu.core.model import GpuShare
from vgpu.node.devices import ResourceNames, UnitKind
from vgpu.node.driver_limits import Limits, PreStartRefused, pod_memory
from vgpu.node.model import GpuInventory

log = logging.getLogger(__name__)


PodLookup = Callable[
    [UnitKind, Sequence[str]], "list[tuple[str, list[tuple[Role, tuple[GpuShare, ...]]]]]"
]
"""The pods whose container may hold the device IDs (`Handoff.pods_holding`): one while the
attribution is sure, all that may have been the caller while it is not."""


class DriverLimitHook:
    """`PreStartContainer` for the driver memory backend
    (`vgpu.adapters.kubelet.device_plugin.PreStart`)."""

    def __init__(
        self,
        lookup: PodLookup,
        limits: Limits,
        names: ResourceNames,
        *,
        cgroupfs: Path = CGROUPFS,
        soft: bool = False,
        on_set: Callable[[str, int], None] | None = None,
    ) -> None:
        self._lookup = lookup
        self._limits = limits
        self._names = names
        self._cgroupfs = cgroupfs
        self._soft = soft
        self._on_set = on_set

    def __call__(self, resource: str, ids: Sequence[str]) -> None:
        """Set the limits of the pod holding `ids`; raises PreStartRefused with the cause.

        While the agent is unsure which of interchangeable pods the kubelet admitted (settled
        by its next reconcile), each of them that has its cgroup gets its own limit: the caller
        has its cgroup by now (the kubelet makes it before starting containers), so whichever
        it was, it starts limited. Likewise when the records show more than one pod holding
        `ids` (`Handoff.pods_holding`: a finished pod the watch has not shown finished yet)."""
        kind = UnitKind.CORES if resource == self._names.cores else UnitKind.MEMORY
        found = self._lookup(kind, ids)
        if not found:
            raise PreStartRefused(
                f"{resource}: no pod in the agent's records holds devices {', '.join(ids)} "
                "(a container admitted without an assignment has no grant to limit it to), so "
                "the driver's memory limit cannot be set; the container is not started"
            )
        limited = {
            uid: gpus
            for uid, containers in found
            if (gpus := self._limit(uid, containers, len(found))) is not None
        }
        if len(found) > 1 and not limited:
            raise PreStartRefused(
                f"{resource}: none of the pods that may hold devices {', '.join(ids)} "
                f"({', '.join(uid for uid, _ in found)}) has a cgroup under {self._cgroupfs}, "
                "so the driver's memory limit cannot be set"
            )
        # The container is given the GPUs its device IDs name: each must now have a limit on
        # every pod that may be the caller, whatever the records say the pod's shares are (one
        # pod found that holds no memory here has none at all).
        given = sorted({i.rpartition("::")[0] for i in ids})
        bare = [(uid, g) for uid, gpus in limited.items() for g in given if g not in gpus]
        if not limited:
            bare = [(found[0][0], g) for g in given]
        if bare:
            uid, gpu = bare[0]
            raise PreStartRefused(
                f"{resource}: pod {uid} holds devices {', '.join(ids)} but its records give it "
                f"no memory on GPU {gpu}, so there is no driver memory limit on GPU {gpu} to set; "
                "the container is not started"
            )

    def _limit(
        self, uid: str, containers: list[tuple[Role, tuple[GpuShare, ...]]], of: int
    ) -> set[str] | None:
        """Set one pod's limits; the GPUs limited, or None when it holds no GPU memory here,
        or (one of `of` > 1 pods that may be the caller) has no cgroup yet."""
        memory = pod_memory(containers)
        if not memory:
            return None  # the pod holds no GPU memory here: nothing to limit
        cgroup = pod_cgroup(uid, self._cgroupfs)
        if cgroup is None and of > 1:
            return None  # not started yet: its own containers' calls will limit it
        if cgroup is None:
            raise PreStartRefused(
                f"pod {uid}: no cgroup under {self._cgroupfs} (looked for the systemd and "
                "cgroupfs layouts), so the driver's memory limit cannot be set"
            )
        for uuid, hard in sorted(memory.items()):
            try:
                self._limits.set(uuid, cgroup, hard=hard, soft=hard if self._soft else 0)
            except LimitError as e:
                raise PreStartRefused(
                    f"pod {uid}: cannot set the driver's memory limit of {hard} bytes on GPU "
                    f"{uuid} for {cgroup}: {e}"
                ) from None
            if self._on_set is not None:
                self._on_set(uuid, hard)
        log.info("pod %s: driver memory limits set on %s: %s", uid, cgroup, memory)
        return set(memory)


class BackendCollector:
    """`vgpu_gpu_memory_backend{gpu,backend} 1`: which backend holds each GPU's memory grants
    (`driver`: the driver's per-cgroup limits; else the `--mode`, e.g. `vgpu-core`)."""

    def __init__(
        self, inventory: Callable[[], GpuInventory | None], backend: Callable[[], str]
    ) -> None:
        self._inventory = inventory
        self._backend = backend

    def collect(self) -> Iterator[Metric]:
        inventory = self._inventory()
        if inventory is None or not self._backend():
            return
        gauge = GaugeMetricFamily(
            "vgpu_gpu_memory_backend",
            "1 for the backend that holds the GPU's memory grants (driver, else the --mode)",
            labels=["gpu", "backend"],
        )
        for gpu in inventory.gpus:
            gauge.add_metric([gpu.uuid, self._backend()], 1)
        yield gauge
