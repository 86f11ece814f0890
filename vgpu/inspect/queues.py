"""`kubectl inspect vgpu --queues`: where each queue stands and why its held pods wait.

Computed from the queue ConfigMap and the pods with the functions the extender's leader uses,
never a second implementation: the pod reading and capacity of `vgpu.api.queues.pods`, the
jobs and book of `vgpu.core.queues.jobs.group`, and `vgpu.core.queues.release.plan` for each queue's
deserved share (water-filling over cores and memory units) and the reasons that need no GPU
placement (a queue at its cap). Whether a held job fits whole on real GPUs now is the leader's
decision alone (it holds the place it finds): a held pod's reason is the leader's own words
from its latest `VgpuQueued` Event (`vgpu.inspect.queue_events`) when there is one.

What is in force comes from the leader's record on its Lease (`vgpu.api.queues.in_force`): which
replica runs queues, and the configuration it acts on, which is the last good one while the
ConfigMap is refused. Without a record the report says no leader runs queues (nothing is
released); without the Lease it says it cannot tell. Pure: the caller reads the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vgpu.api.assignment import ASSIGNMENT, decode
from vgpu.api.podspec import pod_spec
from vgpu.api.queues.config import QueueConfig, read_config
from vgpu.api.queues.in_force import IN_FORCE_ANNOTATION, InForce, decode_in_force
from vgpu.api.queues.pods import Queued, capacity, counted, largest_gpu_mib, queued_pod
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.errors import ConfigError, InvalidRequest
from vgpu.core.model import GpuShare
from vgpu.core.queues.jobs import QueuedPod, group
from vgpu.core.queues.proportion import ZERO, Vec, share
from vgpu.core.queues.release import plan
from vgpu.core.units import DEFAULT_MEMORY_UNIT_MIB
from vgpu.inspect.build import build_report
from vgpu.inspect.gangs import membership, pod_group_minimums
from vgpu.inspect.queue_events import leader_words
from vgpu.inspect.snapshot import Snapshot

LEADER_DECIDES = "the leader has not said why yet (it releases a job only where it fits whole)"
NO_LEADER = (
    "no extender leader runs queues, so nothing releases it (the extender needs "
    "--queues-config; chart: queues.enabled)"
)


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
    source: str = "report"
    """Whose words `why` is: "leader" (its latest VgpuQueued Event) or "report" (computed
    here from the configuration and the pods, with the leader's own functions)."""


@dataclass(frozen=True, slots=True)
class QueueReport:
    queues: tuple[QueueLine, ...]
    held: tuple[HeldLine, ...]
    capacity: Vec
    problem: str = ""
    """The ConfigMap's refusal (one line naming the field); the queues shown are then the
    configuration in force, if the leader's record says which, else none."""
    leader: str = ""
    """The replica that runs queues ("": none does; `UNKNOWN`: the Lease was not read)."""
    in_force: str = "configmap"
    """Which configuration the queues shown are: "configmap", "leader" (the leader's last good
    one, the ConfigMap's being refused) or "none" (refused, and nothing known in force)."""
    memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB


UNKNOWN = "?"
REFUSED_NONE_IN_FORCE = "the queue configuration is refused and none is known in force"


def queue_report(
    snapshot: Snapshot,
    config_text: str | None,
    names: ResourceNames = DEFAULT_NAMES,
    unit_mib: int = DEFAULT_MEMORY_UNIT_MIB,
) -> QueueReport:
    """The report (module doc); `config_text` is the ConfigMap's queues.json (None: none)."""
    nodes = build_report(snapshot, (), names).nodes
    cap = capacity(((g.healthy, g.memory_mib) for n in nodes for g in n.gpus), unit_mib)
    record, leader = _record(snapshot)
    config, problem, in_force = _config(config_text, record)
    largest = largest_gpu_mib((g.healthy, g.memory_mib) for n in nodes for g in n.gpus)
    raw = _queued(snapshot, names, unit_mib)
    given = counted([r.found for r in raw], largest, unit_mib, _places(raw))
    recs = [_Rec(found, r.raw) for r, found in zip(raw, given, strict=True)]
    grouped = group([r.pod for r in recs if not (r.deleting and r.pod.gated)], cap)
    outcome = plan(config.queues, grouped.book, grouped.jobs, lambda _job, _keep: False, now=0.0)
    why: dict[str, str] = dict(grouped.waiting)
    for job, reason in outcome.waiting.items():
        if "cap" in reason:
            why.update(dict.fromkeys(grouped.members[job], reason))
    lines = []
    for spec in config.queues:
        held = grouped.book.by_queue.get(spec.name, ZERO)
        due = outcome.deserved.get(spec.name, ZERO)
        pending = grouped.pending.get(spec.name, ZERO)
        lines.append(QueueLine(spec.name, spec.weight, due, held, pending, share(held, due)))
    configured = {s.name for s in config.queues} if in_force != "none" else None
    held_lines = [
        _held(r, why, configured, leader, snapshot.events)
        for r in sorted(recs, key=lambda r: (r.pod.queue, r.pod.key))
        if r.pod.gated
    ]
    return QueueReport(tuple(lines), tuple(held_lines), cap, problem, leader, in_force, unit_mib)


def _held(
    r: _Rec,
    why: Mapping[str, str],
    configured: set[str] | None,
    leader: str,
    events: Sequence[Mapping[str, Any]],
) -> HeldLine:
    """A held pod and why it waits: the leader's latest words when it said any, else what the
    configuration alone tells (`configured` None: no configuration is known in force)."""
    said = leader_words(r.raw, events)
    if said:
        return HeldLine(r.pod.key, r.pod.queue, r.pod.ask, said, "leader")
    if not leader:
        reason = NO_LEADER
    elif configured is None:
        reason = REFUSED_NONE_IN_FORCE
    elif r.pod.queue not in configured:
        reason = f"queue {r.pod.queue} is not configured"
    else:
        reason = why.get(r.pod.key, LEADER_DECIDES)
    return HeldLine(r.pod.key, r.pod.queue, r.pod.ask, reason)


def _record(snapshot: Snapshot) -> tuple[InForce | None, str]:
    """The leader's record, if current, and who runs queues (`QueueReport.leader`)."""
    lease = snapshot.extender_lease
    if lease is None:
        return None, "" if snapshot.lease_read else UNKNOWN
    meta = lease.get("metadata") or {}
    record = decode_in_force((meta.get("annotations") or {}).get(IN_FORCE_ANNOTATION))
    holder = (lease.get("spec") or {}).get("holderIdentity")
    if record is None or record.holder != holder:
        return None, ""  # an earlier leader's record: the current one runs no queues
    return record, record.holder


def _config(text: str | None, record: InForce | None) -> tuple[QueueConfig, str, str]:
    """(the configuration shown, the ConfigMap's refusal, `QueueReport.in_force`)."""
    try:
        return read_config(text or "{}"), "", "configmap"
    except ConfigError as err:
        problem = str(err)
    if record is not None and record.text is not None:
        try:
            return read_config(record.text), problem, "leader"
        except ConfigError:
            pass  # written by another version: nothing known in force
    return QueueConfig(), problem, "none"


@dataclass(frozen=True, slots=True)
class _Rec:
    """A queued pod as read, and its object (for the leader's Events about it)."""

    found: Queued
    raw: Mapping[str, Any]

    @property
    def pod(self) -> QueuedPod:
        return self.found.pod

    @property
    def deleting(self) -> bool:
        return self.found.deleting


def _queued(snapshot: Snapshot, names: ResourceNames, unit_mib: int) -> list[_Rec]:
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
            out.append(_Rec(found, obj))
    return out


def _places(recs: Sequence[_Rec]) -> dict[str, tuple[GpuShare, ...]]:
    """What each bound pod holds by its assignment (`Assignment.charged`), as the node report
    counts it (an assignment naming another node or another pod's UID holds nothing), for
    `counted`: a placed pod counts the memory of its place, as the leader counts its holding."""
    out: dict[str, tuple[GpuShare, ...]] = {}
    for r in recs:
        annotations = (r.raw.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(ASSIGNMENT)
        if not r.found.node or not text:
            continue
        try:
            assignment = decode(text)
        except InvalidRequest:
            continue  # the node report's Problems name it
        if assignment.node != r.found.node or (
            assignment.uid and r.found.uid and assignment.uid != r.found.uid
        ):
            continue
        out[r.pod.key] = assignment.charged
    return out


def headline(report: QueueReport) -> str:
    """The report's first line when there is no queue to show ("": there are queues); the
    table and the web view both open with it."""
    if report.problem:
        return f"The ConfigMap's queue configuration is refused: {report.problem}"
    return "" if report.queues else "No queues are configured."


def render_queues(report: QueueReport) -> str:
    """Who runs queues and on what configuration, the queues (one row per dimension), then the
    held pods with why they wait, in the same words and numbers as `as_dict`."""
    out = [line + "\n" for line in _head(report)]
    if report.queues:
        rows = [("QUEUE", "WEIGHT", "SHARE", "", "DESERVED", "ALLOCATED", "PENDING")]
        for q in report.queues:
            share = f"{float(q.share):.2f}"
            for i, dim in enumerate(DIMENSIONS):
                first = i == 0
                rows.append(
                    (q.name if first else "", str(q.weight) if first else "",
                     share if first else "", dim,
                     str(q.deserved[i]), str(q.allocated[i]), str(q.pending[i]))
                )  # fmt: skip
        out.append("\n" + _table(rows))
    if report.held:
        held = [("HELD POD", "QUEUE", "ASKS", "WHY")]
        held += [(h.pod, h.queue, _asks(h.ask), _why(h)) for h in report.held]
        out.append("\n" + _table(held))
    else:
        out.append("\nNo pods are held.\n")
    return "".join(out)


DIMENSIONS = ("cores", "memory units")
"""The two dimensions of every queue figure, as the text names them (JSON: cores, memory)."""


def _head(report: QueueReport) -> list[str]:
    lines = [_leader_line(report.leader)]
    if head := headline(report):
        lines.append(head)
    if report.problem:
        lines.append(
            "In force: the leader's last good configuration (shown below)"
            if report.in_force == "leader"
            else "In force: not known (no leader records one); the queues cannot be shown"
        )
    c, m = report.capacity
    lines.append(
        f"Cluster: {c} cores / {m} memory units. Units: 100 cores = one whole GPU; a memory "
        f"unit is {report.memory_unit_mib} MiB of GPU memory. SHARE = allocated / deserved "
        "of the queue's fuller dimension."
    )
    return lines


def _leader_line(leader: str) -> str:
    if leader == UNKNOWN:
        return "Queues: whether a leader runs them is not known (the extender's Lease is unread)"
    if not leader:
        return "Queues: " + NO_LEADER.replace(", so nothing releases it", "; nothing is released")
    return f"Queues: run by the extender's leader {leader}"


def _why(h: HeldLine) -> str:
    return f"leader: {h.why}" if h.source == "leader" else h.why


def as_dict(report: QueueReport) -> Mapping[str, Any]:
    """The report for -o json / yaml: the same fields as the text, by name."""
    return {
        "leader": None if report.leader == UNKNOWN else report.leader,
        "inForce": report.in_force,
        "capacity": _dims(report.capacity),
        "memoryUnitMiB": report.memory_unit_mib,
        "problem": report.problem,
        "queues": [
            {
                "name": q.name,
                "weight": q.weight,
                "deserved": _dims(q.deserved),
                "allocated": _dims(q.allocated),
                "pending": _dims(q.pending),
                "share": round(float(q.share), 2),
            }
            for q in report.queues
        ],
        "held": [
            {"pod": h.pod, "queue": h.queue, "asks": _dims(h.ask), "why": h.why, "source": h.source}
            for h in report.held
        ],
    }


def _dims(v: Vec) -> dict[str, int]:
    return {"cores": v[0], "memory": v[1]}


def _asks(v: Vec) -> str:
    return f"{v[0]} cores, {v[1]} memory units"


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        "   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() + "\n"
        for r in rows
    )
