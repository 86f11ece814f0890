"""The node agent's composition root: wiring, threads, start/stop. Little logic lives here.

`NodeAgent.start()` discovers GPUs through the injected backend, serves and registers the two
device plugins, starts the health pump and, with a `KubeApi`:

- keeps the node's labels and `vgpu.io/gpu-inventory` annotation current (patched only when
  they differ: at start, on health changes and every `reconcile_s`);
- watches the pods bound to this node into the `Handoff` ledger, which the `HandoffPolicy`
  answers Allocate from; admissions are written back as `vgpu.io/admitted` on the pod;
- reconciles the admitted set with the kubelet's pod-resources API at start and every
  `reconcile_s`, logging and recording an Event for containers whose IDs differ from their
  assignment;
- in mode vgpu-core, rewrites elastic allowances every refill period and removes the
  directories of containers gone (`vgpu.agent.elastic`), with or without a `KubeApi`;
- runs the usage watchdog every `watchdog_s` (`vgpu.agent.watchdog`): containers over
  their GPU memory grant and GPU processes outside any known pod are reported, and with
  `watchdog_kill` over-grant processes are stopped.

`/metrics` (on `metrics_port`; 0 picks a free port) exports per-GPU and per-container gauges
read at scrape time (`vgpu.agent.usage`) plus the agent's counters. The ports to host
processes (`cgroups`, `killer`) are injectable, so tests never read /proc or signal anything.

Without a `KubeApi` there is no verified assignment source: it still registers with the kubelet
but refuses every Allocate (fail closed) unless `allow_unassigned`, which admits any devices with
the default binpacking policy. It logs its mode at start.
Every loop survives API and kubelet failures (logged, retried); `stop()` is graceful and is
what SIGTERM triggers. Tests build it in-process with their own backend, dirs and API client.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from vgpu.adapters.gpu import GpuBackend, NvmlBackend
from vgpu.adapters.gpu_utilisation import nvml_utilisation
from vgpu.adapters.kube.calls import KubeApi
from vgpu.adapters.kubelet.checkpoint import read_checkpoint
from vgpu.adapters.kubelet.node_plugins import HealthPump, NodeDevicePlugins
from vgpu.adapters.kubelet.pod_resources import PodResourcesClient
from vgpu.adapters.liveness import Liveness
from vgpu.adapters.procfs import (
    CgroupReader,
    ProcCgroupReader,
    ProcessKiller,
    SignalKiller,
)
from vgpu.adapters.signals import run_until_signal
from vgpu.agent.config import AgentConfig
from vgpu.agent.driver_limits import BackendCollector
from vgpu.agent.elastic import ElasticDuty, run_elastic
from vgpu.agent.kubelet_stale import KubeletStale
from vgpu.agent.kubelet_sync import CheckpointEntries, KubeletSync, checkpoint_signature
from vgpu.agent.maintenance import LOOP, run_maintenance
from vgpu.agent.metrics import NodeMetrics
from vgpu.agent.mode import (
    check_runtime,
    device_plugins,
    driver_backend,
    handoff_policy,
    local_policy,
)
from vgpu.agent.pods import PodFeed
from vgpu.agent.publish import NodePublisher
from vgpu.agent.usage import GpuCollector, UsageView
from vgpu.agent.watchdog import WatchdogRunner
from vgpu.core.ids import PodKey
from vgpu.node.checkpoint import CHECKPOINT_FILE
from vgpu.node.containers import ContainerDirectory
from vgpu.node.devices import ResourceNames
from vgpu.node.grants import GrantMode, GrantSettings
from vgpu.node.hami import HamiCore
from vgpu.node.handoff.admissions import Handoff
from vgpu.node.health import HealthTracker
from vgpu.node.model import GpuInventory, XidEvent
from vgpu.node.shared_bound import shared_files
from vgpu.node.vgpucore import VgpuCore
from vgpu.node.watchdog import Throttle

log = logging.getLogger(__name__)


class NodeAgent:
    """Wires the node's parts together and runs their threads; each part is its own module."""

    def __init__(
        self,
        config: AgentConfig,
        backend: GpuBackend,
        kube: KubeApi | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        cgroups: CgroupReader | None = None,
        killer: ProcessKiller | None = None,
    ) -> None:
        self.config = config
        self._backend = backend
        self._kube = kube
        self._clock = clock
        self.names = ResourceNames(config.domain)
        self.metrics = NodeMetrics()
        self.handoff = Handoff(
            config.node_name, config.assignment_key, clock=clock, grace_s=config.admission_grace_s
        )
        self.pod_resources = PodResourcesClient(config.pod_resources_socket, names=self.names)
        self.containers = ContainerDirectory()
        self.inventory: GpuInventory | None = None
        self.plugins: NodeDevicePlugins | None = None
        self._unhealthy: frozenset[str] = frozenset()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._synced = threading.Event()
        checkpoint = config.plugin_dir / CHECKPOINT_FILE
        self.stale = KubeletStale(
            lambda: read_checkpoint(checkpoint),
            lambda: checkpoint_signature(checkpoint),
            self.names,
            config.memory_unit_mib,
            clock=time.monotonic,
        )
        self.publisher = NodePublisher(
            config, kube, self.names, self.handoff, self.stale, self._node_state
        )
        self.kubelet = KubeletSync(
            self.pod_resources,
            self.handoff,
            self.stale,
            self.publisher,
            self.metrics,
            lambda: self.plugins,
            (
                CheckpointEntries(
                    lambda: read_checkpoint(checkpoint), lambda: checkpoint_signature(checkpoint)
                ),
                self.names,
            ),
        )
        self.pods = PodFeed(
            config,
            kube,
            self.names,
            (self.handoff, self.containers, self.stale),
            (self._stop, self._wake, self._synced),
            self.publisher.pod_event,
        )
        self._usage_parts(backend, cgroups, killer)
        self._threads: list[threading.Thread] = []
        self.liveness = Liveness(self._clock)
        self._pump: HealthPump | None = None
        self.elastic: ElasticDuty | None = None
        self.runtime_problems: list[str] = []
        self._stopped = False

    def _usage_parts(
        self, backend: GpuBackend, cgroups: CgroupReader | None, killer: ProcessKiller | None
    ) -> None:
        """The usage view, its /metrics collector and the watchdog over it."""
        config = self.config
        self.usage = UsageView(
            backend, cgroups or ProcCgroupReader(config.proc_root), self.containers, self.handoff
        )
        self.metrics.registry.register(
            GpuCollector(lambda: self.inventory, lambda: self._unhealthy, self.usage)
        )
        self.metrics.registry.register(
            BackendCollector(lambda: self.inventory, lambda: self.publisher.memory_backend)
        )
        self.watchdog = WatchdogRunner(
            self.usage,
            config.watchdog,
            killer or SignalKiller(),
            self.metrics,
            Throttle(config.watchdog_event_interval_s, self._clock),
            pod_event=self.publisher.pod_event,
            node_event=self.publisher.node_event,
        )

    def _node_state(self) -> tuple[GpuInventory | None, frozenset[str]]:
        return self.inventory, self._unhealthy

    @property
    def node_patches(self) -> int:
        """How many times the node's labels/annotation were patched."""
        return self.publisher.patches

    @property
    def mismatches(self) -> list[tuple[PodKey, str]]:
        """Assignment mismatches found by reconciliation, each once."""
        return self.kubelet.mismatches

    # ----- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.inventory = inventory = self._backend.inventory()
        gpus = inventory.gpus
        log.info("%s: %d GPU(s): %s", cfg.node_name, len(gpus), [g.model for g in gpus])
        self.runtime_problems = check_runtime(cfg, [g.uuid for g in gpus])
        handoff = self.handoff if self._kube is not None else None
        self.memory_choice, pre_start = driver_backend(cfg, inventory, handoff, self.names)
        if self._kube is not None:
            policy = handoff_policy(
                cfg,
                self.names,
                gpus,
                self.handoff,
                on_admit=self._wake.set,
                refresh=self.pods.refresh,
                driver_limits=self.memory_choice.driver_limits,
            )
        else:
            policy = local_policy(cfg, self.names, gpus)
        self.publisher.memory_backend = self.memory_choice.backend(cfg.grants.mode.value)
        self.plugins = device_plugins(cfg, self.names, gpus, policy, self.metrics, pre_start)
        tracker = HealthTracker(tuple(g.uuid for g in gpus), cfg.health, self._clock)
        self._pump = HealthPump(self._wait_xid, tracker, self._on_health, wait_s=1.0)
        if cfg.metrics_port is not None:
            self.metrics.serve(cfg.metrics_port, ready=self.ready, live=self.liveness.why_not_live)
            log.info("%s: /metrics, /healthz, /readyz on port %s", cfg.node_name, self.metrics.port)
        self.plugins.manager.start()
        self._pump.start()
        self._start_elastic()
        if self._kube is not None:
            self._spawn("vgpu-pod-watch", self.pods.watch)
            stuck_s = max(3 * cfg.reconcile_s, 60.0) + cfg.max_retry_s
            self._spawn("vgpu-agent-loop", self._loop, (LOOP, stuck_s))
            if cfg.watchdog_s > 0:
                self._spawn("vgpu-watchdog", self._watchdog_loop)

    def _start_elastic(self) -> None:
        """Mode vgpu-core: allowances every refill period, and directory cleanup; mode hami
        with per-container caches: cleanup only."""
        grants = self.config.grants
        checkpoint = self.config.plugin_dir / CHECKPOINT_FILE
        if isinstance(grants.core, VgpuCore):
            # the outer loop of cores under contention reads NVML, so only over the NVML backend
            nvml = isinstance(self._backend, NvmlBackend)
            source = nvml_utilisation(self.config.proc_root) if nvml else None
            self.elastic = duty = ElasticDuty(grants.core.dirs, checkpoint, utilisation=source)
            self._spawn("vgpu-elastic", lambda: run_elastic(duty, self._stop))
        elif isinstance(grants.hami, HamiCore) and grants.hami.dirs is not None:
            self.elastic = duty = ElasticDuty(
                grants.hami.dirs,
                checkpoint,
                allowances=False,
                shared_files=shared_files(GrantMode.HAMI),
            )
            self._spawn("vgpu-collect", lambda: run_elastic(duty, self._stop, 1.0))

    def _spawn(
        self, name: str, target: Callable[[], None], beats: tuple[str, float] | None = None
    ) -> None:
        """Start a loop; its liveness is watched (`beats`: the name it beats under and the
        longest it may go between beats; without, only that its thread runs)."""
        thread = threading.Thread(target=target, name=name, daemon=True)
        loop, stuck_s = beats or (name, float("inf"))
        self.liveness.register(loop, thread, stuck_s)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        """Stop every loop and the plugins; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        log.info("%s: stopping", self.config.node_name)
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            # The pod watch may sit in a blocking read until the server's next event or its
            # timeout; it is a daemon thread and exits at its next event, so don't wait long.
            patience = 0.2 if thread.name == "vgpu-pod-watch" else self.config.stop_grace_s + 1.0
            thread.join(timeout=patience)
        if self._pump is not None:
            self._pump.stop()
        if self.plugins is not None:
            self.plugins.manager.stop(self.config.stop_grace_s)
        self.metrics.close()
        self._backend.close()

    def ready(self) -> bool:
        """Registered with the kubelet and (with a cluster) pod watch synced and reconciled once."""
        registered = self.plugins is not None and self.plugins.manager.registered()
        cluster = self._kube is None or (self._synced.is_set() and self.kubelet.reconciled.is_set())
        return registered and cluster

    def wait_ready(self, timeout: float = 10.0) -> bool:
        """Wait until `ready()`; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return True
            time.sleep(0.02)
        return False

    def run_until_signal(self) -> None:
        """start(), serve until SIGTERM/SIGINT, then stop(). Main thread only."""
        run_until_signal(self.start, self.stop, self._stop)

    # ----- health --------------------------------------------------------------------------------
    def _on_health(self, unhealthy: frozenset[str]) -> None:
        self._unhealthy = unhealthy
        self.metrics.unhealthy.set(len(unhealthy))
        if self.plugins is not None:
            self.plugins.set_unhealthy(unhealthy)
        self.publisher.dirty = True
        self._wake.set()

    def _wait_xid(self, timeout_s: float) -> list[XidEvent]:
        events = self._backend.wait_xid(timeout_s)
        for event in events:
            self.metrics.xids.labels(event.gpu_uuid or "unattributed", str(event.xid)).inc()
        return events

    def _loop(self) -> None:
        run_maintenance(self, self._stop, self._wake, self._synced)

    # ----- usage watchdog -----------------------------------------------------------------------
    def _watchdog_loop(self) -> None:
        while not self._synced.wait(0.1):  # without the pods, every process looks unknown
            if self._stop.is_set():
                return
        while not self._stop.is_set():
            try:
                self.watchdog.step()
            except Exception as e:  # the watchdog must never take the agent down
                log.error("watchdog step failed: %s", e)
            self._stop.wait(self.config.watchdog_s)


__all__ = ["AgentConfig", "GrantMode", "GrantSettings", "NodeAgent"]
