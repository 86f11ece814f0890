"""Snapshot -> Report: who holds which share of which GPU, what is pending, what is wrong.

Pure. A GPU's cell counts every container whose assignment names it on a live pod bound to that
node (admitted or not: the share is taken either way); the PENDING part is what the kubelet has
not admitted yet. Pods that finished (Succeeded/Failed) hold nothing. Nodes without the
`<domain>/gpu-inventory` annotation are listed by name only; a malformed inventory, an assignment
that cannot be read, names another node or a GPU the node does not have, and a pod that asks for
vgpu resources on a vgpu node without any assignment are all reported as problems.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from vgpu.api.decode import MALFORMED, brief
from vgpu.api.inventory import InventoryError, InventoryGpu, NodeGpuInventory, parse_inventory
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.errors import InvalidRequest
from vgpu.inspect.dra import claim_holders, slice_inventories, slice_memory_backends
from vgpu.inspect.gangs import GangMembership, gang_views, membership, pod_group_minimums
from vgpu.inspect.lease import DEFAULT_LEASE, ExtenderStatus, extender_status, parse_time
from vgpu.inspect.model import GpuView, Holder, NodeView, Problem, Report, Unscheduled, Usage
from vgpu.inspect.pods import PodFacts, pod_facts
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.waiting import waiting_pods

Obj = Mapping[str, Any]


@dataclass
class _Collect:
    problems: list[Problem] = field(default_factory=list)
    holders: dict[str, dict[str, list[Holder]]] = field(default_factory=dict)
    """node -> GPU uuid -> holders."""
    pending_pods: dict[str, set[str]] = field(default_factory=dict)


def build_report(
    snapshot: Snapshot,
    only: Sequence[str] = (),
    names: ResourceNames = DEFAULT_NAMES,
    *,
    now: datetime | None = None,
    lease: str = DEFAULT_LEASE,
) -> Report:
    """The report for the nodes named in `only` (all nodes when empty). Restricted to some
    nodes, it keeps the gangs with a member there and leaves out unscheduled pods. `now` (else
    the snapshot's time) dates the extender's Lease named `lease`."""
    collect = _Collect()
    inventories = _inventories(snapshot.nodes, names.inventory, collect)
    dra_nodes = _dra(snapshot, inventories, collect)
    dra_backends = slice_memory_backends(snapshot.resource_slices)
    minimums = pod_group_minimums(snapshot.pod_groups)
    facts = _facts(snapshot.pods, names, minimums, collect)
    for pod, _ in facts:
        if not pod.terminal:
            _place(pod, inventories, collect)
    wanted = set(only) or {_name(n) for n in snapshot.nodes}
    for missing in sorted(set(only) - {_name(n) for n in snapshot.nodes}):
        collect.problems.append(Problem(missing, "no such node", missing))
    views = tuple(
        _node_view(
            n,
            inventories[_name(n)],
            collect,
            "dra" if _name(n) in dra_nodes else "",
            _memory_backend(n, names.domain) or dra_backends.get(_name(n), ""),
        )
        for n in sorted(snapshot.nodes, key=_name)
        if _name(n) in wanted and _name(n) in inventories
    )
    totals = Usage()
    for view in views:
        totals = totals.plus(view.usage)
    unscheduled: tuple[Unscheduled, ...] = ()
    if not only:
        unscheduled, problems = waiting_pods(facts, snapshot, inventories, names)
        collect.problems.extend(problems)
    extender = _extender(snapshot, now, lease, collect)
    return Report(
        nodes=views,
        without_vgpu=tuple(sorted(n for n in wanted - set(inventories) if _exists(n, snapshot))),
        totals=totals,
        gangs=tuple(g for g in gang_views(_members(facts)) if not only or wanted & set(g.nodes)),
        unscheduled=unscheduled,
        problems=tuple(p for p in collect.problems if _concerns(p, wanted, only)),
        taken_at=snapshot.taken_at,
        extender=extender,
    )


def _facts(
    pods: Iterable[Obj], names: ResourceNames, minimums: Mapping[str, int], collect: _Collect
) -> list[tuple[PodFacts, GangMembership | None]]:
    """Every pod's facts; a pod that cannot be read is a problem of its own, never the end of
    the report (one bad value once made the whole report exit 1)."""
    out = []
    for pod in pods:
        try:
            out.append((pod_facts(pod, names), membership(pod, minimums)))
        except (InvalidRequest, *MALFORMED) as err:
            meta = pod.get("metadata") if isinstance(pod, dict) else None
            name = meta.get("name") if isinstance(meta, dict) else None
            subject = f"pod {name}" if isinstance(name, str) else "a pod"
            collect.problems.append(Problem(subject, f"unreadable: {brief(err)}", ""))
    return out


def _name(node: Obj) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def _exists(name: str, snapshot: Snapshot) -> bool:
    return any(_name(n) == name for n in snapshot.nodes)


def _concerns(problem: Problem, wanted: set[str], only: Sequence[str]) -> bool:
    return not only or problem.node in wanted or problem.subject in only


def _inventories(nodes: Iterable[Obj], key: str, collect: _Collect) -> dict[str, NodeGpuInventory]:
    out = {}
    for node in nodes:
        text = ((node.get("metadata") or {}).get("annotations") or {}).get(key)
        if text is None:
            continue
        try:
            out[_name(node)] = parse_inventory(text)
        except InventoryError as e:
            collect.problems.append(
                Problem(_name(node), f"unreadable GPU inventory: {e}", _name(node))
            )
    return out


def _place(pod: PodFacts, inventories: Mapping[str, NodeGpuInventory], collect: _Collect) -> None:
    if pod.admitted.problem:
        message = f"{pod.admitted.problem}; its containers are counted pending"
        collect.problems.append(_problem(pod, message))
    if pod.assignment_error:
        collect.problems.append(_problem(pod, f"unreadable assignment: {pod.assignment_error}"))
        return
    inventory = inventories.get(pod.node)
    if pod.assignment is None:
        if pod.node and inventory is not None and pod.asks_vgpu:
            collect.problems.append(
                _problem(
                    pod,
                    f"asks for vgpu on {pod.node} but has no assignment "
                    "(bound without vgpu-scheduler?); the node agent will refuse it",
                )
            )
        return
    if pod.assignment.node != pod.node:
        where = f"bound to {pod.node}" if pod.node else "not bound"
        collect.problems.append(
            _problem(pod, f"assignment names node {pod.assignment.node} but the pod is {where}")
        )
        return
    if pod.assignment.uid and pod.uid and pod.assignment.uid != pod.uid:
        collect.problems.append(_problem(pod, "assignment was made for another pod (uid differs)"))
        return
    if inventory is None:
        return
    _hold(pod, inventory, collect)


def _hold(pod: PodFacts, inventory: NodeGpuInventory, collect: _Collect) -> None:
    assert pod.assignment is not None
    known = {g.uuid for g in inventory.gpus}
    node_holders = collect.holders.setdefault(pod.node, {})
    for container in pod.assignment.containers:
        admitted = pod.is_admitted(container.name)
        for share in container.shares:
            if share.uuid not in known:
                collect.problems.append(
                    _problem(pod, f"assignment names GPU {share.uuid}, not on {pod.node}")
                )
                continue
            holder = Holder(pod.key, container.name, share.cores, share.memory_mmib, admitted)
            node_holders.setdefault(share.uuid, []).append(holder)
            if not admitted:
                collect.pending_pods.setdefault(pod.node, set()).add(pod.key)
    for reused in pod.assignment.reused:
        _unreuse(node_holders.get(reused.uuid, []), pod.key, reused.cores, reused.memory_mmib)


def _unreuse(holders: list[Holder], pod: str, cores: int, memory_mmib: int) -> None:
    """Take what the kubelet hands on from init containers to later ones off the first holders
    (init containers come first), so the report counts what the pod really holds, as the
    extender charges it (`Assignment.charged`)."""
    for i, h in enumerate(holders):
        if h.pod != pod or not (cores or memory_mmib):
            continue
        less_c, less_m = min(cores, h.cores), min(memory_mmib, h.memory_mmib)
        holders[i] = replace(h, cores=h.cores - less_c, memory_mmib=h.memory_mmib - less_m)
        cores, memory_mmib = cores - less_c, memory_mmib - less_m


def _dra(
    snapshot: Snapshot, inventories: dict[str, NodeGpuInventory], collect: _Collect
) -> set[str]:
    """Add the DRA-mode nodes (a vgpu.io ResourceSlice, no inventory annotation) and the holders
    of their claims (`vgpu.inspect.dra`); returns their names."""
    found = {
        n: i for n, i in slice_inventories(snapshot.resource_slices).items() if n not in inventories
    }
    inventories.update(found)
    holders, problems = claim_holders(snapshot.resource_claims, found)
    collect.problems.extend(problems)
    for node, by_gpu in holders.items():
        for uuid, held in by_gpu.items():
            collect.holders.setdefault(node, {}).setdefault(uuid, []).extend(held)
            if any(not h.admitted for h in held):
                collect.pending_pods.setdefault(node, set()).update(
                    h.container for h in held if not h.admitted
                )
    return set(found)


STALE_POD = "(kubelet)"
"""The holder shown for devices the kubelet still counts for pods gone from the node."""


def _kubelet_stale(g: InventoryGpu) -> tuple[Holder, ...]:
    """The inventory's `kubeletStale` as a holder: taken until the kubelet frees them
    (docs/handshake.md, "Devices the kubelet still counts after its restart")."""
    if not (g.stale_cores or g.stale_memory_mib):
        return ()
    return (
        Holder(
            STALE_POD, "pods gone, not yet freed", g.stale_cores, g.stale_memory_mib * 1000, True
        ),
    )


def _memory_backend(node: Obj, domain: str) -> str:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return str(labels.get(f"{domain}/gpu.memory-backend") or "")


def _node_view(
    node: Obj,
    inventory: NodeGpuInventory,
    collect: _Collect,
    mode: str = "",
    memory_backend: str = "",
) -> NodeView:
    holders = collect.holders.get(_name(node), {})
    gpus = tuple(
        GpuView(
            g.index,
            g.uuid,
            g.model,
            g.healthy,
            g.cores,
            g.memory_mib,
            tuple(sorted(holders.get(g.uuid, []), key=lambda h: (h.pod, h.container)))
            + _kubelet_stale(g),
        )
        for g in sorted(inventory.gpus, key=lambda g: g.index)
    )
    pending = [h for g in gpus for h in g.holders if not h.admitted]
    usage = Usage(
        gpus=len(gpus),
        unhealthy=sum(1 for g in gpus if not g.healthy),
        cores_used=sum(g.cores_used for g in gpus),
        cores_total=sum(g.cores_total for g in gpus),
        memory_used_mmib=sum(g.memory_used_mmib for g in gpus),
        memory_total_mib=sum(g.memory_mib for g in gpus),
        pending_pods=len(collect.pending_pods.get(_name(node), ())),
        pending_cores=sum(h.cores for h in pending),
        pending_memory_mmib=sum(h.memory_mmib for h in pending),
    )
    return NodeView(_name(node), _address(node), _ready(node), gpus, usage, mode, memory_backend)


def _address(node: Obj) -> str:
    addresses = (node.get("status") or {}).get("addresses") or []
    for kind in ("InternalIP", "ExternalIP", "Hostname"):
        for a in addresses:
            if a.get("type") == kind:
                return str(a.get("address") or "")
    return ""


def _ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _members(
    facts: Iterable[tuple[PodFacts, GangMembership | None]],
) -> list[tuple[GangMembership, PodFacts]]:
    return [(gang, pod) for pod, gang in facts if gang is not None]


def _extender(
    snapshot: Snapshot, now: datetime | None, lease: str, collect: _Collect
) -> ExtenderStatus | None:
    """The extender's state from its Lease, when it was looked for; not up is a problem."""
    when = now or parse_time(snapshot.taken_at)
    if not snapshot.lease_read or when is None:
        return None
    status = extender_status(snapshot.extender_lease, lease, when)
    if not status.up:
        collect.problems.append(Problem("extender", status.problem()))
    return status


def _problem(pod: PodFacts, message: str) -> Problem:
    return Problem(pod.key, message, pod.node)
