"""The DRA driver's composition root (`vgpu dra-driver`): slice, preparation, health.

`DraDriver.start()` discovers GPUs through the injected backend and then:

- publishes the node's ResourceSlice (`vgpu.dra.slices`) and keeps it current: at start, on
  health changes (unhealthy GPUs are withdrawn, recovered ones restored) and every `resync_s`;
  with `slice_order="fullest"` it also watches the claims and lists its GPUs fullest first
  (cores allocated here), so the scheduler's first fit is a best fit;
- serves the kubelet (`vgpu.adapters.draplugin`): `NodePrepareResources` reads the claim,
  prepares it (`vgpu.dra.prepare`), writes its CDI spec and checkpoints it; a claim already in the
  checkpoint is answered from there (idempotent, and intact across driver restarts);
  `NodeUnprepareResources` removes both, and the claim's enforcement directories in modes
  vgpu-core and hami (`vgpu.dra.claim_dirs`); device health is streamed to the kubelet.

A DRA driver needs the API server (the claims live there), so unlike the node agent it does not
run without credentials. Every loop survives API failures (logged, retried).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.adapters.dra_checkpoint import Checkpoint
from vgpu.adapters.draplugin import DeviceHealth, DraPluginServer, DraSockets, HealthBoard
from vgpu.adapters.gpu import GpuBackend
from vgpu.adapters.kube import KubeConflict, KubeError
from vgpu.adapters.kube_dra import DraKubeApi
from vgpu.adapters.kubelet_devices import HealthPump
from vgpu.adapters.signals import run_until_signal
from vgpu.api.dra import DRIVER, claim_shares, device_name
from vgpu.core.errors import VgpuError
from vgpu.dra import claim_dirs
from vgpu.dra.prepare import NodeGpus, PreparedClaim, prepare_claim
from vgpu.dra.slices import build_slice, same_devices, slice_name
from vgpu.node.devices import DEFAULT_MEMORY_UNIT_MIB
from vgpu.node.grants import GrantSettings, Refusal
from vgpu.node.health import HealthPolicy, HealthTracker
from vgpu.node.model import GpuInventory, XidEvent

log = logging.getLogger(__name__)
DEFAULT_CDI_DIR = Path("/var/run/cdi")
FAST_RESYNC_S = 20.0
"""After a kubelet registers the driver, how long the slice is checked every `retry_s`."""


@dataclass(frozen=True, slots=True)
class DraConfig:
    node_name: str
    sockets: DraSockets = field(default_factory=lambda: DraSockets(DRIVER))
    cdi_dir: Path = DEFAULT_CDI_DIR
    memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB
    grants: GrantSettings = field(default_factory=GrantSettings)
    dirs: ContainerDirs | None = None  # the enforcement directories (vgpu.dra.claim_dirs)
    health: HealthPolicy = field(default_factory=HealthPolicy)
    slice_order: str = "index"  # or "fullest"
    resync_s: float = 30.0
    retry_s: float = 1.0
    stop_grace_s: float = 2.0

    @property
    def checkpoint_path(self) -> Path:
        return self.sockets.plugins_dir / self.sockets.driver / "checkpoint.json"


class DraDriver:
    def __init__(
        self,
        config: DraConfig,
        backend: GpuBackend,
        kube: DraKubeApi,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self._backend = backend
        self._kube = kube
        self._clock = clock or time.monotonic
        self.inventory: GpuInventory | None = None
        self.checkpoint = Checkpoint(config.checkpoint_path)
        self.health = HealthBoard()
        self.server = DraPluginServer(
            config.sockets, self.prepare, self.unprepare, self.health, self._on_registered
        )
        self.slice_updates = 0
        self._node_uid = ""
        self._fast_until = 0.0
        self._unhealthy: frozenset[str] = frozenset()
        self._used: dict[str, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._dirty = True
        self._published = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pump: HealthPump | None = None
        self._stopped = False

    # ----- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.inventory = inventory = self._backend.inventory()
        log.info("%s: %d GPU(s) for DRA driver %s", cfg.node_name, len(inventory.gpus), DRIVER)
        for claim in self.checkpoint:  # a restart: the runtime may still need these specs
            self._write_cdi(claim)
        log.info("%s: %d prepared claim(s) in the checkpoint", cfg.node_name, len(self.checkpoint))
        self._collect_dirs()
        self._publish_health()
        tracker = HealthTracker(tuple(g.uuid for g in inventory.gpus), cfg.health, self._clock)
        self._pump = HealthPump(self._wait_xid, tracker, self._on_health, wait_s=1.0)
        self.server.start()
        self._pump.start()
        loops = [("vgpu-dra-slice", self._loop)]
        if cfg.slice_order == "fullest":
            loops.append(("vgpu-dra-claims", self._watch_claims))
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop serving and the loops; idempotent. The slice stays (a restart keeps it)."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=self.config.stop_grace_s + 1.0)
        if self._pump is not None:
            self._pump.stop()
        self.server.stop(self.config.stop_grace_s)
        self._backend.close()

    def ready(self) -> bool:
        """Serving, and the slice published at least once."""
        return self._published.is_set() and not self._stopped

    def wait_ready(self, timeout: float = 10.0) -> bool:
        return self._published.wait(timeout)

    def run_until_signal(self) -> None:
        """start(), serve until SIGTERM/SIGINT, then stop(). Main thread only."""
        run_until_signal(self.start, self.stop, self._stop)

    # ----- kubelet: prepare / unprepare ----------------------------------------------------------
    def _node(self) -> NodeGpus:
        assert self.inventory is not None
        return NodeGpus(
            pool=self.config.node_name,
            gpus={g.index: g for g in self.inventory.gpus},
            settings=self.config.grants,
            unhealthy=self._unhealthy,
            memory_unit_mib=self.config.memory_unit_mib,
        )

    def prepare(self, namespace: str, name: str, uid: str) -> PreparedClaim | Refusal:
        """The kubelet's NodePrepareResources for one claim."""
        with self._lock:
            done = self.checkpoint.get(uid)
            if done is not None:
                self._write_cdi(done)  # idempotent: same answer, spec present
                return done
            try:
                claim = self._kube.get_resource_claim(namespace, name)
            except KubeError as e:
                return Refusal(f"cannot read claim {namespace}/{name}: {e}")
            result = prepare_claim(claim, uid, self._node())
            if isinstance(result, Refusal):
                log.warning("refused to prepare %s/%s: %s", namespace, name, result.reason)
                self._collect_dirs()  # a request prepared before another was refused
                return result
            try:
                self._write_cdi(result)
                self.checkpoint.put(result)
            except OSError as e:
                self._collect_dirs()
                return Refusal(f"cannot write the CDI spec or checkpoint: {e.strerror or e}")
            log.info(
                "prepared claim %s/%s: %s",
                namespace,
                name,
                ", ".join(d.device for d in result.devices),
            )
            self._wake.set()  # the slice order may change
            return result

    def unprepare(self, uid: str) -> str | None:
        """The kubelet's NodeUnprepareResources for one claim; unknown claims are done."""
        with self._lock:
            claim = self.checkpoint.remove(uid)
            self._cdi_path(uid).unlink(missing_ok=True)
            if claim is not None:
                log.info("unprepared claim %s/%s", claim.namespace, claim.name)
            self._collect_dirs()
            self._wake.set()
            return None

    def _collect_dirs(self) -> None:
        """Remove the enforcement directories no checkpointed claim names (under the lock)."""
        if self.config.dirs is not None:
            claim_dirs.collect(self.config.dirs, self.checkpoint)

    def _cdi_path(self, uid: str) -> Path:
        return self.config.cdi_dir / f"{DRIVER}-{uid}.json"

    def _write_cdi(self, claim: PreparedClaim) -> None:
        path = self._cdi_path(claim.uid)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(claim.cdi_spec, indent=1, sort_keys=True))
        os.replace(tmp, path)

    def _on_registered(self) -> None:
        """A (re)started kubelet deletes its node's ResourceSlices in the background when it
        starts (k8s.io/kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go,
        `wipeResourceSlices`), possibly after it registered us: check the slice every
        `retry_s` for a while instead of waiting for the next resync."""
        self._fast_until = self._clock() + FAST_RESYNC_S
        self._dirty = True
        self._wake.set()

    # ----- health --------------------------------------------------------------------------------
    def _wait_xid(self, timeout_s: float) -> list[XidEvent]:
        return self._backend.wait_xid(timeout_s)

    def _on_health(self, unhealthy: frozenset[str]) -> None:
        self._unhealthy = unhealthy
        self._publish_health()
        self._dirty = True
        self._wake.set()

    def _publish_health(self) -> None:
        assert self.inventory is not None
        self.health.publish(
            [
                DeviceHealth(
                    self.config.node_name,
                    device_name(g.index),
                    g.uuid not in self._unhealthy,
                    "critical XID" if g.uuid in self._unhealthy else "",
                )
                for g in sorted(self.inventory.gpus, key=lambda g: g.index)
            ]
        )

    # ----- the ResourceSlice ---------------------------------------------------------------------
    def _loop(self) -> None:
        next_resync = 0.0
        while not self._stop.is_set():
            self._wake.clear()
            now = self._clock()
            fast = now < self._fast_until
            if self._dirty or fast or now >= next_resync:
                self._sync_slice()
            if now >= next_resync:
                next_resync = now + self.config.resync_s
            wait = self.config.retry_s if self._dirty or fast else next_resync - self._clock()
            self._wake.wait(max(0.0, wait))

    def _watch_claims(self) -> None:
        """Follow every claim's allocation; `_used` is the cores allocated per GPU here."""
        assert self.inventory is not None
        by_name = {device_name(g.index): g.uuid for g in self.inventory.gpus}
        held: dict[str, dict[str, int]] = {}  # claim uid -> GPU uuid -> cores
        while not self._stop.is_set():
            try:
                for event in self._kube.watch_resource_claims(stop=self._stop):
                    if self._stop.is_set():
                        return
                    if event.type != "SYNCED":
                        uid = str((event.object.get("metadata") or {}).get("uid") or "")
                        held.pop(uid, None)
                        if event.type != "DELETED":
                            held[uid] = self._held_here(event.object, by_name)
                    self._count(held)
            except Exception as e:  # a broken watch must never take the driver down
                log.warning("claim watch failed, restarting: %s", e)
                self._stop.wait(self.config.retry_s)

    def _held_here(self, claim: dict[str, object], by_name: dict[str, str]) -> dict[str, int]:
        try:
            shares = claim_shares(claim)
        except VgpuError:
            return {}
        cores: dict[str, int] = {}
        for s in shares:
            if s.pool == self.config.node_name and s.device in by_name:
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
            self._wake.set()

    def _sync_slice(self) -> None:
        assert self.inventory is not None
        cfg = self.config
        try:
            if not self._node_uid:  # the slice's owner: deleting the node deletes the slice
                node = self._kube.get_node(cfg.node_name)
                self._node_uid = str((node.get("metadata") or {}).get("uid") or "")
            current = self._kube.get_resource_slice(slice_name(cfg.node_name))
            pool = ((current or {}).get("spec") or {}).get("pool") or {}
            generation = int(pool.get("generation") or 0)
            desired = build_slice(
                cfg.node_name,
                self.inventory,
                unhealthy=self._unhealthy,
                memory_unit_mib=cfg.memory_unit_mib,
                generation=generation if current else 1,
                node_uid=self._node_uid,
                used_cores=self._used if cfg.slice_order == "fullest" else None,
            )
            if same_devices(current, desired):
                self._dirty = False
                self._published.set()
                return
            if current is None:
                self._kube.create_resource_slice(desired)
            else:
                desired["spec"]["pool"]["generation"] = generation + 1
                desired["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                self._kube.replace_resource_slice(desired)
            self.slice_updates += 1
            self._dirty = False
            self._published.set()
            log.info(
                "%s: published ResourceSlice with %d device(s)",
                cfg.node_name,
                len(desired["spec"]["devices"]),
            )
        except KubeConflict:
            self._dirty = True  # someone else wrote it: read again and retry
        except KubeError as e:
            self._dirty = True
            log.warning("cannot publish the ResourceSlice (will retry): %s", e)
