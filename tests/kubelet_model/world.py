"""Extender decisions, node agents and kubelet models on a few fake nodes, wired in-process.

The extender side is the real `Extender` over a real `ClusterCache` (watch events applied by
hand); each node has the real agent ledger (`Handoff`) and policy (`HandoffPolicy`) behind the
kubelet model (`tests.kubelet_model.kubelet`). A pod goes: submitted → placed (or a gang
reserved) → bound with its signed assignment → admitted by its node's kubelet, in an order the
test chooses. Every admission is checked against the extender's assignment for that very pod;
`tally` counts admitted / refused-avoidably / refused-unavoidably / swapped.

A refusal is *unavoidable* when the kubelet model ignored a GetPreferredAllocation answer,
narrowed the devices by a topology hint or rejected the pod for topology (behaviours no
extender can steer); any other refusal is *avoidable*: a hand-off defect.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.extender.builders import ledger_of, make_node
from tests.kubelet_model.kubelet import Admission, KubeletModel
from vgpu.adapters.fakegpu import parse_spec
from vgpu.api.assignment import ADMITTED, binding_annotations
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.core.fit import Verdict
from vgpu.core.handoff_rule import conflicts
from vgpu.core.ids import PodKey
from vgpu.core.model import Assignment, Phase
from vgpu.extender.cache.cluster import ClusterCache, canonical
from vgpu.extender.gangs.coordinator import GangWait
from vgpu.extender.service import Extender
from vgpu.node.checkpoint import CheckpointEntry, stale_devices
from vgpu.node.devices import UnitKind, device_list
from vgpu.node.handoff.admissions import Handoff, HeldDevices
from vgpu.node.handoff.allocate import HandoffPolicy
from vgpu.node.inventory import annotation_patch, build_inventory
from vgpu.node.model import GpuInfo, GpuInventory
from vgpu.node.podspec import pod_info

KEY = b"kubelet-model-key"
UNIT_MIB = 1024
CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"
Obj = dict[str, Any]


@dataclass
class Node:
    name: str
    gpus: list[GpuInfo]
    handoff: Handoff
    policy: HandoffPolicy
    kubelet: KubeletModel
    inventory: GpuInventory
    queue: list[PodKey] = field(default_factory=list)


class World:
    def __init__(
        self,
        *,
        nodes: int = 3,
        gpus: int = 8,
        seed: int = 0,
        topology: str = "none",
        report_numa: bool = False,
        ignore_preferred: float = 0.0,
        restart_p: float = 0.0,
        reconcile_p: float = 0.2,
        agent_restart_between: float = 0.0,
        watch_lag: float = 0.0,
        lazy_release: bool = False,
        publish_stale: bool = True,
    ) -> None:
        # The kubelet frees a deleted pod's devices lazily (`KubeletModel.delete`); the agent
        # publishes what its checkpoint still holds for pods gone (`kubeletStale`).
        self.lazy_release = lazy_release
        self.publish_stale = publish_stale
        self.agent_restart_between = agent_restart_between
        # Per bind, the chance that the node's kubelet admits the pod before the agent's pod
        # watch delivers it (each watches the API server on its own): the agent sees it only
        # by listing its node's pods (`HandoffPolicy`'s refresh) until the kubelet is done.
        self.watch_lag = watch_lag
        self.rng = random.Random(seed)
        self.reconcile_p = reconcile_p  # per admission, the agent reconciles (every reconcile_s)
        self.cache = ClusterCache(key=KEY, memory_unit_mib=UNIT_MIB)
        self.ext = Extender(self.cache)
        self.pods: dict[PodKey, Obj] = {}
        self.waiting: list[PodKey] = []
        self.tally: Counter[str] = Counter()
        self.refusals: list[str] = []
        self.swaps: list[str] = []
        self.deleted_gangs: set[str] = set()
        self.nodes: dict[str, Node] = {}
        self.relists = 0  # pod lists the agents asked for at device-plugin calls
        self._uid = 0
        for i in range(nodes):
            self._add_node(f"node-{i}", gpus, topology, report_numa, ignore_preferred, restart_p)

    def _add_node(
        self, name: str, count: int, topology: str, numa: bool, ignore: float, restart: float
    ) -> None:
        inventory = parse_spec(f"{count}xT4", seed=name, numa_nodes=2)
        value = annotation_patch(None, build_inventory(inventory, memory_unit_mib=UNIT_MIB))
        self.cache.apply_node("ADDED", make_node(name, inventory=value or ""))
        gpus = list(inventory.gpus)
        devices = {
            resource: {
                d.id: (d.numa_node if numa else None)
                for d in device_list(gpus, kind, memory_unit_mib=UNIT_MIB)
            }
            for resource, kind in ((CORES, UnitKind.CORES), (MEMORY, UnitKind.MEMORY))
        }
        handoff, policy = self._agent(name, gpus)
        kubelet = KubeletModel(
            devices,
            lambda: self.nodes[name].policy,
            rng=self.rng,
            topology=topology,
            ignore_preferred=ignore,
            restart_p=restart,
            between=lambda: self._between(name),
        )
        self.nodes[name] = Node(name, gpus, handoff, policy, kubelet, inventory)

    def _between(self, name: str) -> None:
        """Between two containers of a pod being admitted, the agent may restart."""
        if self.rng.random() < self.agent_restart_between:
            self.restart_agent(self.nodes[name])

    def _agent(self, name: str, gpus: list[GpuInfo]) -> tuple[Handoff, HandoffPolicy]:
        handoff = Handoff(name, KEY, clock=lambda: 0.0, grace_s=0.0)
        policy = HandoffPolicy(
            handoff, gpus, memory_unit_mib=UNIT_MIB, refresh=lambda: self._relist(name)
        )
        return handoff, policy

    def _relist(self, name: str) -> None:
        """A re-list the agent asks for at a device-plugin call (counted: each is an API call)."""
        self.relists += 1
        self._list(name)

    def _list(self, name: str) -> None:
        """The agent lists its node's pods from the API server (its watch catches up)."""
        node = self.nodes[name]
        for pod in self.pods.values():
            if pod["spec"].get("nodeName") == name:
                node.handoff.observe(pod_info(pod))

    # ----- pods ----------------------------------------------------------------------------------
    def submit(self, pod: Obj) -> PodKey:
        self._uid += 1
        pod = copy.deepcopy(pod)
        meta = pod.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta["uid"] = f"uid-{self._uid}"
        meta["resourceVersion"] = "1"
        pod.setdefault("status", {"phase": "Pending"})
        key = PodKey(f"{meta['namespace']}/{meta['name']}")
        self.pods[key] = pod
        self._apply(key)
        self.waiting.append(key)
        return key

    def _apply(self, key: PodKey, kind: str = "MODIFIED") -> None:
        pod = self.pods[key]
        meta = pod["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self.cache.apply_pod(kind, pod)

    def schedule(self, key: PodKey) -> bool:
        """One scheduling attempt (filter + bind on the first node that takes it)."""
        pod = self.pods[key]
        spec, policy, size = self.ext.pods.read(pod)
        with self.cache.atomic():
            target = self.cache.held_place(spec, size, self.ext.scheduler, self.ext.clock())
            if isinstance(target, GangWait):
                return False
            if target is not None:
                assert spec.gang is not None
                self.cache.gangs.filtered(spec.gang.key, key)
                pending = self.cache.pending_on(target.node, besides=key)
                if conflicts(spec.pending(target), pending) or not self.cache.gangs.ready(
                    spec.gang.key, size
                ):
                    return False
                placed: Assignment | None = target
            else:
                placed = None
                names = list(self.nodes)
                self.rng.shuffle(names)
                for name in names:
                    result = self.ext.cache.place(spec, name, policy, self.ext.scheduler)
                    if not isinstance(result, Verdict):
                        placed = result
                        break
            if placed is None:
                return False
            assignment = canonical(placed)
            ledger_of(self.cache).assume(assignment)
        self._bind(key, assignment)
        return True

    def _bind(self, key: PodKey, assignment: Assignment) -> None:
        pod = self.pods[key]
        pod["spec"]["nodeName"] = assignment.node
        if assignment.shares:
            pod["metadata"].setdefault("annotations", {}).update(
                binding_annotations(assignment, KEY)
            )
        self._apply(key)
        node = self.nodes[assignment.node]
        if not self.watch_lag or self.rng.random() >= self.watch_lag:
            node.handoff.observe(pod_info(pod))
        node.queue.append(key)
        self.waiting.remove(key)

    def admit_next(self, node: Node) -> Admission | None:
        """The node's kubelet admits one of the pods bound to it (any of them: HandlePodAdditions
        sorts a batch by creation time, not by bind order)."""
        if not node.queue:
            return None
        key = node.queue.pop(self.rng.randrange(len(node.queue)))
        pod = self.pods[key]
        result = node.kubelet.admit(pod)
        self._list(node.name)  # a lagging watch has delivered the pod by now
        if result.admitted:
            self.tally["admitted"] += 1
            self._check_grants(key, result)
            self._patch_admitted(node)
        else:
            unavoidable = result.preference_ignored or result.narrowed or result.topology_rejected
            self.tally["refused-unavoidably" if unavoidable else "refused-avoidably"] += 1
            if not unavoidable:
                self.refusals.append(f"{key}: {result.error}")
            spec = self.cache.pods.get(key)
            if spec is not None and spec.gang is not None:
                self.deleted_gangs.add(spec.gang.key)  # a member lost: its controller's move
            pod["status"] = {"phase": "Failed"}
            self._apply(key)
            node.handoff.observe(pod_info(pod))
            self._forget(key)
        if node.handoff.has_unsure() or self.rng.random() < self.reconcile_p:
            self.reconcile(node)  # the agent reconciles soon while an attribution is unsure
        return result

    def delete(self, key: PodKey) -> None:
        pod = self.pods[key]
        spec = self.cache.pods.get(key)
        if spec is not None and spec.gang is not None:
            self.deleted_gangs.add(spec.gang.key)
        self._apply(key, "DELETED")
        node = self.nodes.get(pod["spec"].get("nodeName") or "")
        if node is not None:
            node.handoff.forget(key, pod["metadata"]["uid"])
            if self.lazy_release:
                node.kubelet.delete(pod["metadata"]["uid"])
            else:
                node.kubelet.remove(pod["metadata"]["uid"])
            if key in node.queue:
                node.queue.remove(key)
        self._forget(key)

    def _forget(self, key: PodKey) -> None:
        pod = self.pods.pop(key, None)
        if key in self.waiting:
            self.waiting.remove(key)
        node = self.nodes.get((pod or {}).get("spec", {}).get("nodeName") or "")
        if node is not None and self.lazy_release:
            self.stale_step(node)

    # ----- devices the kubelet still counts for pods gone (docs/handshake.md) -------------------
    def stale_step(self, node: Node) -> None:
        """The agent reads the kubelet's checkpoint and publishes `kubeletStale` (if enabled)."""
        live = {
            p["metadata"]["uid"]
            for p in self.pods.values()
            if p["spec"].get("nodeName") == node.name
        }
        entries = [CheckpointEntry(u, r, ids) for u, r, ids in node.kubelet.checkpointed()]
        stale = stale_devices(entries, live, DEFAULT_NAMES, UNIT_MIB) if self.publish_stale else {}
        published = {gpu: (s.cores, s.memory_mib) for gpu, s in stale.items()}
        inventory = build_inventory(node.inventory, memory_unit_mib=UNIT_MIB, stale=published)
        self.cache.apply_node(
            "MODIFIED", make_node(node.name, inventory=annotation_patch(None, inventory) or "")
        )

    def release(self, node: Node) -> None:
        """The agent's release step: `List` (the kubelet frees what it can), device lists resent
        (the kubelet checkpoints), the checkpoint read again."""
        node.kubelet.held()
        node.kubelet.republished()
        self.stale_step(node)

    def restart_kubelet(self, node: Node) -> None:
        """The kubelet restarts: it reloads its checkpoint file, admits the pods bound to it in
        its first update against it, then its sources are ready; its plugins register again
        (the agent reads the rewritten checkpoint)."""
        node.kubelet.restart()
        while node.queue:
            self.admit_next(node)
        live = {
            p["metadata"]["uid"]
            for p in self.pods.values()
            if p["spec"].get("nodeName") == node.name
        }
        node.kubelet.first_update_done(live)
        node.kubelet.republished()
        self.stale_step(node)

    def restart_agent(self, node: Node) -> None:
        """A new agent process: pods from the watch, admissions from pod-resources."""
        node.handoff, node.policy = self._agent(node.name, node.gpus)
        self._list(node.name)
        self.reconcile(node)

    def reconcile(self, node: Node) -> None:
        """The agent's periodic reconciliation with the kubelet's pod-resources API."""
        by_uid = {
            pod["metadata"]["uid"]: key
            for key, pod in self.pods.items()
            if pod["spec"].get("nodeName") == node.name
        }
        kinds = {CORES: UnitKind.CORES, MEMORY: UnitKind.MEMORY}

        def of(rows: list[tuple[str, str, str, tuple[str, ...]]]) -> list[HeldDevices]:
            return [
                HeldDevices(by_uid[uid], name, kinds[res], ids)
                for uid, name, res, ids in rows
                if uid in by_uid
            ]

        # The checkpoint file as the agent reads it (`vgpu.node.handoff.reconcile`).
        node.handoff.reconcile(of(node.kubelet.held()), of(node.kubelet.checkpointed_containers()))
        self._patch_admitted(node)

    def _patch_admitted(self, node: Node) -> None:
        for pod_key, value in node.handoff.annotation_updates():
            if pod_key in self.pods:
                self.pods[pod_key]["metadata"]["annotations"][ADMITTED] = value
                self._apply(pod_key)
            node.handoff.patched(pod_key, value)

    # ----- checks --------------------------------------------------------------------------------
    def _check_grants(self, key: PodKey, result: Admission) -> None:
        held = self.cache.ledger.holding(key)
        assert held is not None, f"{key} admitted but the extender holds nothing for it"
        for c in held.assignment.containers:
            envs = result.envs.get(c.name, {})
            want = {s.uuid: (s.cores, -(-s.memory_mmib // 1000)) for s in c.shares}
            visible = envs.get("CUDA_VISIBLE_DEVICES", "").split(",")
            cores = [int(x) for x in envs.get("VGPU_CORES", "0").split(",")]
            mib = [int(x) for x in envs.get("VGPU_MEMORY_LIMIT_MIB", "0").split(",")]
            got = {u: (k, m) for u, k, m in zip(visible, cores, mib, strict=False)}
            on = {i.split("::", 1)[0] for i in result.ids.get(c.name, {}).get(CORES, ())}
            if got != want or on != set(want):
                self.tally["swapped"] += 1
                self.swaps.append(f"{key}/{c.name}: granted {got} on {on}, assigned {want}")

    def over_capacity(self) -> list[str]:
        """GPUs whose running containers' grants exceed its cores or memory."""
        problems = []
        for node in self.nodes.values():
            cores: Counter[str] = Counter()
            mem: Counter[str] = Counter()
            for key in self.pods:
                held = self.cache.ledger.holding(key)
                if held is None or held.assignment.node != node.name:
                    continue
                for share in held.assignment.charged:
                    cores[share.uuid] += share.cores
                    mem[share.uuid] += share.memory_mmib
            for gpu in node.gpus:
                if cores[gpu.uuid] > 100 or mem[gpu.uuid] > gpu.memory_mib * 1000:
                    problems.append(f"{gpu.uuid}: {cores[gpu.uuid]} cores, {mem[gpu.uuid]} mMiB")
        return problems

    def partial_gangs(self) -> list[str]:
        """Gangs (none of whose members was deleted) with some but not all members holding.
        A deleted gang whose last member is gone is forgotten (the soak's memory stays flat)."""
        self.deleted_gangs &= set(self.cache.members)
        out = []
        for gang, members in self.cache.members.items():
            if gang in self.deleted_gangs or not members:
                continue
            holding = [m for m in members if self.cache.ledger.holding(m) is not None]
            spec = self.cache.pods.get(next(iter(members)))
            size = spec.gang.min_member if spec and spec.gang else None
            if holding and size is not None and len(holding) < size:
                out.append(f"{gang}: {len(holding)} of {size} hold a place")
        return out

    def bound_phase(self, key: PodKey) -> Phase | None:
        held = self.cache.ledger.holding(key)
        return held.phase if held else None
