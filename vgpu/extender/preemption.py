"""The preempt verb: keep only the candidate nodes where evicting the victims lets the pod fit.

kube-scheduler picks preemption victims from its own accounting, which sees `vgpu.io/cores` as
one number per node. Evicting 80 cores' worth of pods spread over two GPUs does not make room for
an 80-core container on one GPU, so without this verb pods would be evicted for nothing. For each
candidate node the extender removes the victims' holdings in a what-if fork and runs the same
check as the filter (fit, then invariant I against the pending containers of the pods that
stay). Nodes where the pod still does not fit are dropped, and kube-scheduler tries the others;
the victims of a kept node are returned as they came (kube-scheduler chose them against filters
the extender does not run, so sparing one could leave the pod unschedulable after all).

Pods that ask for no vGPU get the candidates back unchanged: they need nothing from the
extender's accounting. Except, for every pod: a node whose victims include a pod of another
queue than the preemptor's (`vgpu.io/queue`; pods of namespaces bound to no queue are in none)
is omitted, unless it is in the preemptor's namespace (`vgpu.core.queues.preemption`): kube-scheduler preempts by priority alone, and a
team at its share with a higher PriorityClass evicted another team's running pods, past every
rule of reclaim, the one way GPUs move between queues. A gang member whose gang cannot be placed whatever is evicted (fewer
members exist than its size, or it mixes claim members with vgpu.io ones) gets no candidate,
whatever it asks: its filter would refuse every node again, so evictions would only leave another
team's pods out for a pod that stays pending (a tenant's high-priority pod naming a gang of 100
did so node after node). A gang member is re-planned as a gang once victims leave, so the check is
the one any plan placing it on the node must pass: the member fits there with the victims and
every reservation of its own gang set aside. Without it, a pod annotated as a gang of one got
other teams' pods evicted for nothing (a CPU-only pod for a GPU pod).

Empty victim lists (Kubernetes 1.38, kubernetes/kubernetes#135486, "Preemption-capable scheduler
extenders must now handle candidates with empty victim lists"): kube-scheduler now sends a node
whose in-tree filters pass with nothing evicted, as a placeholder a preempt-capable extender may
fill (`callExtenders` in pkg/scheduler/framework/preemption/preemption.go). The extender may
return it unchanged (kept for the next extender, then dropped if still empty), omit it (reject),
or add victims. This verb never adds victims (it sees only vGPU holdings, not priorities or
PDBs): an empty list is judged like any other, so the node comes back empty where the pod fits
with nothing evicted and is omitted where it does not. The nodeCacheCapable form encodes the
empty list as `[]` (`convertToMetaVictims` in pkg/scheduler/extender.go), the full form as
`null` (the dry run's nil slice); both are read as empty. A node sent with victims is returned
with the same victims or omitted, never with fewer: kube-scheduler rejects an empty answer for a
node it sent victims for ("expected at least one victim pod on node").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vgpu.api.podspec import PodSpec
from vgpu.core.fit import Code
from vgpu.core.ids import NodeName, PodKey
from vgpu.core.model import Holding, Phase
from vgpu.core.policy.interface import Policy
from vgpu.core.queues.preemption import crossing
from vgpu.extender.service import Extender
from vgpu.extender.wire import BadRequest, Obj, load_request


@dataclass(frozen=True, slots=True)
class Victims:
    """One candidate node's victims: pod UIDs and the PDB violations kube-scheduler counted."""

    uids: tuple[str, ...]
    pdb_violations: int


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """Preempt input (`ExtenderPreemptionArgs`), reduced to UIDs whichever form was sent."""

    pod: Obj
    candidates: dict[str, Victims]


