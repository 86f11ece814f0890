"""`-o json|yaml`: the report as a stable, versioned document for scripts.

Memory is given in MiB (floats where shares are fractional), percentages rounded to 0.1. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from vgpu.core.units import MMIB_PER_MIB
from vgpu.inspect.model import GpuView, NodeView, Report, Usage
from vgpu.inspect.real_use import STALE_S, RealUse, use_document

FORMAT_VERSION = 1


def report_document(report: Report) -> dict[str, Any]:
    doc = _document(report)
    if report.real_use is not None:  # asked for (--prometheus): each GPU's figure or null
        doc["realUse"] = real_use_document(report.real_use)
        for node, n in zip(doc["nodes"], report.nodes, strict=True):
            for gpu, g in zip(node["gpus"], n.gpus, strict=True):
                gpu["realUse"] = use_document(report.use_of(g))
                for holder, h in zip(gpu["holders"], g.holders, strict=True):
                    used = report.real_use.container_mib(h.pod, h.container, g.uuid)
                    holder["realMemoryUsedMiB"] = None if used is None else round(used, 1)
    return doc


def _document(report: Report) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "takenAt": report.taken_at or None,
        "nodes": [_node(n) for n in report.nodes],
        "nodesWithoutVgpu": list(report.without_vgpu),
        "totals": _usage(report.totals),
        "gangs": [
            {
                "name": g.key,
                "state": g.state.value,
                "minMember": g.min_member,
                "members": list(g.members),
                "bound": g.bound,
                "running": g.running,
                "nodes": list(g.nodes),
            }
            for g in report.gangs
        ],
        "unscheduled": [
            {
                "pod": u.pod,
                "cores": u.cores,
                "memoryBlocks": u.memory_blocks,
                "memoryAuto": u.memory == "auto",
                "gang": u.gang,
                "reason": u.reason,
            }
            for u in report.unscheduled
        ],
        "problems": [{"subject": p.subject, "message": p.message} for p in report.problems],
        "extender": _extender(report),
    }


def _extender(report: Report) -> dict[str, Any] | None:
    """The extender's Lease as read (None: not looked for, as in an older snapshot)."""
    e = report.extender
    if e is None:
        return None
    return {
        "lease": e.lease,
        "found": e.found,
        "holder": e.holder,
        "renewedSecondsAgo": e.age_s,
        "up": e.up,
    }


def real_use_document(real: RealUse) -> dict[str, Any]:
    return {"source": real.source, "problem": real.problem, "staleAfterSeconds": STALE_S}


def _mib(mmib: int) -> float | int:
    value = mmib / MMIB_PER_MIB
    return int(value) if value.is_integer() else round(value, 3)


def _usage(u: Usage) -> dict[str, Any]:
    return {
        "gpus": u.gpus,
        "unhealthyGpus": u.unhealthy,
        "coresUsed": u.cores_used,
        "coresTotal": u.cores_total,
        "coresPercent": round(u.cores_percent, 1),
        "memoryUsedMiB": _mib(u.memory_used_mmib),
        "memoryTotalMiB": u.memory_total_mib,
        "memoryPercent": round(u.memory_percent, 1),
        "pendingPods": u.pending_pods,
        "pendingCores": u.pending_cores,
        "pendingMemoryMiB": _mib(u.pending_memory_mmib),
    }


def _node(n: NodeView) -> dict[str, Any]:
    return {
        "name": n.name,
        "address": n.address,
        "ready": n.ready,
        **({"mode": n.mode} if n.mode else {}),  # "dra": GPUs published by a DRA driver
        **({"memoryBackend": n.memory_backend} if n.memory_backend else {}),
        "gpus": [_gpu(g) for g in n.gpus],
        "usage": _usage(n.usage),
    }


def _gpu(g: GpuView) -> dict[str, Any]:
    return {
        "index": g.index,
        "uuid": g.uuid,
        "model": g.model,
        "healthy": g.healthy,
        "coresUsed": g.cores_used,
        "coresTotal": g.cores_total,
        "memoryUsedMiB": _mib(g.memory_used_mmib),
        "memoryTotalMiB": g.memory_mib,
        "holders": [
            {
                "pod": h.pod,
                "container": h.container,
                "cores": h.cores,
                "memoryMiB": _mib(h.memory_mmib),
                "admitted": h.admitted,
            }
            for h in g.holders
        ],
    }


def render_json(report: Report) -> str:
    return json.dumps(report_document(report), indent=2) + "\n"


def render_yaml(report: Report) -> str:
    import yaml  # only -o yaml needs PyYAML

    return str(yaml.safe_dump(report_document(report), sort_keys=False))
