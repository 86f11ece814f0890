"""The usage watchdog's actions: Events, log lines, counters and (opt-in) stopping processes.

Every `interval` the agent calls `WatchdogRunner.step()`, which takes a fresh `Assessment` from
the `UsageView` and acts on its findings:

- a container over its memory grant on a GPU: a Warning Event `VgpuMemoryOverGrant` on its pod
  and `vgpu_watchdog_findings_total{finding="over_grant"}`; with `--watchdog-kill` its
  largest processes there are stopped through the `ProcessKiller` port (each PID's cgroup is
  read again first, so a PID reused since the sample is never hit), with an Event
  `VgpuProcessKilled` and `vgpu_watchdog_kills_total`;
- a process in no known pod using GPU memory: a log line, a Warning Event
  `VgpuUnknownGpuProcess` on the node and `vgpu_watchdog_findings_total{finding="unknown"}`.

Reports are throttled per (container, GPU) and per (GPU, PID) by a `Throttle`, so a lasting
condition produces one Event per `event_interval_s`, not one per loop; kills are never throttled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from vgpu.adapters.procfs import ProcessKiller
from vgpu.agent.metrics import NodeMetrics
from vgpu.agent.usage import UsageView
from vgpu.core.errors import VgpuError
from vgpu.core.ids import PodKey
from vgpu.node.watchdog import Assessment, OverGrant, Throttle, UnknownProcess, WatchdogPolicy, gib

log = logging.getLogger(__name__)

OVER_GRANT = "VgpuMemoryOverGrant"
KILLED = "VgpuProcessKilled"
UNKNOWN = "VgpuUnknownGpuProcess"

PodEvent = Callable[[PodKey, str, str, str], None]  # (pod, uid, reason, message)
NodeEvent = Callable[[str, str], None]  # (reason, message)


class WatchdogRunner:
    def __init__(
        self,
        view: UsageView,
        policy: WatchdogPolicy,
        killer: ProcessKiller,
        metrics: NodeMetrics,
        throttle: Throttle,
        *,
        pod_event: PodEvent,
        node_event: NodeEvent,
    ) -> None:
        self._view = view
        self._policy = policy
        self._killer = killer
        self._metrics = metrics
        self._throttle = throttle
        self._pod_event = pod_event
        self._node_event = node_event
        self.steps = 0

    def step(self) -> Assessment | None:
        """One look at the GPUs; None when the backend failed (logged)."""
        try:
            assessment = self._view.assess(self._policy)
        except VgpuError as e:
            log.warning("watchdog: cannot read per-process GPU usage: %s", e)
            return None
        for finding in assessment.over:
            self._over(finding)
        for process in assessment.unknown:
            self._unknown(process)
        self.steps += 1
        return assessment

    def _over(self, f: OverGrant) -> None:
        killed = [pid for pid in f.kill if self._kill(f, pid)]
        k = f.key
        if killed:
            message = (
                f"stopped process(es) {', '.join(map(str, killed))} of container {k.container}: "
                f"it used {gib(f.used_bytes)} of GPU memory on {f.gpu_uuid}, granted "
                f"{gib(f.granted_bytes)} (--watchdog-kill)"
            )
            log.error("%s: %s", k, message)
            self._pod_event(k.pod_key, k.pod_uid, KILLED, message)
        if not self._throttle.allow(("over", k, f.gpu_uuid)):
            return
        self._metrics.findings.labels("over_grant").inc()
        message = (
            f"container {k.container} uses {gib(f.used_bytes)} of GPU memory on {f.gpu_uuid}, "
            f"more than the {gib(f.granted_bytes)} it was granted "
            f"(processes {', '.join(map(str, f.pids))})"
        )
        log.warning("%s: %s", k, message)
        self._pod_event(k.pod_key, k.pod_uid, OVER_GRANT, message)

    def _kill(self, f: OverGrant, pid: int) -> bool:
        if self._view.owner(pid) != f.key:
            log.info("watchdog: PID %d is no longer in %s; not stopped", pid, f.key)
            return False
        try:
            self._killer.kill(pid)
        except OSError as e:
            log.error("watchdog: cannot stop PID %d of %s: %s", pid, f.key, e)
            return False
        self._metrics.killed(f.key.namespace, f.key.pod, f.key.container)
        return True

    def _unknown(self, p: UnknownProcess) -> None:
        if not self._throttle.allow(("unknown", p.gpu_uuid, p.pid)):
            return
        self._metrics.findings.labels("unknown").inc()
        message = (
            f"process {p.pid} uses {gib(p.used_bytes)} of GPU memory on {p.gpu_uuid} outside any "
            "pod this node runs; the scheduler cannot account for it"
        )
        log.warning("watchdog: %s", message)
        self._node_event(UNKNOWN, message)
