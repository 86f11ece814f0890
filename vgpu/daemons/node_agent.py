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
- runs the usage watchdog every `watchdog_s` (`vgpu.daemons.node_watchdog`): containers over
  their GPU memory grant and GPU processes outside any known pod are reported, and with
  `watchdog_kill` over-grant processes are stopped.

`/metrics` (on `metrics_port`; 0 picks a free port) exports per-GPU and per-container gauges
read at scrape time (`vgpu.daemons.node_usage`) plus the agent's counters. The ports to host
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vgpu.adapters.gpu import GpuBackend
from vgpu.adapters.kube import KubeApi, KubeError, KubeNotFound
from vgpu.adapters.kubelet import DEFAULT_PLUGIN_DIR, PluginOptions
from vgpu.adapters.kubelet_devices import HealthPump, NodeDevicePlugins
from vgpu.adapters.podresources import (
    DEFAULT_POD_RESOURCES_SOCKET,
    PodResourcesClient,
    PodResourcesError,
)
from vgpu.adapters.procfs import (
    DEFAULT_PROC_ROOT,
    CgroupReader,
    ProcCgroupReader,
    ProcessKiller,
    SignalKiller,
)
from vgpu.adapters.streak import Streak
from vgpu.api.assignment import ADMITTED
from vgpu.api.podread import is_terminal
from vgpu.core.errors import VgpuError
from vgpu.core.ids import PodKey
from vgpu.daemons.backoff import Backoff
from vgpu.daemons.heap import release_free_heap
from vgpu.daemons.node_metrics import CountingPolicy, NodeMetrics
from vgpu.daemons.node_release import KubeletStale, ReleaseSync
from vgpu.daemons.node_usage import GpuCollector, UsageView
from vgpu.daemons.node_watchdog import WatchdogRunner
from vgpu.daemons.signals import run_until_signal
from vgpu.node.allocation import AllocationPolicy, ClosedPolicy, DefaultAllocationPolicy
from vgpu.node.checkpoint import CHECKPOINT_FILE, read_checkpoint
from vgpu.node.containers import ContainerDirectory
from vgpu.node.devices import DEFAULT_DOMAIN, DEFAULT_MEMORY_UNIT_MIB, ResourceNames
from vgpu.node.grants import GrantMode, GrantSettings
from vgpu.node.handoff import Handoff, HeldDevices
from vgpu.node.handoff_policy import HandoffPolicy
from vgpu.node.health import HealthPolicy, HealthTracker
from vgpu.node.inventory import annotation_patch, build_inventory
from vgpu.node.labels import label_patch, node_labels
from vgpu.node.model import GpuInfo, GpuInventory, XidEvent
from vgpu.node.podspec import pod_info
from vgpu.node.watchdog import Throttle, WatchdogPolicy

log = logging.getLogger(__name__)
COMPONENT = "vgpu-node-agent"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    node_name: str
    assignment_key: bytes
    plugin_dir: Path = DEFAULT_PLUGIN_DIR
    pod_resources_socket: Path = DEFAULT_POD_RESOURCES_SOCKET
    domain: str = DEFAULT_DOMAIN
    memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB
    grants: GrantSettings = field(default_factory=GrantSettings)
    allow_unassigned: bool = False
    report_numa: bool = False  # NUMA nodes in ListAndWatch: the kubelet's topology manager narrows
    health: HealthPolicy = field(default_factory=HealthPolicy)
    reconcile_s: float = 30.0
    unsure_reconcile_s: float = 1.0  # sooner while an attribution waits for the kubelet's record
    admission_grace_s: float = 30.0
    release_sync_s: float = 1.0  # after a pod holding devices is deleted: `ReleaseSync`
    metrics_port: int | None = None
    watch_timeout_s: int = 300
    retry_s: float = 1.0  # first retry after an API failure; doubles up to max_retry_s
    max_retry_s: float = 30.0
    stop_grace_s: float = 2.0
    register_timeout_s: float = 5.0
    watchdog_s: float = 10.0  # <= 0 disables the watchdog loop
    watchdog: WatchdogPolicy = field(default_factory=WatchdogPolicy)
    watchdog_event_interval_s: float = 300.0
    proc_root: Path = DEFAULT_PROC_ROOT


