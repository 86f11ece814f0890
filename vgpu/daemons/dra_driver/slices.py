"""The DRA driver's ResourceSlice: published at start and kept current by one loop.

The slice (`vgpu.dra.slices`) lists one shareable device per healthy GPU. It is published again
when health changes (unhealthy GPUs are withdrawn, recovered ones restored), every `resync_s`,
and, for `FAST_RESYNC_S` after a kubelet registers the driver, every `retry_s`: a (re)started
kubelet deletes its node's slices in the background, possibly after it registered us
(k8s.io/kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go, `wipeResourceSlices`). With
`slice_order="fullest"` it follows every claim's allocation through the driver's claim watch
(`claim_event`, `vgpu.daemons.dra_driver.claim_watch`) and the GPUs are listed fullest first
(cores allocated here), so the scheduler's first fit is a best fit. Both survive API failures
(logged, retried); a conflicting write is read again and retried.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vgpu.adapters.kube.calls import KubeConflict, KubeError
from vgpu.adapters.kube.dra_calls import DraKubeApi
from vgpu.adapters.kube.reflector import WatchEvent
from vgpu.api.dra import claim_shares, device_name
from vgpu.core.errors import VgpuError
from vgpu.dra.slices import build_slice, same_devices, slice_name
from vgpu.node.model import GpuInventory

log = logging.getLogger(__name__)
Obj = dict[str, Any]
FAST_RESYNC_S = 20.0
"""After a kubelet registers the driver, how long the slice is checked every `retry_s`."""


@dataclass(frozen=True, slots=True)
class SliceSettings:
    node_name: str
    memory_unit_mib: int
    slice_order: str  # "index" or "fullest"
    resync_s: float
    retry_s: float
    memory_backend: str = ""  # the devices' `memoryBackend` attribute (`driver`, else the mode)


class SliceKeeper:
    """Publishes the node's slice and keeps it current (module doc)."""

    def __init__(
        self,
        settings: SliceSettings,
        inventory: GpuInventory,
        kube: DraKubeApi,
        clock: Callable[[], float],
        stop: threading.Event,
    ) -> None:
        self._cfg = settings
        self._inventory = inventory
        self._kube = kube
        self._clock = clock
        self._stop = stop
        self.updates = 0
        self.published = threading.Event()
        self.wake = threading.Event()
        self._unhealthy: frozenset[str] = frozenset()
        self._used: dict[str, int] | None = None
        self._node_uid = ""
        self._fast_until = 0.0
        self._dirty = True
        self._by_name = {device_name(g.index): g.uuid for g in inventory.gpus}
        self._held: dict[str, dict[str, int]] = {}  # claim uid -> GPU uuid -> cores

    def changed(self, unhealthy: frozenset[str] | None = None) -> None:
        """Publish again soon: health changed (`unhealthy` given) or the order may have."""
        if unhealthy is not None:
            self._unhealthy = unhealthy
            self._dirty = True
        self.wake.set()

    def registered(self) -> None:
        """A kubelet registered the driver: check the slice often for a while (module doc)."""
        self._fast_until = self._clock() + FAST_RESYNC_S
        self._dirty = True
        self.wake.set()

    def run(self) -> None:
        """The slice loop, until `stop`."""
        next_resync = 0.0
        while not self._stop.is_set():
            self.wake.clear()
            now = self._clock()
            fast = now < self._fast_until
            if self._dirty or fast or now >= next_resync:
                self._sync()
            if now >= next_resync:
                next_resync = now + self._cfg.resync_s
            wait = self._cfg.retry_s if self._dirty or fast else next_resync - self._clock()
            self.wake.wait(max(0.0, wait))

    def claim_event(self, event: WatchEvent) -> None:
        """Follow every claim's allocation (`claim_watch`); `_used` is the cores allocated per
        GPU here."""
        if event.type != "SYNCED":
            uid = str((event.object.get("metadata") or {}).get("uid") or "")
            self._held.pop(uid, None)
            if event.type != "DELETED":
                self._held[uid] = self._held_here(event.object)
        self._count(self._held)

    def watch_restarted(self) -> None:
        """Kept as it was: the full list that follows brings every claim again."""

    def _held_here(self, claim: dict[str, object]) -> dict[str, int]:
        by_name = self._by_name
        try:
            shares = claim_shares(claim)
        except VgpuError:
            return {}
        cores: dict[str, int] = {}
        for s in shares:
            if s.pool == self._cfg.node_name and s.device in by_name:
                uuid = by_name[s.device]
                cores[uuid] = cores.get(uuid, 0) + (100 if s.cores is None else s.cores)
        return cores

    def _count(self, held: dict[str, dict[str, int]]) -> None:
        used: dict[str, int] = {}
        for per_gpu in held.values():
            for uuid, cores in per_gpu.items():
                used[uuid] = used.get(uuid, 0) + cores
        if used != self._used:
            self._used = used
            self._dirty = True
            self.wake.set()

    def _sync(self) -> None:
        cfg = self._cfg
        try:
            if not self._node_uid:  # the slice's owner: deleting the node deletes the slice
                node = self._kube.get_node(cfg.node_name)
                self._node_uid = str((node.get("metadata") or {}).get("uid") or "")
            current = self._kube.get_resource_slice(slice_name(cfg.node_name))
            pool = ((current or {}).get("spec") or {}).get("pool") or {}
            generation = int(pool.get("generation") or 0)
            desired = build_slice(
                cfg.node_name,
                self._inventory,
                unhealthy=self._unhealthy,
                memory_unit_mib=cfg.memory_unit_mib,
                generation=generation if current else 1,
                node_uid=self._node_uid,
                used_cores=self._used if cfg.slice_order == "fullest" else None,
                memory_backend=cfg.memory_backend,
            )
            if not same_devices(current, desired):
                self._write(current, desired, generation)
            self._dirty = False
            self.published.set()
        except KubeConflict:
            self._dirty = True  # someone else wrote it: read again and retry
        except KubeError as e:
            self._dirty = True
            log.warning("cannot publish the ResourceSlice (will retry): %s", e)

    def _write(self, current: Obj | None, desired: Obj, generation: int) -> None:
        """Create the slice, or replace it with the version read and the next generation."""
        if current is None:
            self._kube.create_resource_slice(desired)
        else:
            desired["spec"]["pool"]["generation"] = generation + 1
            desired["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self._kube.replace_resource_slice(desired)
        self.updates += 1
        log.info(
            "%s: published ResourceSlice with %d device(s)",
            self._cfg.node_name,
            len(desired["spec"]["devices"]),
        )
