"""The containers running on this node, by runtime container ID, from the pods the agent watches.

NVML names host processes, the process's cgroup names a pod UID and a container ID
(`vgpu.node.cgroup`), and the pod objects' `status.containerStatuses[].containerID` name the
container. `ContainerDirectory` keeps that last mapping for every pod bound to the node (not
only vGPU pods: a pod without a vGPU grant that uses a GPU is exactly what the watchdog must
see) and resolves a process's cgroup owner to a `ContainerKey`, or says why it can't:

- `GONE`: the process ended before its cgroup could be read;
- `STARTING`: its pod is known but the pod status does not list the container's ID yet;
- `FOREIGN`: it runs in no pod the agent watches (a host process, another runtime).

A static pod's processes run under the UID in its `kubernetes.io/config.mirror` annotation, not
the mirror pod's; both are indexed. Pure apart from a lock: the pod watch writes while the
watchdog and the metrics endpoint read.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.core.ids import PodKey, pod_key
from vgpu.node.cgroup import CgroupOwner, container_id, normalize_uid

MIRROR = "kubernetes.io/config.mirror"
_STATUS_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")


@dataclass(frozen=True, slots=True, order=True)
class ContainerKey:
    """One container of one pod incarnation."""

    namespace: str
    pod: str
    container: str
    pod_uid: str = ""

    @property
    def pod_key(self) -> PodKey:
        return pod_key(self.namespace, self.pod)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


class Unresolved(enum.Enum):
    GONE = "gone"
    STARTING = "starting"
    FOREIGN = "foreign"


@dataclass(frozen=True, slots=True)
class _Pod:
    uid: str
    aliases: tuple[str, ...]
    containers: Mapping[str, ContainerKey]  # container ID -> key


def _read(pod: Mapping[str, Any]) -> _Pod:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    uid = normalize_uid(str(meta.get("uid", "")))
    mirror = (meta.get("annotations") or {}).get(MIRROR)
    aliases = (uid, normalize_uid(str(mirror))) if mirror else (uid,)
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    containers = {}
    for field in _STATUS_LISTS:
        for entry in status.get(field) or ():
            raw = entry.get("containerID") if isinstance(entry, Mapping) else None
            if raw:
                key = ContainerKey(namespace, name, str(entry.get("name", "")), uid)
                containers[container_id(str(raw))] = key
    return _Pod(uid, aliases, containers)


class ContainerDirectory:
    """Container IDs → containers of the pods bound to this node. Thread-safe."""

    def __init__(self) -> None:
        self._pods: dict[str, _Pod] = {}  # by pod UID
        self._by_alias: dict[str, str] = {}  # cgroup pod UID -> pod UID
        self._by_id: dict[str, ContainerKey] = {}
        self._lock = threading.Lock()

    def observe(self, pod: Mapping[str, Any]) -> None:
        """Record a pod (added or modified), replacing what was known of it."""
        entry = _read(pod)
        if not entry.uid:
            return
        with self._lock:
            self._drop(entry.uid)
            self._pods[entry.uid] = entry
            for alias in entry.aliases:
                self._by_alias[alias] = entry.uid
            self._by_id.update(entry.containers)

    def forget(self, pod: Mapping[str, Any]) -> None:
        """Drop a deleted pod."""
        uid = normalize_uid(str((pod.get("metadata") or {}).get("uid", "")))
        with self._lock:
            self._drop(uid)

    def _drop(self, uid: str) -> None:
        old = self._pods.pop(uid, None)
        if old is None:
            return
        for alias in old.aliases:
            self._by_alias.pop(alias, None)
        for cid in old.containers:
            self._by_id.pop(cid, None)

    def resolve(self, owner: CgroupOwner | None) -> ContainerKey | Unresolved:
        """The container a process's cgroup owner names (None: the process is in no pod)."""
        if owner is None:
            return Unresolved.FOREIGN
        with self._lock:
            key = self._by_id.get(owner.container_id)
            if key is not None:
                return key
            return Unresolved.STARTING if owner.pod_uid in self._by_alias else Unresolved.FOREIGN

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_id)