class NodeAgent:
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
            config.node_name,
            config.assignment_key,
            clock=clock,
            grace_s=config.admission_grace_s,
        )
        self.pod_resources = PodResourcesClient(config.pod_resources_socket, names=self.names)
        self.containers = ContainerDirectory()
        self.usage = UsageView(
            backend, cgroups or ProcCgroupReader(config.proc_root), self.containers, self.handoff
        )
        self.metrics.registry.register(
            GpuCollector(lambda: self.inventory, lambda: self._unhealthy, self.usage)
        )
        self.watchdog = WatchdogRunner(
            self.usage,
            config.watchdog,
            killer or SignalKiller(),
            self.metrics,
            Throttle(config.watchdog_event_interval_s, clock),
            pod_event=self._event,
            node_event=self._node_event,
        )
        self._node_uid = ""
        self.inventory: GpuInventory | None = None
        self.plugins: NodeDevicePlugins | None = None
        self.node_patches = 0
        self.mismatches: list[tuple[PodKey, str]] = []
        self._unhealthy: frozenset[str] = frozenset()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._node_dirty = True
        self._synced = threading.Event()
        self._reconciled = threading.Event()
        self._warned: set[str] = set()
        self.release = ReleaseSync(time.monotonic, delay_s=config.release_sync_s)
        checkpoint = config.plugin_dir / CHECKPOINT_FILE
        self.stale = KubeletStale(
            lambda: read_checkpoint(checkpoint),
            lambda: _signature(checkpoint),
            self.names,
            config.memory_unit_mib,
        )
        self._stale_problem: str | None = None
        self._threads: list[threading.Thread] = []
        self._pump: HealthPump | None = None
        self._stopped = False
        self._node_streak = Streak(
            log, f"node {config.node_name}: cannot update labels/annotations"
        )
        self._podres_streak = Streak(log, "reconciliation with the kubelet's pod-resources API")

    # ----- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.inventory = inventory = self._backend.inventory()
        gpus = inventory.gpus
        log.info("%s: %d GPU(s): %s", cfg.node_name, len(gpus), [g.model for g in gpus])
        policy = self._handoff_policy(gpus) if self._kube is not None else self._local_policy(gpus)
        self.plugins = self._device_plugins(gpus, policy)
        tracker = HealthTracker(tuple(g.uuid for g in gpus), cfg.health, self._clock)
        self._pump = HealthPump(self._wait_xid, tracker, self._on_health, wait_s=1.0)
        if cfg.metrics_port is not None:
            self.metrics.serve(cfg.metrics_port, ready=self.ready)
            log.info("%s: /metrics, /healthz, /readyz on port %s", cfg.node_name, self.metrics.port)
        self.plugins.manager.start()
        self._pump.start()
        if self._kube is not None:
            self._spawn("vgpu-pod-watch", self._watch_pods)
            self._spawn("vgpu-agent-loop", self._loop)
            if cfg.watchdog_s > 0:
                self._spawn("vgpu-watchdog", self._watchdog_loop)

    def _local_policy(self, gpus: Sequence[GpuInfo]) -> AllocationPolicy:
        """Without cluster credentials: open with --allow-unassigned, else closed."""
        cfg = self.config
        default = DefaultAllocationPolicy(
            gpus, names=self.names, memory_unit_mib=cfg.memory_unit_mib
        )
        if cfg.allow_unassigned:
            log.warning(
                "mode: OPEN (no cluster credentials, --allow-unassigned): node labels, the "
                "gpu-inventory annotation and the hand-off are skipped; Allocate admits any "
                "devices with the default binpacking policy"
            )
            return default
        log.error(
            "mode: FAIL CLOSED (no cluster credentials, so no verified assignments): "
            "every Allocate is refused; give the agent its service account or pass "
            "--allow-unassigned"
        )
        return ClosedPolicy("no cluster credentials to verify assignments", default)

    def _handoff_policy(self, gpus: Sequence[GpuInfo]) -> AllocationPolicy:
        """With cluster credentials: Allocate admits pods with a verified assignment."""
        cfg = self.config
        log.info(
            "mode: HAND-OFF, fail closed (Allocate admits only pods with a verified assignment%s)",
            "; --allow-unassigned: unassigned pods get unreserved capacity"
            if cfg.allow_unassigned
            else "",
        )
        return HandoffPolicy(
            self.handoff,
            gpus,
            names=self.names,
            memory_unit_mib=cfg.memory_unit_mib,
            settings=cfg.grants,
            allow_unassigned=cfg.allow_unassigned,
            on_admit=lambda _pod: self._wake.set(),
            refresh=self._refresh_pods,
        )

    def _device_plugins(
        self, gpus: Sequence[GpuInfo], policy: AllocationPolicy
    ) -> NodeDevicePlugins:
        """The kubelet-facing plugins, counting every Allocate in the metrics."""
        cfg = self.config
        options = PluginOptions(
            plugin_dir=cfg.plugin_dir,
            stop_grace_s=cfg.stop_grace_s,
            register_timeout_s=cfg.register_timeout_s,
        )
        plugins = NodeDevicePlugins(
            gpus,
            CountingPolicy(policy, self.metrics),
            options,
            names=self.names,
            memory_unit_mib=cfg.memory_unit_mib,
            report_numa=cfg.report_numa,
        )
        plugins.check_message_size()
        return plugins

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
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
        cluster = self._kube is None or (self._synced.is_set() and self._reconciled.is_set())
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
        self._node_dirty = True
        self._wake.set()

    def _wait_xid(self, timeout_s: float) -> list[XidEvent]:
        events = self._backend.wait_xid(timeout_s)
        for event in events:
            self.metrics.xids.labels(event.gpu_uuid or "unattributed", str(event.xid)).inc()
        return events

    # ----- pod watch -----------------------------------------------------------------------------
    def _watch_pods(self) -> None:
        assert self._kube is not None
        selector = f"spec.nodeName={self.config.node_name}"
        backoff = Backoff(self.config.retry_s, self.config.max_retry_s)
        while not self._stop.is_set():
            try:
                for event in self._kube.watch_pods(
                    field_selector=selector,
                    stop=self._stop,
                    timeout_seconds=self.config.watch_timeout_s,
                    retry_delay=self.config.retry_s,
                ):
                    if self._stop.is_set():
                        return
                    backoff.reset()
                    self._on_pod_event(event.type, event.object)
            except Exception as e:  # a broken watch must never take the agent down
                delay = backoff.next_delay()
                log.error("pod watch failed, restarting in %.1fs: %s", delay, e)
                self._stop.wait(delay)

    def _refresh_pods(self) -> None:
        """Read this node's pods from the API server now, for a GetPreferredAllocation or an
        Allocate our watch is behind on."""
        if self._kube is None:
            return
        try:
            listing = self._kube.list_pods(field_selector=f"spec.nodeName={self.config.node_name}")
        except VgpuError as e:
            log.warning("could not refresh this node's pods for an unmatched Allocate: %s", e)
            return
        known = set(self.handoff.pods())
        for pod in listing.items:
            self._on_pod_event("MODIFIED", pod)
        new = sorted(set(self.handoff.pods()) - known)
        if new:  # the kubelet's watch was ahead of ours (issue 10's race): say so
            log.info("refresh for an unmatched device-plugin call found %s", ", ".join(new))

    def _on_pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        if kind == "SYNCED":
            if not self._synced.is_set():  # the first listing; relists after a 410 are quiet
                log.info(
                    "%s: pod watch synced, %d vgpu pod(s) bound here",
                    self.config.node_name,
                    len(self.handoff.pods()),
                )
            self._synced.set()
            self.stale.synced()
            self._wake.set()
            return
        info = pod_info(pod, self.names)
        mirror = ((pod.get("metadata") or {}).get("annotations") or {}).get(MIRROR, "")
        self.stale.pod((info.uid, str(mirror)), kind != "DELETED" and not is_terminal(pod))
        if (kind == "DELETED" or info.terminal) and self.handoff.holds_devices(info.key):
            self.release.deleted(info.key)  # finished, deleting or deleted: see ReleaseSync
        if kind == "DELETED":
            self.handoff.forget(info.key, info.uid)
            self.containers.forget(pod)
        else:
            self.containers.observe(pod)
            problem = self.handoff.observe(info)
            if problem is not None and info.uid not in self._warned:
                self._warned.add(info.uid)
                log.warning("unassigned pod: %s", problem)
                self._event(info.key, info.uid, "VgpuUnassigned", problem)
        self._wake.set()

    # ----- maintenance loop: node metadata, reconciliation, admitted annotations ----------------
    def _loop(self) -> None:
        """Node metadata every `reconcile_s` (and when dirty), reconciliation every
        `reconcile_s` once the pod watch has synced, admitted annotations when they change.
        API failures back off (capped, jittered, exponential) from the first one."""
        cfg, forever = self.config, float("inf")
        node_backoff = Backoff(cfg.retry_s, cfg.max_retry_s)
        patch_backoff = Backoff(cfg.retry_s, cfg.max_retry_s)
        node_at = node_retry = reconcile_at = unsure_at = patch_retry = stale_at = 0.0
        settled = False
        while not self._stop.is_set():
            self._wake.clear()
            now = time.monotonic()
            if now >= node_at or (self._node_dirty and now >= node_retry):
                if self._sync_node():
                    node_backoff.reset()
                    node_at, node_retry = now + cfg.reconcile_s, now
                else:
                    node_at = node_retry = now + node_backoff.next_delay()
            unsure = self.handoff.has_unsure()  # an attribution waits for the kubelet's record
            if self._synced.is_set() and (now >= reconcile_at or (unsure and now >= unsure_at)):
                self._reconcile()
                reconcile_at, unsure_at = now + cfg.reconcile_s, now + cfg.unsure_reconcile_s
            if self.release.at is not None and now >= self.release.at:
                self.release.step(self._listed, self._republish)
            if now >= stale_at or self.stale.dirty:  # a deletion: publish before a bind
                self._check_stale()
                stale_at = now + cfg.release_sync_s
            if now >= patch_retry:
                if self._patch_admitted():
                    patch_backoff.reset()
                else:
                    patch_retry = now + patch_backoff.next_delay()
            if not settled and self.ready():
                settled = True
                release_free_heap()  # once, the start-up garbage: see vgpu.daemons.heap
            due = min(
                node_at,
                node_retry if self._node_dirty else forever,
                reconcile_at if self._synced.is_set() else forever,
                unsure_at if self._synced.is_set() and self.handoff.has_unsure() else forever,
                patch_retry if patch_retry > now else forever,
                self.release.at if self.release.at is not None else forever,
                stale_at,
            )
            self._wake.wait(min(max(due - time.monotonic(), 0.0), cfg.reconcile_s))

    def _sync_node(self) -> bool:
        """Patch the node's labels and inventory annotation if they differ; False on failure."""
        assert self._kube is not None and self.inventory is not None
        cfg, name = self.config, self.config.node_name
        try:
            node = self._kube.get_node(name)
            meta = node.get("metadata") or {}
            self._node_uid = str(meta.get("uid") or "")
            labels = label_patch(
                meta.get("labels") or {},
                node_labels(self.inventory, domain=cfg.domain),
                domain=cfg.domain,
            )
            key = self.names.inventory
            desired = build_inventory(
                self.inventory,
                unhealthy=self._unhealthy,
                memory_unit_mib=cfg.memory_unit_mib,
                stale=self.stale.published(),
            )
            value = annotation_patch((meta.get("annotations") or {}).get(key), desired)
            if labels or value is not None:
                annotations = {key: value} if value is not None else None
                self._kube.patch_node_metadata(name, labels=labels, annotations=annotations)
                self.node_patches += 1
                log.info(
                    "node %s: patched %d label(s), inventory=%s", name, len(labels), bool(value)
                )
            self._node_dirty = False
            self._node_streak.succeeded()
            return True
        except KubeError as e:
            self._node_streak.failed(e)
            return False

    def _reconcile(self) -> list[HeldDevices] | None:
        """Rebuild the admitted set from the kubelet's pod-resources `List`; what it holds."""
        try:
            held = self.pod_resources.held()
        except PodResourcesError as e:
            self._podres_streak.failed(e)
            self._reconciled.set()  # tried once: readiness must not hang on an old kubelet
            return None
        self._podres_streak.succeeded()
        reports = self.handoff.reconcile(held)
        for pod, message in reports:
            if (pod, message) in self.mismatches:
                continue
            self.mismatches.append((pod, message))
            self.metrics.mismatches.inc()
            log.error("device IDs differ from the assignment of %s: %s", pod, message)
            self._event(pod, "", "VgpuAssignmentMismatch", message)
        self._update_gauges()
        self._reconciled.set()
        return held

    def _listed(self) -> set[PodKey] | None:
        """Reconcile now; the pods the kubelet reports holding devices (None: List failed)."""
        held = self._reconcile()
        return None if held is None else {h.pod for h in held}

    def _check_stale(self) -> None:
        """Publish the devices the kubelet's checkpoint holds for pods gone (`KubeletStale`)."""
        if self.stale.step(self._free_stale):
            self._node_dirty = True
            gpus = ", ".join(
                f"{gpu}: {s.cores} cores, {s.memory_mib} MiB (pods {', '.join(s.pods)})"
                for gpu, s in self.stale.stale.items()
            )
            log.info("kubelet checkpoint: devices of pods gone from this node: %s", gpus or "none")
        if self.stale.problem != self._stale_problem:
            self._stale_problem = self.stale.problem
            if self.stale.problem:
                log.warning("%s; stale devices are not published", self.stale.problem)

    def _free_stale(self) -> None:
        """Have the kubelet free devices of vanished pods (List) and checkpoint that (resend)."""
        self._reconcile()
        if self.plugins is not None:
            self.plugins.republish()

    def _republish(self) -> None:
        if self.plugins is not None:
            log.info("deleted pod(s) freed by the kubelet: device lists sent again (checkpoint)")
            self.plugins.republish()

    def _update_gauges(self) -> None:
        pods = self.handoff.pods()
        unassigned = sum(1 for p in pods if self.handoff.problem(p) is not None)
        self.metrics.pods.labels("assigned").set(len(pods) - unassigned)
        self.metrics.pods.labels("unassigned").set(unassigned)

    def _patch_admitted(self) -> bool:
        """Write `vgpu.io/admitted` where it is out of date; False if a patch failed."""
        assert self._kube is not None
        ok = True
        for pod, value in self.handoff.annotation_updates():
            namespace, name = pod.split("/", 1)
            try:
                self._kube.patch_pod_annotations(namespace, name, {ADMITTED: value})
                self.handoff.patched(pod, value)
            except KubeNotFound:
                self.handoff.patched(pod, value)
            except KubeError as e:
                log.warning("cannot patch %s on %s (will retry): %s", ADMITTED, pod, e)
                ok = False
                break
        return ok

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

    def _node_event(self, reason: str, message: str) -> None:
        assert self._kube is not None
        name = self.config.node_name
        involved = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}}
        if self._node_uid:
            involved["metadata"] = {"name": name, "uid": self._node_uid}
        try:
            self._kube.create_event(
                involved, reason=reason, message=message, event_type="Warning", component=COMPONENT
            )
        except KubeError as e:
            log.warning("cannot record event %s for node %s: %s", reason, name, e)

    def _event(self, pod: PodKey, uid: str, reason: str, message: str) -> None:
        assert self._kube is not None
        namespace, name = pod.split("/", 1)
        involved = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"namespace": namespace, "name": name, "uid": uid},
        }
        try:
            self._kube.create_event(
                involved, reason=reason, message=message, event_type="Warning", component=COMPONENT
            )
        except KubeError as e:
            log.warning("cannot record event %s for %s: %s", reason, pod, e)


__all__ = ["AgentConfig", "GrantMode", "GrantSettings", "NodeAgent"]


MIRROR = "kubernetes.io/config.mirror"
"""A static pod's mirror carries the UID the kubelet knows the pod by: its config hash
(pkg/kubelet/pod/mirror_client.go `CreateMirrorPod`; pkg/kubelet/config/common.go)."""


def _signature(path: Path) -> object:
    """What tells that the checkpoint changed on disk (None: no file)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
