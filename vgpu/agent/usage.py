"""GPU usage as the node agent sees it, and the Prometheus collector that exports it at scrape time.

`UsageView` joins the GPU backend's per-process memory usage with each process's cgroup (read
through the injected `CgroupReader`), the `ContainerDirectory` of the pods on this node and the
hand-off ledger's grants, and lets the pure `vgpu.node.watchdog.assess` decide. Both the
watchdog loop and every `/metrics` scrape use it, so a scrape shows the state of that moment.

`GpuCollector` exports, per GPU (label `gpu`, the UUID): `vgpu_gpu_info` (index, model),
`vgpu_gpu_memory_capacity_bytes`, `vgpu_gpu_memory_allocated_bytes` and
`vgpu_gpu_cores_allocated_ratio` (grants of the pods assigned here, pending or admitted),
`vgpu_gpu_memory_used_bytes` and `vgpu_gpu_utilization_ratio` (driver; absent when it can't
tell), `vgpu_gpu_healthy`; per container (labels namespace, pod, container, gpu):
`vgpu_container_gpu_memory_allocated_bytes`, `vgpu_container_gpu_memory_used_bytes`,
`vgpu_container_gpu_memory_over_grant_bytes` (only while over); per unknown process (labels gpu,
pid): `vgpu_unknown_process_gpu_memory_bytes`. A failing backend drops the live families from
that scrape, never the whole answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from vgpu.adapters.gpu import GpuBackend
from vgpu.adapters.procfs import CgroupReader
from vgpu.core.errors import VgpuError
from vgpu.node.cgroup import parse_cgroup
from vgpu.node.containers import ContainerDirectory, ContainerKey, Unresolved
from vgpu.node.handoff.admissions import Handoff
from vgpu.node.model import GpuInventory
from vgpu.node.watchdog import Assessment, Grant, Owner, WatchdogPolicy, assess, grants_of

log = logging.getLogger(__name__)
MIB = 1024 * 1024
_CONTAINER_LABELS = ["namespace", "pod", "container", "gpu"]


class UsageView:
    def __init__(
        self,
        backend: GpuBackend,
        cgroups: CgroupReader,
        directory: ContainerDirectory,
        handoff: Handoff,
    ) -> None:
        self.backend = backend
        self._cgroups = cgroups
        self._directory = directory
        self._handoff = handoff

    def owner(self, pid: int) -> Owner:
        text = self._cgroups.read(pid)
        if text is None:
            return Unresolved.GONE
        return self._directory.resolve(parse_cgroup(text))

    def grants(self) -> dict[ContainerKey, dict[str, Grant]]:
        return grants_of(self._handoff.granted())

    def assess(self, policy: WatchdogPolicy | None = None) -> Assessment:
        samples = self.backend.process_usage()
        owners = {pid: self.owner(pid) for pid in {s.pid for s in samples}}
        return assess(samples, owners, self.grants(), policy or WatchdogPolicy())


def _labels(key: ContainerKey, gpu: str) -> list[str]:
    return [key.namespace, key.pod, key.container, gpu]


class GpuCollector:
    """A custom collector: reads inventory, health, grants and live usage at scrape time."""

    def __init__(
        self,
        inventory: Callable[[], GpuInventory | None],
        unhealthy: Callable[[], frozenset[str]],
        view: UsageView,
    ) -> None:
        self._inventory = inventory
        self._unhealthy = unhealthy
        self._view = view

    def describe(self) -> Iterable[Metric]:
        return []  # no registration-time collect(): the backend may not be started yet

    def collect(self) -> Iterator[Metric]:
        inventory = self._inventory()
        if inventory is None:
            return
        yield from self._gpus(inventory)
        try:
            assessment = self._view.assess()
        except VgpuError as e:
            log.warning("metrics: per-process GPU usage unavailable: %s", e)
            return
        yield from self._containers(assessment)

    def _gpus(self, inventory: GpuInventory) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "vgpu_gpu_info", "GPUs of this node", labels=["gpu", "index", "model"]
        )
        capacity = _gauge("vgpu_gpu_memory_capacity_bytes", "GPU memory")
        healthy = _gauge("vgpu_gpu_healthy", "1 while the GPU is healthy, 0 after a critical XID")
        allocated = _gauge("vgpu_gpu_memory_allocated_bytes", "GPU memory granted to containers")
        cores = _gauge("vgpu_gpu_cores_allocated_ratio", "Share of the GPU's cores granted")
        mem: dict[str, int] = {}
        share: dict[str, int] = {}
        for per_gpu in self._view.grants().values():
            for uuid, grant in per_gpu.items():
                mem[uuid] = mem.get(uuid, 0) + grant.memory_bytes
                share[uuid] = share.get(uuid, 0) + grant.cores
        bad = self._unhealthy()
        for gpu in inventory.gpus:
            info.add_metric([gpu.uuid, str(gpu.index), gpu.model], 1)
            capacity.add_metric([gpu.uuid], gpu.memory_mib * MIB)
            healthy.add_metric([gpu.uuid], 0 if gpu.uuid in bad else 1)
            allocated.add_metric([gpu.uuid], mem.get(gpu.uuid, 0))
            cores.add_metric([gpu.uuid], share.get(gpu.uuid, 0) / 100)
        yield from (info, capacity, allocated, cores, healthy)
        yield from self._live(inventory)

    def _live(self, inventory: GpuInventory) -> Iterator[Metric]:
        try:
            stats = self._view.backend.gpu_stats()
        except VgpuError as e:
            log.warning("metrics: GPU memory use and utilisation unavailable: %s", e)
            return
        used = _gauge("vgpu_gpu_memory_used_bytes", "GPU memory in use (driver)")
        util = _gauge("vgpu_gpu_utilization_ratio", "Share of the last sample period a kernel ran")
        known = inventory.by_uuid()
        for s in stats:
            if s.gpu_uuid not in known:
                continue
            if s.memory_used_bytes is not None:
                used.add_metric([s.gpu_uuid], s.memory_used_bytes)
            if s.utilization_ratio is not None:
                util.add_metric([s.gpu_uuid], s.utilization_ratio)
        yield from (used, util)

    def _containers(self, assessment: Assessment) -> Iterator[Metric]:
        granted = _container_gauge("allocated_bytes", "GPU memory granted to the container")
        used = _container_gauge("used_bytes", "GPU memory the container's processes use")
        over = _container_gauge("over_grant_bytes", "GPU memory used beyond the grant")
        unknown = GaugeMetricFamily(
            "vgpu_unknown_process_gpu_memory_bytes",
            "GPU memory used by a process in no pod this node knows",
            labels=["gpu", "pid"],
        )
        for row in assessment.containers:
            labels = _labels(row.key, row.gpu_uuid)
            if row.granted_bytes is not None:
                granted.add_metric(labels, row.granted_bytes)
            used.add_metric(labels, row.used_bytes)
        for finding in assessment.over:
            over.add_metric(_labels(finding.key, finding.gpu_uuid), finding.excess_bytes)
        for process in assessment.unknown:
            unknown.add_metric([process.gpu_uuid, str(process.pid)], process.used_bytes)
        yield from (granted, used, over, unknown)


def _gauge(name: str, documentation: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=["gpu"])


def _container_gauge(suffix: str, documentation: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(
        f"vgpu_container_gpu_memory_{suffix}", documentation, labels=_CONTAINER_LABELS
    )
