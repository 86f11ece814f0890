"""A model of the kubelet's device manager, written from the kubelet's source, not from vgpu's
protocol. It drives any device-plugin policy (`preferred`, `allocate`) the way the kubelet would.

From pkg/kubelet/cm/devicemanager/manager.go (Kubernetes 1.30-1.32):

* `Allocate(pod, container)`: containers come init containers first, then app containers, each
  in spec order. The pod's reuse pool (`devicesToReuse`): after a regular init container is
  allocated its devices join the pool (`addContainerAllocatedResources`); after a restartable
  init container ("sidecar", `restartPolicy: Always`) or an app container, what it holds leaves
  the pool (`removeContainerAllocatedResources`).
* `allocateContainerResources`: walks `container.Resources.Limits`, a Go map, so the order of
  resources is random; one Allocate RPC per resource with the chosen IDs in set order (random);
  the first error fails the pod's admission (UnexpectedAdmissionError) and the IDs of that call
  are given back.
* `devicesToAllocate`: a container that already holds devices of the resource (checkpoint, e.g.
  after a kubelet restart) gets no new ones and no RPC; devices come from the reuse pool first,
  and when the pool covers the request GetPreferredAllocation is not called; otherwise the
  candidates are split by the topology hint (`filterByAffinity`: aligned, unaligned, none) and
  GetPreferredAllocation is called with the drawn IDs as `must_include` — with only the aligned
  devices when more are aligned than still needed, else with every available device after
  taking all aligned ones; its answer is intersected with the candidates and topped up.
* Restarts: allocations are checkpointed after each container's allocation
  (`allocateContainerResources` ends with `writeCheckpoint`) and survive; the reuse pool is memory only, rebuilt as
  admission walks the pod's containers again.
* Deleted pods (`gone`): their devices stay taken until the next Allocate or pod-resources
  `List` (`UpdateAllocatedDevices`, called from `allocateContainerResources` and from
  pkg/kubelet/apis/podresources/server_v1.go `List`), and that frees nothing until every pod
  source is ready: after a restart (`restart`), only once the first pod update was handled
  (pkg/kubelet/kubelet.go `syncLoopIteration`). `checkpointed()` is what the checkpoint file
  holds: it is rewritten at an Allocate or a device-list update (`republished`).

The model can also ignore GetPreferredAllocation (`ignore_preferred`, as a kubelet without the
plugin option or a racing allocation would) and restart between containers (`restart_p`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tests.kubelet_model.topology import best_hint, device_hints


class Plugin(Protocol):
    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]: ...

    def allocate(self, resource: str, container_ids: Sequence[Sequence[str]]) -> Any: ...


@dataclass
class Admission:
    """What happened to one pod: admitted, or the error that failed it."""

    admitted: bool
    error: str = ""
    envs: dict[str, dict[str, str]] = field(default_factory=dict)  # container -> merged envs
    ids: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    preference_ignored: bool = False  # some GetPreferredAllocation answer was not asked/used
    narrowed: bool = False  # a topology hint narrowed the devices offered
    topology_rejected: bool = False


@dataclass
class _Container:
    name: str
    role: str  # "init", "sidecar", "app"
    limits: dict[str, int]


def containers_of(pod: Mapping[str, Any], resources: Sequence[str]) -> list[_Container]:
    spec = pod.get("spec") or {}
    out = []
    for section in ("initContainers", "containers"):
        for raw in spec.get(section) or ():
            limits = (raw.get("resources") or {}).get("limits") or {}
            role = "app"
            if section == "initContainers":
                role = "sidecar" if raw.get("restartPolicy") == "Always" else "init"
            asks = {r: int(v) for r, v in limits.items() if r in resources and int(v) > 0}
            out.append(_Container(str(raw["name"]), role, asks))
    return out


class KubeletModel:
    def __init__(
        self,
        devices: Mapping[str, Mapping[str, int | None]],
        plugin: Callable[[], Plugin],
        *,
        rng: random.Random,
        topology: str = "none",
        ignore_preferred: float = 0.0,
        restart_p: float = 0.0,
        between: Callable[[], None] = lambda: None,
    ) -> None:
        self.between = between  # runs between two containers' allocations (an agent restart)
        self.numa = {r: dict(d) for r, d in devices.items()}
        self.plugin = plugin  # called per RPC: the agent behind it may have restarted
        self.rng = rng
        self.topology = topology
        self.ignore_preferred = ignore_preferred
        self.restart_p = restart_p
        self.in_use: dict[str, set[str]] = {r: set() for r in devices}
        self.checkpoint: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {}
        self.restarts = 0
        self.gone: set[str] = set()  # deleted pods whose devices are not yet freed
        self.sources_ready = True
        self.file: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {}  # the checkpoint file
        self.roles: dict[str, dict[str, str]] = {}  # pod uid -> container -> role

    # ----- pods ----------------------------------------------------------------------------------
    def admit(self, pod: Mapping[str, Any]) -> Admission:
        uid = str(pod["metadata"]["uid"])
        containers = containers_of(pod, list(self.numa))
        self.roles[uid] = {c.name: c.role for c in containers}
        result = Admission(True)
        self._update_allocated()
        held = self.checkpoint.setdefault(uid, {})
        pool: dict[str, set[str]] = {}
        for i, c in enumerate(containers):
            if i:
                self.between()
            if i and self.rng.random() < self.restart_p:
                self.restarts += 1  # in-memory pool lost, rebuilt from the checkpoint
                pool = {}
                for before in containers[:i]:
                    self._update_pool(pool, before, held.get(before.name, {}))
            error = self._allocate_container(uid, c, pool, held, result)
            if error:
                self.remove(uid)
                return Admission(
                    False,
                    error,
                    {},
                    {},
                    result.preference_ignored,
                    result.narrowed,
                    result.topology_rejected,
                )
            self._update_pool(pool, c, held.get(c.name, {}))
            self.republished()  # writeCheckpoint after each container's allocation
        result.ids = {name: dict(res) for name, res in held.items()}
        return result

    def delete(self, uid: str) -> None:
        """The pod was deleted: its devices stay taken until freed lazily (module doc)."""
        if uid in self.checkpoint:
            self.gone.add(uid)

    def restart(self) -> None:
        """A new kubelet process: the checkpoint file is all it keeps; sources not yet ready."""
        self.restarts += 1
        self.checkpoint = {u: {c: dict(r) for c, r in p.items()} for u, p in self.file.items()}
        self.gone = set(self.checkpoint)  # until its pod update says otherwise
        self.in_use = {r: self._held_ids(r) for r in self.numa}
        self.sources_ready = False

    def first_update_done(self, live: set[str]) -> None:
        """The first pod update (pods `live` on the node) was handled: sources are ready."""
        self.gone -= live
        self.sources_ready = True

    def republished(self) -> None:
        """A ListAndWatch update (or an Allocate): the checkpoint file is rewritten."""
        self.file = {u: {c: dict(r) for c, r in p.items()} for u, p in self.checkpoint.items()}

    def checkpointed(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(pod uid, resource, IDs) per entry of the checkpoint file."""
        return [
            (uid, resource, ids)
            for uid, containers in self.file.items()
            for per_resource in containers.values()
            for resource, ids in per_resource.items()
        ]

    def checkpointed_containers(self) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """(pod uid, container, resource, IDs) per entry of the checkpoint file: unlike the
        List, it names regular init containers too (`PodDevicesEntry.ContainerName`)."""
        return [
            (uid, name, resource, ids)
            for uid, containers in self.file.items()
            for name, per_resource in containers.items()
            for resource, ids in per_resource.items()
        ]

    def _update_allocated(self) -> None:
        if self.sources_ready:
            for uid in sorted(self.gone):
                self.remove(uid)
            self.gone.clear()

    def remove(self, uid: str) -> None:
        """The pod is gone (deleted, failed, finished): its devices are free again
        (`UpdateAllocatedDevices` drops pods no longer active)."""
        for per_resource in self.checkpoint.pop(uid, {}).values():
            for resource, ids in per_resource.items():
                self.in_use[resource] -= set(ids)
        self.roles.pop(uid, None)

    def held(self) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """(pod uid, container, resource, IDs): what the pod-resources API lists (it frees the
        devices of deleted pods first, once sources are ready). It lists a pod's app containers
        and restartable init containers, never a regular init container, whose devices the
        checkpoint still holds (pkg/kubelet/apis/podresources/server_v1.go `List`)."""
        self._update_allocated()
        return [
            (uid, name, resource, ids)
            for uid, containers in self.checkpoint.items()
            if uid not in self.gone
            for name, per_resource in containers.items()
            if self.roles.get(uid, {}).get(name) != "init"
            for resource, ids in per_resource.items()
        ]

    @staticmethod
    def _update_pool(pool: dict[str, set[str]], c: _Container, held: Mapping[str, Any]) -> None:
        for resource, ids in held.items():
            if c.role == "init":
                pool.setdefault(resource, set()).update(ids)
            else:
                pool.setdefault(resource, set()).difference_update(ids)

    # ----- one container -------------------------------------------------------------------------
    def _allocate_container(
        self,
        uid: str,
        c: _Container,
        pool: dict[str, set[str]],
        held: dict[str, dict[str, tuple[str, ...]]],
        result: Admission,
    ) -> str:
        mine = held.setdefault(c.name, {})
        hint = self._hint(c, pool, mine, result)
        if hint is False:
            return f"TopologyAffinityError: {c.name}"
        resources = list(c.limits)
        self.rng.shuffle(resources)  # Go map order
        for resource in resources:
            if resource in mine:
                continue  # already allocated (restart): no RPC
            result.preference_ignored = result.narrowed = False  # of the call that fails, if any
            ids = self._devices_to_allocate(resource, c.limits[resource], pool, hint, result)
            if isinstance(ids, str):
                return ids
            self.in_use[resource] |= set(ids)
            answer = self.plugin().allocate(resource, [ids])
            if not isinstance(answer, list):
                self.in_use[resource] -= set(ids) - self._held_ids(resource)
                return f"UnexpectedAdmissionError: {getattr(answer, 'reason', answer)}"
            mine[resource] = tuple(ids)
            result.envs.setdefault(c.name, {}).update(answer[0].envs)
        return ""

    def _held_ids(self, resource: str) -> set[str]:
        return {
            i
            for containers in self.checkpoint.values()
            for per in containers.values()
            for i in per.get(resource, ())
        }

    def _hint(
        self, c: _Container, pool: dict[str, set[str]], mine: dict[str, Any], result: Admission
    ) -> frozenset[int] | bool | None:
        if self.topology == "none":
            return None
        per_resource = []
        for resource, n in c.limits.items():
            numa = self.numa[resource]
            if resource in mine:
                per_resource.append(
                    device_hints({d: numa[d] for d in mine[resource]}, mine[resource], n)
                )
                continue
            free = set(numa) - self.in_use[resource] | pool.get(resource, set())
            per_resource.append(device_hints(numa, free, n))
        nodes = frozenset(n for r in self.numa.values() for n in r.values() if n is not None)
        hint, admitted = best_hint(self.topology, per_resource, nodes)
        if not admitted:
            result.topology_rejected = True
            return False
        return None if hint is None else hint.mask

    def _devices_to_allocate(
        self,
        resource: str,
        required: int,
        pool: dict[str, set[str]],
        hint: frozenset[int] | bool | None,
        result: Admission,
    ) -> list[str] | str:
        chosen: list[str] = []

        def take(candidates: Sequence[str]) -> bool:
            for d in candidates:
                if len(chosen) == required:
                    break
                if d not in chosen:
                    chosen.append(d)
            return len(chosen) == required

        reusable = sorted(pool.get(resource, ()))
        self.rng.shuffle(reusable)
        if take(reusable):
            return chosen  # the pool covers it: GetPreferredAllocation is not called
        numa = self.numa[resource]
        available = sorted(set(numa) - self.in_use[resource])
        self.rng.shuffle(available)
        if len(available) < required - len(chosen):
            return (
                f"UnexpectedAdmissionError: requested number of devices unavailable for "
                f"{resource}: requested {required}, available {len(available)}"
            )
        if isinstance(hint, frozenset) and any(n is not None for n in numa.values()):
            aligned = [d for d in available if numa[d] in hint]
            other = [d for d in available if numa[d] is not None and numa[d] not in hint]
            other += [d for d in available if numa[d] is None]
            result.narrowed |= bool(other)
        else:
            aligned, other = [], available
        if required - len(chosen) < len(aligned):
            answer = self._preferred(resource, aligned + chosen, list(chosen), required, result)
            if take([d for d in answer if d in set(aligned)]) or take(aligned):
                return chosen
            return "UnexpectedAdmissionError: unexpectedly allocated less than required"
        if take(aligned):
            return chosen
        answer = self._preferred(resource, available + chosen, list(chosen), required, result)
        if take([d for d in answer if d in set(available)]) or take(other):
            return chosen
        return "UnexpectedAdmissionError: requested number of devices unavailable"

    def _preferred(
        self,
        resource: str,
        available: list[str],
        must: list[str],
        size: int,
        result: Admission,
    ) -> list[str]:
        if self.rng.random() < self.ignore_preferred:
            result.preference_ignored = True
            return []
        answer = self.plugin().preferred(resource, available, must, size)
        offered = set(available)
        return [d for d in answer if d in offered]