def parse_preemption_args(body: bytes) -> PreemptionArgs:
    """Parse `ExtenderPreemptionArgs`: `NodeNameToMetaVictims` (nodeCacheCapable) or
    `NodeNameToVictims` (full pods); raises `BadRequest` naming the field."""
    doc = load_request(body)
    pod = doc.get("pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise BadRequest("Pod: expected a v1.Pod object with metadata")
    field, nodes = "NodeNameToMetaVictims", doc.get("nodenametometavictims")
    if nodes is None:
        field, nodes = "NodeNameToVictims", doc.get("nodenametovictims")
    if not isinstance(nodes, dict):
        raise BadRequest("NodeNameToMetaVictims or NodeNameToVictims: expected a map of nodes")
    return PreemptionArgs(pod, {str(n): _victims(v, f"{field}[{n}]") for n, v in nodes.items()})


def _victims(value: Any, field: str) -> Victims:
    """One node's victims. `"Pods": null` is an empty list: Go encodes a nil slice as null,
    and the full form's victims are the nil slice kube-scheduler's dry run starts from."""
    if not isinstance(value, dict) or "Pods" not in value:
        raise BadRequest(f"{field}.Pods: expected a list of pods")
    pods = [] if value["Pods"] is None else value["Pods"]
    if not isinstance(pods, list) or not all(isinstance(p, dict) for p in pods):
        raise BadRequest(f"{field}.Pods: expected a list of pods")
    uids = [str(p.get("UID") or (p.get("metadata") or {}).get("uid") or "") for p in pods]
    if not all(uids):
        raise BadRequest(f"{field}.Pods: every victim needs a UID")
    violations = value.get("NumPDBViolations") or 0
    if not isinstance(violations, int):
        raise BadRequest(f"{field}.NumPDBViolations: expected an integer")
    return Victims(tuple(uids), violations)


def encode_preemption(result: dict[str, Victims]) -> bytes:
    """`ExtenderPreemptionResult` JSON (always the Meta form, which the scheduler reads)."""
    nodes = {
        node: {"Pods": [{"UID": uid} for uid in v.uids], "NumPDBViolations": v.pdb_violations}
        for node, v in result.items()
    }
    return json.dumps({"NodeNameToMetaVictims": nodes}).encode()


def _reserved(held: Holding | None) -> bool:
    return held is not None and held.phase is Phase.RESERVED


class Preemptor:
    """Judges preemption candidates for an `Extender`, on its cache."""

    def __init__(self, extender: Extender) -> None:
        self.ext = extender

    def preempt(self, args: PreemptionArgs) -> dict[str, Victims]:
        """The candidates where the pod fits once their victims are gone."""
        spec, policy, size = self.ext.pods.read(args.pod)  # InvalidRequest: the caller's error
        if self.ext.cache.gang_wait(spec, size) is not None:
            return {}  # its filter waits for members (or a fix) whatever is evicted
        kept: dict[str, Victims] = {}
        with self.ext.cache.atomic():
            own = self._own_gang(spec)
            for node, victims in args.candidates.items():
                namespace = spec.request.key.split("/", 1)[0]
                queues = self._queues(NodeName(node), victims.uids)
                if crossing(spec.queue, namespace, queues):
                    continue  # between queues only reclaim evicts
                if not spec.request.wants_gpu:
                    kept[node] = victims
                    continue
                needed = self._needed(spec, policy, NodeName(node), victims.uids, own)
                if needed is not None:
                    kept[node] = Victims(needed, victims.pdb_violations)
        return kept

    def _queues(self, node: NodeName, uids: tuple[str, ...]) -> list[tuple[str | None, str]]:
        """The queue and namespace of each victim the watch shows on the node (a victim it does
        not show, unreadable say, has none to tell)."""
        cache = self.ext.cache
        by_uid = {h.assignment.uid: h.assignment.pod for h in cache.ledger.on_node(node)}
        specs = (cache.pods.get(by_uid[u]) for u in uids if u in by_uid)
        return [(s.queue, s.request.key.split("/", 1)[0]) for s in specs if s is not None]

    def _own_gang(self, spec: PodSpec) -> set[PodKey]:
        """The reservations a gang member's plan may move: its gang's members not yet bound."""
        if spec.gang is None:
            return set()
        members = {spec.request.key, *self.ext.cache.members.get(spec.gang.key, ())}
        ledger = self.ext.cache.ledger
        return {key for key in members if _reserved(ledger.holding(key))}

    def _needed(
        self, spec: PodSpec, policy: Policy, node: NodeName, uids: tuple[str, ...], own: set[PodKey]
    ) -> tuple[str, ...] | None:
        """The victims, unchanged, if their eviction lets the pod fit; else None.

        Victims are never spared: kube-scheduler chose them against every filter it runs
        (ports, volumes, affinity...), of which the extender sees only the resources."""
        by_uid = {h.assignment.uid: h.assignment.pod for h in self.ext.cache.ledger.on_node(node)}
        gone = {by_uid[u] for u in uids if u in by_uid}
        return uids if self._fits_without(spec, policy, node, gone | own) else None

    def _fits_without(
        self, spec: PodSpec, policy: Policy, node: NodeName, gone: set[PodKey]
    ) -> bool:
        """Whether the filter would pass the node with the `gone` pods' holdings released."""
        with self.ext.cache.without(gone):
            outcome = self.ext.outcome(spec, node, policy, gone=frozenset(gone))
        return outcome.code == Code.FITS.value
