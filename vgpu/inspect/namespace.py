"""`kubectl inspect vgpu -n NAMESPACE`: the report with only that namespace's pods named.

kubectl users type `-n` out of habit; what they want is "where are my team's pods and why does
mine wait". A GPU's cores and memory are shared across namespaces, so the totals must stay the
cluster's: the other namespaces' containers on a GPU are folded into one holder per admission
state (`OTHERS`), which keeps every sum (`GpuView.cores_used`, the node and cluster usage) as it
was. Waiting pods, gangs and problems about pods of other namespaces are left out; problems about
nodes and the extender stay. Pure.
"""

from __future__ import annotations

import dataclasses

from vgpu.inspect.model import GpuView, Holder, NodeView, Report

OTHERS = "(other namespaces)"
"""The holder that stands for the containers of every other namespace on one GPU."""


def only_namespace(report: Report, namespace: str) -> Report:
    """`report` naming only the pods of `namespace` (module doc)."""
    return dataclasses.replace(
        report,
        nodes=tuple(_node(n, namespace) for n in report.nodes),
        gangs=tuple(g for g in report.gangs if _in(g.key, namespace)),
        unscheduled=tuple(u for u in report.unscheduled if _in(u.pod, namespace)),
        problems=tuple(
            p for p in report.problems if "/" not in p.subject or _in(p.subject, namespace)
        ),
    )


def _in(key: str, namespace: str) -> bool:
    """Whether `ns/name` is of `namespace`."""
    return key.partition("/")[0] == namespace


def _node(node: NodeView, namespace: str) -> NodeView:
    return dataclasses.replace(node, gpus=tuple(_gpu(g, namespace) for g in node.gpus))


def _gpu(gpu: GpuView, namespace: str) -> GpuView:
    mine = [h for h in gpu.holders if _in(h.pod, namespace)]
    for admitted in (True, False):
        others = [h for h in gpu.holders if not _in(h.pod, namespace) and h.admitted is admitted]
        if others:
            cores = sum(h.cores for h in others)
            memory = sum(h.memory_mmib for h in others)
            count = f"{len(others)} container" + ("s" if len(others) > 1 else "")
            mine.append(Holder(OTHERS, count, cores, memory, admitted))
    return dataclasses.replace(gpu, holders=tuple(mine))
