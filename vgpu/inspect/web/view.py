"""What the web view shows, computed once per read of the cluster. Pure: no I/O.

A `View` holds the node report and the queue report exactly as `kubectl inspect vgpu` and
`kubectl inspect vgpu --queues` build them, plus the two things only a picture needs: each
pod's queue (its label, as the queue report reads it) and each GPU's stranded fraction. The
JSON document of `/api/view.json` is the report's own `-o json` document and the queues' own
`--queues -o json` document side by side, so a script reads the same numbers as the page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vgpu.api.queues.config import queue_of
from vgpu.api.resources import ResourceNames
from vgpu.core.units import MMIB_PER_MIB
from vgpu.inspect.build import build_report
from vgpu.inspect.export import report_document
from vgpu.inspect.lease import DEFAULT_LEASE
from vgpu.inspect.model import GpuView, NodeView, Report
from vgpu.inspect.namespace import only_namespace
from vgpu.inspect.queues import QueueReport, as_dict, queue_report
from vgpu.inspect.real_use import RealUse
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.web.where import DEFAULT_POLICIES, Parses, Placer, Policies


@dataclass(frozen=True, slots=True)
class View:
    report: Report
    queues: QueueReport
    queue_of_pod: Mapping[str, str]
    """`ns/pod` -> the queue its label names (queued pods only)."""
    placer: Placer | None = dataclasses.field(default=None, compare=False)
    """The placement core over the snapshot both reports were built from: a pod's page asks
    it where a waiting pod could go (`where`)."""


@dataclass(frozen=True, slots=True)
class Filter:
    """The page's filters, each empty for "any": a GPU model (exact), a node name, a namespace
    (as `inspect -n`: others' shares fold into one holder) and a search text matched against
    node, model and pod names."""

    model: str = ""
    node: str = ""
    namespace: str = ""
    search: str = ""

    @property
    def active(self) -> bool:
        return any(dataclasses.astuple(self))


def build_view(
    snapshot: Snapshot,
    config_text: str | None,
    names: ResourceNames,
    *,
    now: datetime | None = None,
    lease: str = DEFAULT_LEASE,
    real_use: RealUse | None = None,
    parses: Parses | None = None,
    policies: Policies = DEFAULT_POLICIES,
) -> View:
    """Both reports from one snapshot (`config_text`: the queue ConfigMap's queues.json;
    `real_use`: the GPUs' real use from Prometheus, set on the report as `--prometheus` sets
    it, so the page and `-o json` show the same figures; `parses`: the placement's parses of
    an earlier read, reused where an object is unchanged; `policies`: the extender's, which
    "where it could go" places with)."""
    report = build_report(snapshot, (), names, now=now, lease=lease)
    if real_use is not None:
        report = dataclasses.replace(report, real_use=real_use)
    queues = queue_report(snapshot, config_text, names)
    pods: dict[str, str] = {}
    for obj in snapshot.pods:
        meta = obj.get("metadata") or {}
        queue = queue_of(meta)
        if queue is not None:
            pods[f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"] = queue
    ready = [n.name for n in report.nodes if n.ready]
    return View(report, queues, pods, Placer(snapshot, names, ready, parses, policies))


def filtered(report: Report, f: Filter) -> Report:
    """`report` with the nodes `f` keeps (a node whose name, model or pods match the search)."""
    if f.namespace:
        report = only_namespace(report, f.namespace)
    search = f.search.strip().lower()
    nodes = tuple(
        n
        for n in report.nodes
        if (not f.model or f.model in n.models)
        and (not f.node or n.name == f.node)
        and (not search or _mentions(n, search))
    )
    return dataclasses.replace(report, nodes=nodes)


def _mentions(node: NodeView, text: str) -> bool:
    if text in node.name.lower() or any(text in m.lower() for m in node.models):
        return True
    return any(text in h.pod.lower() for g in node.gpus for h in g.holders)


def fills(gpu: GpuView) -> tuple[float, float]:
    """The fractions of the GPU's cores and memory granted (0..1)."""
    cores = gpu.cores_used / gpu.cores_total if gpu.cores_total else 0.0
    total = gpu.memory_mib * MMIB_PER_MIB
    memory = gpu.memory_used_mmib / total if total else 0.0
    return min(cores, 1.0), min(memory, 1.0)


def used_fills(report: Report, gpu: GpuView) -> tuple[float | None, float | None]:
    """How busy the GPU is and the fraction of its memory in use (0..1), as the agents
    measure them (`report.real_use`); None for a figure not known."""
    use = report.use_of(gpu)
    if use is None:
        return None, None
    busy = None if use.busy_percent is None else min(max(use.busy_percent / 100.0, 0.0), 1.0)
    memory = None
    if use.memory_used_mib is not None and gpu.memory_mib:
        memory = min(max(use.memory_used_mib / gpu.memory_mib, 0.0), 1.0)
    return busy, memory


def stranded(gpu: GpuView) -> float:
    """The fraction of the GPU left free in one dimension that no ask can use (0..1).

    An ask needs cores and memory together, so a GPU whose cores are all granted strands its
    free memory, and one whose memory is all granted strands its free cores: the lopsided
    remainder the placement policy's fragmentation measure tries not to leave. While both
    dimensions have room nothing is stranded (an ask can still take both), and an empty or an
    unhealthy GPU strands nothing (it is free, or nobody can use it).
    """
    if not gpu.holders or not gpu.healthy:
        return 0.0
    cores, memory = fills(gpu)
    if cores >= 1.0:
        return 1.0 - memory
    if memory >= 1.0:
        return 1.0 - cores
    return 0.0


def stranded_class(fraction: float) -> int:
    """The colour step (0..4) a stranded fraction is drawn in: none, <10 %, <25 %, <50 %, more."""
    if fraction <= 0.0:
        return 0
    for step, bound in enumerate((0.10, 0.25, 0.50), start=1):
        if fraction < bound:
            return step
    return 4


def document(view: View, status: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON of `/api/view.json`: the refresh `status`, the report's `-o json` document and
    the queue report's `--queues -o json` document."""
    return {
        "status": dict(status),
        "report": report_document(view.report),
        "queues": dict(as_dict(view.queues)),
    }
