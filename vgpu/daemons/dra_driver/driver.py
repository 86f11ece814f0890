"""The DRA driver's composition root (`vgpu dra-driver`): slice, preparation, health.

`DraDriver.start()` discovers GPUs through the injected backend and then:

- publishes the node's ResourceSlice and keeps it current (`vgpu.daemons.dra_driver.slices`);
- serves the kubelet (`vgpu.adapters.draplugin`): `NodePrepareResources` reads the claim,
  prepares it (`vgpu.dra.prepare`), writes its CDI spec (`vgpu.adapters.cdi_specs`) and
  checkpoints it; a claim already in the
  checkpoint is answered from there (idempotent, and intact across driver restarts);
  `NodeUnprepareResources` removes both, and the claim's enforcement directories in modes
  vgpu-core and hami (`vgpu.dra.claim_dirs`); device health is streamed to the kubelet;
- with the driver's memory limits, answers the CDI hook each container of a claim runs
  (`vgpu.daemons.dra_driver.hook`): the container is created once its pod's limit is set.

A DRA driver needs the API server (the claims live there), so unlike the node agent it does not
run without credentials. Every loop survives API failures (logged, retried).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vgpu.adapters.cdi_specs import CdiSpecs
from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.adapters.dmem import decide
from vgpu.adapters.dra_checkpoint import Checkpoint
from vgpu.adapters.draplugin import DeviceHealth, DraPluginServer, DraSockets, HealthBoard
from vgpu.adapters.gpu import GpuBackend
from vgpu.adapters.hook_socket import HookSocket
from vgpu.adapters.kube.calls import KubeError
from vgpu.adapters.kube.dra_calls import DraKubeApi
from vgpu.adapters.kubelet.node_plugins import HealthPump
from vgpu.adapters.procfs import ProcCgroupReader
from vgpu.adapters.signals import run_until_signal
from vgpu.api.dra import DRIVER, device_name
from vgpu.daemons.dra_driver.claim_watch import ClaimFollower, follow_claims
from vgpu.daemons.dra_driver.hook import HookAnswers, serve_hook
from vgpu.daemons.dra_driver.joiners import Joiners
from vgpu.daemons.dra_driver.limits import ClaimLimits
from vgpu.daemons.dra_driver.slices import SliceKeeper, SliceSettings
from vgpu.dra import claim_dirs
from vgpu.dra.prepare import NodeGpus, PreparedClaim, prepare_claim, with_hook
from vgpu.node.devices import DEFAULT_MEMORY_UNIT_MIB
from vgpu.node.driver_limits import LimitFunctions
from vgpu.node.driver_mode import Choice, DriverLimits
from vgpu.node.grants import GrantSettings, Refusal
from vgpu.node.health import HealthPolicy, HealthTracker
from vgpu.node.model import GpuInventory, XidEvent
from vgpu.node.shared_bound import shared_files

log = logging.getLogger(__name__)
DEFAULT_CDI_DIR = Path("/var/run/cdi")


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
    driver_limits: DriverLimits = DriverLimits.OFF  # the driver memory backend (docs/isolation.md)
    driver_soft_limits: bool = False  # also set each pod's soft limit (a floor) to its claims'
    cgroupfs: Path = Path("/sys/fs/cgroup")  # cgroup v2 as the driver sees it (pod cgroups, dmem)
    nvml_library: str = "libnvidia-ml.so.1"
    retry_s: float = 1.0
    stop_grace_s: float = 2.0
    join_poll_s: float = 0.05  # how often a pod joining a prepared claim is looked for (joiners)
    trim_s: float = 30.0  # how often the claims' shared files are cut back (vgpu.node.shared_bound)
    hook_program: Path | None = None  # the CDI hook to install with the driver's limits (hook)
    state_dir: Path = Path("/var/lib/vgpu")  # host dir of the installed hook and its socket

    @property
    def hook_socket(self) -> Path:
        return self.state_dir / "dra" / "hook.sock"

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
        nvml: LimitFunctions | None = None,
    ) -> None:
        """`nvml`: NVML's memory-limit functions already opened (tests); else, unless the
        driver limits are off, `config.nvml_library` is loaded at start."""
        self.config = config
        self._nvml = nvml
        self.memory_choice = Choice(False, "not started")
        self._claim_limits: ClaimLimits | None = None
        self._joiners: Joiners | None = None
        self._hook: HookSocket | None = None
        self._hook_paths: tuple[str, str] | None = None
        self._backend = backend
        self._kube = kube
        self._clock = clock or time.monotonic
        self.inventory: GpuInventory | None = None
        self.checkpoint = Checkpoint(config.checkpoint_path)
        self.health = HealthBoard()
        self.server = DraPluginServer(
            config.sockets, self.prepare, self.unprepare, self.health, self._on_registered
        )
        self.cdi = CdiSpecs(config.cdi_dir)
        self.slice: SliceKeeper | None = None
        self._unhealthy: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pump: HealthPump | None = None
        self._stopped = False

    # ----- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.inventory = inventory = self._backend.inventory()
        log.info("%s: %d GPU(s) for DRA driver %s", cfg.node_name, len(inventory.gpus), DRIVER)
        self._choose_memory_backend(inventory)
        settings = SliceSettings(
            cfg.node_name,
            cfg.memory_unit_mib,
            cfg.slice_order,
            cfg.resync_s,
            cfg.retry_s,
            self.memory_choice.backend(cfg.grants.mode.value),
        )
        self.slice = SliceKeeper(settings, inventory, self._kube, self._clock, self._stop)
        for claim in self.checkpoint:  # a restart: the runtime may still need these specs
            self.cdi.write(with_hook(claim, self._hook_paths))
        log.info("%s: %d prepared claim(s) in the checkpoint", cfg.node_name, len(self.checkpoint))
        self._collect_dirs()
        self._publish_health()
        tracker = HealthTracker(tuple(g.uuid for g in inventory.gpus), cfg.health, self._clock)
        self._pump = HealthPump(self._wait_xid, tracker, self._on_health, wait_s=1.0)
        self.server.start()
        self._pump.start()
        loops = [("vgpu-dra-slice", self.slice.run)]
        if self._claim_limits is not None:
            loops.append(("vgpu-dra-limits", self._limits_loop))
        if self._joiners is not None:
            loops.append(("vgpu-dra-joiners", self._joiners.run))
        if cfg.dirs is not None:
            loops.append(("vgpu-dra-trim", self._trim_shared))
        followers: list[ClaimFollower] = []  # one claim watch for every part that needs one
        if cfg.slice_order == "fullest":
            followers.append(self.slice)
        if self._joiners is not None:
            followers.append(self._joiners)
        if followers:
            loops.append(("vgpu-dra-claims", lambda: self._follow_claims(followers)))
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _choose_memory_backend(self, inventory: GpuInventory) -> None:
        """The node's memory backend, as the node agent decides it; with the driver's limits,
        each prepared claim's pods get theirs (`vgpu.daemons.dra_driver.limits`)."""
        cfg = self.config
        self.memory_choice, nvml = decide(
            cfg.driver_limits,
            inventory,
            cfg.grants.mode.value,
            library=cfg.nvml_library,
            cgroupfs=cfg.cgroupfs,
            nvml=self._nvml,
            cores_why=cfg.grants.mode_why,
        )
        if nvml is not None:
            self._claim_limits = ClaimLimits(
                self._kube, nvml, cfg.cgroupfs, soft=cfg.driver_soft_limits
            )
            self._joiners = Joiners(
                self._claim_limits, self._node, self._is_prepared, self._stop, cfg.join_poll_s
            )
            if cfg.hook_program is not None:  # (vgpu.daemons.dra_driver.hook)
                answers = HookAnswers(
                    self._claim_limits,
                    self._node,
                    self._prepared,
                    ProcCgroupReader(),
                    self._joiners,
                )
                self._hook, self._hook_paths = serve_hook(
                    cfg.hook_program, cfg.state_dir, cfg.hook_socket, answers
                )

    def _prepared(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            return self.checkpoint.get(uid)

    def _is_prepared(self, uid: str) -> bool:
        with self._lock:
            return self.checkpoint.get(uid) is not None

    def _follow_claims(self, followers: list[ClaimFollower]) -> None:
        follow_claims(self._kube, followers, self._stop, self.config.retry_s)

    def _limits_loop(self) -> None:
        while not self._stop.wait(self.config.resync_s):
            self.reapply_limits()

    def reapply_limits(self) -> int:
        """Set the limits of every prepared claim's pods again; returns the claims done.

        The kubelet prepares a claim once per node, so no call comes when a second pod starts
        using a prepared (shared) claim: `Joiners` sets its limit when its cgroup appears; this
        pass, every `resync_s`, is the backstop (a broken watch, a failed set, a driver reload
        that lost the limits). A claim
        none of whose pods is here any more is left alone; a failure is logged."""
        with self._lock:
            prepared = [(c.namespace, c.name) for c in self.checkpoint]
        node, done = self._node(), 0
        for namespace, name in prepared:
            if self._claim_limits is None or self._stop.is_set():
                break
            try:
                claim = self._kube.get_resource_claim(namespace, name)
            except KubeError as e:
                log.warning(
                    "cannot read claim %s/%s to set its limits again: %s", namespace, name, e
                )
                continue
            refused = self._claim_limits.apply(claim, node.pool, node.gpus, missing_ok=True)
            if refused is not None:
                log.warning("%s", refused.reason)
            else:
                done += 1
        return done

    def stop(self) -> None:
        """Stop serving and the loops; idempotent. The slice stays (a restart keeps it)."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        if self.slice is not None:
            self.slice.wake.set()
        if self._joiners is not None:
            self._joiners.wake()
        for thread in self._threads:
            thread.join(timeout=self.config.stop_grace_s + 1.0)
        if self._pump is not None:
            self._pump.stop()
        self.server.stop(self.config.stop_grace_s)
        if self._hook is not None:
            self._hook.stop()
        self._backend.close()

    def ready(self) -> bool:
        """Serving, and the slice published at least once."""
        return self.slice is not None and self.slice.published.is_set() and not self._stopped

    def wait_ready(self, timeout: float = 10.0) -> bool:
        return self.slice is not None and self.slice.published.wait(timeout)

    @property
    def slice_updates(self) -> int:
        """How often the slice was written (created or replaced)."""
        return 0 if self.slice is None else self.slice.updates

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
            hook=self._hook_paths,
        )

    def prepare(self, namespace: str, name: str, uid: str) -> PreparedClaim | Refusal:
        """The kubelet's NodePrepareResources for one claim."""
        with self._lock:
            done = self.checkpoint.get(uid)
            if done is not None:
                self.cdi.write(with_hook(done, self._hook_paths))  # idempotent: spec present
                return done
            try:
                claim = self._kube.get_resource_claim(namespace, name)
            except KubeError as e:
                return Refusal(f"cannot read claim {namespace}/{name}: {e}")
            node = self._node()
            result = prepare_claim(claim, uid, node)
            if not isinstance(result, Refusal) and self._claim_limits is not None:
                ready = frozenset() if self._joiners is None else self._joiners.with_cgroups(claim)
                result = self._claim_limits.apply(claim, node.pool, node.gpus) or result
                if self._joiners is not None and not isinstance(result, Refusal):
                    self._joiners.limited(claim, ready)
            if isinstance(result, Refusal):
                log.warning("refused to prepare %s/%s: %s", namespace, name, result.reason)
                self._collect_dirs()  # a request prepared before another was refused
                return result
            try:
                self.cdi.write(result)
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
            self._slice_changed()  # the slice order may change
            return result

    def unprepare(self, uid: str) -> str | None:
        """The kubelet's NodeUnprepareResources for one claim; unknown claims are done."""
        with self._lock:
            claim = self.checkpoint.remove(uid)
            self.cdi.remove(uid)
            if claim is not None:
                log.info("unprepared claim %s/%s", claim.namespace, claim.name)
            self._collect_dirs()
            self._slice_changed()
            return None

    def _trim_shared(self) -> None:
        """Every `trim_s`, cut each claim's shared files back to their bound: every container
        using the claim can write them, on the node's disk outside the kubelet's accounting."""
        dirs, files = self.config.dirs, shared_files(self.config.grants.mode)
        while dirs is not None and not self._stop.wait(self.config.trim_s):
            try:
                for line in dirs.trim_shared(files):
                    log.warning("shared files over their bound: %s", line)
            except OSError as e:  # the loop goes on: the next period tries again
                log.warning("cannot cut back shared files under %s: %s", dirs.root, e)

    def _collect_dirs(self) -> None:
        """Remove the enforcement directories no checkpointed claim names (under the lock)."""
        if self.config.dirs is not None:
            claim_dirs.collect(self.config.dirs, self.checkpoint)

    def _slice_changed(self, unhealthy: frozenset[str] | None = None) -> None:
        if self.slice is not None:
            self.slice.changed(unhealthy)

    def _on_registered(self) -> None:
        """A (re)started kubelet may delete the slice after registering us (`slices`)."""
        if self.slice is not None:
            self.slice.registered()

    # ----- health --------------------------------------------------------------------------------
    def _wait_xid(self, timeout_s: float) -> list[XidEvent]:
        return self._backend.wait_xid(timeout_s)

    def _on_health(self, unhealthy: frozenset[str]) -> None:
        self._unhealthy = unhealthy
        self._publish_health()
        self._slice_changed(unhealthy)

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
