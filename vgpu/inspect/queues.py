"""`kubectl inspect vgpu --queues`: where each queue stands and why its held pods wait.

Computed from the queue ConfigMap and the pods with the functions the extender's leader uses,
never a second implementation: the pod reading and capacity of `vgpu.api.queue_pods`, the
jobs and book of `vgpu.core.queues.jobs.group`, and `vgpu.core.queues.release.plan` for each queue's
deserved share (water-filling over cores and memory units) and the reasons that need no GPU
placement (a queue at its cap). Whether a held job fits whole on real GPUs now is the leader's
decision alone (it holds the place it finds); the report says so and points at the pod's
`VgpuQueued` Events, where the leader writes it. Pure: the caller reads the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vgpu.api.podspec import pod_spec
from vgpu.api.queue_pods import Queued, capacity, queued_pod
from vgpu.api.queues import QueueConfig, read_config
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.errors import ConfigError, InvalidRequest
from vgpu.core.queues.jobs import group
from vgpu.core.queues.proportion import ZERO, Vec, share
from vgpu.core.queues.release import plan
from vgpu.core.units import DEFAULT_MEMORY_UNIT_MIB
from vgpu.inspect.build import build_report
from vgpu.inspect.gangs import membership, pod_group_minimums
from vgpu.inspect.snapshot import Snapshot

LEADER_DECIDES = "waits for the leader to place it whole (its VgpuQueued Events say why)"


@dataclass(frozen=True, slots=True)
class QueueLine:
    name: str
    weight: int
    deserved: Vec
    allocated: Vec
    pending: Vec
    share: Fraction


@dataclass(frozen=True, slots=True)
class HeldLine:
    pod: str
    queue: str
    ask: Vec
    why: str


@dataclass(frozen=True, slots=True)
class QueueReport:
    queues: tuple[QueueLine, ...]
    held: tuple[HeldLine, ...]
    capacity: Vec
    problem: str = ""
    """The configuration's refusal (one line naming the field); the queues are then unknown."""


def queue_report(
    snapshot: Snapshot,
    config_text: str | None,
    names: ResourceNames = DEFAULT_NAMES,
    unit_mib: int = DEFAULT_MEMORY_UNIT_MIB,
) -> QueueReport:
    """The report (module doc); `config_text` is the ConfigMap's queues.json (None: none)."""
    nodes = build_report(snapshot, (), names).nodes
    cap = capacity(((g.healthy, g.memory_mib) for n in nodes for g in n.gpus), unit_mib)
    problem = ""
    try:
        config = read_config(config_text or "{}")
    except ConfigError as err:
        config, problem = QueueConfig(), str(err)
    recs = _queued(snapshot, names, unit_mib)
    grouped = group([r.pod for r in recs if not (r.deleting and r.pod.gated)], cap)
    outcome = plan(config.queues, grouped.book, grouped.jobs, lambda _job: False, now=0.0)
    why: dict[str, str] = dict(grouped.waiting)
    for job, reason in outcome.waiting.items():
        if "cap" in reason:
            why.update(dict.fromkeys(grouped.members[job], reason))
    configured = {s.name for s in config.queues}
    lines = []
    for spec in config.queues:
        held = grouped.book.by_queue.get(spec.name, ZERO)
        due = outcome.deserved.get(spec.name, ZERO)
        pending = grouped.pending.get(spec.name, ZERO)
        lines.append(QueueLine(spec.name, spec.weight, due, held, pending, share(held, due)))
    held_lines = []
    for r in sorted(recs, key=lambda r: (r.pod.queue, r.pod.key)):
        if not r.pod.gated:
            continue
        reason = why.get(r.pod.key, LEADER_DECIDES)
        if r.pod.queue not in configured:
            reason = f"queue {r.pod.queue} is not configured"
        held_lines.append(HeldLine(r.pod.key, r.pod.queue, r.pod.ask, reason))
    return QueueReport(tuple(lines), tuple(held_lines), cap, problem)


def _queued(snapshot: Snapshot, names: ResourceNames, unit_mib: int) -> list[Queued]:
    minimums = pod_group_minimums(snapshot.pod_groups)
    out = []
    for obj in snapshot.pods:
        pod: dict[str, Any] = dict(obj)
        try:
            parsed = pod_spec(pod, memory_unit_mib=unit_mib, names=names)
        except (InvalidRequest, KeyError, TypeError, ValueError, AttributeError):
            continue  # the node report's Problems name unreadable pods
        gang = membership(pod, minimums)
        size = gang.min_member if gang is not None and gang.min_member else 1
        found = queued_pod(pod, parsed, size)
        if found is not None:
            out.append(found)
    return out


def headline(report: QueueReport) -> str:
    """The report's first line when there is no queue to show ("": there are queues); the
    table and the web view both open with it."""
    if report.problem:
        return f"The queue configuration is refused: {report.problem}"
    return "" if report.queues else "No queues are configured."


def render_queues(report: QueueReport) -> str:
    """The table of queues, then the held pods with why they wait."""
    head = headline(report)
    c, m = report.capacity
    out = [head + "\n" if head else "", f"Cluster: {c} cores / {m} memory units\n"]
    rows = [("QUEUE", "WEIGHT", "DESERVED", "ALLOCATED", "PENDING", "SHARE")]
    for q in report.queues:
        rows.append(
            (q.name, str(q.weight), _vec(q.deserved), _vec(q.allocated), _vec(q.pending),
             f"{float(q.share):.2f}")
        )  # fmt: skip
    out.append(_table(rows) if report.queues else "")
    if report.held:
        held = [("HELD POD", "QUEUE", "ASKS", "WHY")]
        held += [(h.pod, h.queue, _vec(h.ask), h.why) for h in report.held]
        out.append("\n" + _table(held))
    else:
        out.append("\nNo pods are held.\n")
    return "".join(out)


def as_dict(report: QueueReport) -> Mapping[str, Any]:
    """The report for -o json / yaml."""
    return {
        "capacity": _dims(report.capacity),
        "problem": report.problem,
        "queues": [
            {
                "name": q.name,
                "weight": q.weight,
                "deserved": _dims(q.deserved),
                "allocated": _dims(q.allocated),
                "pending": _dims(q.pending),
                "share": round(float(q.share), 4),
            }
            for q in report.queues
        ],
        "held": [
            {"pod": h.pod, "queue": h.queue, "asks": _dims(h.ask), "why": h.why}
            for h in report.held
        ],
    }


def _dims(v: Vec) -> dict[str, int]:
    return {"cores": v[0], "memory": v[1]}


def _vec(v: Vec) -> str:
    return f"{v[0]}c/{v[1]}m"


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        "   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() + "\n"
        for r in rows
    )
