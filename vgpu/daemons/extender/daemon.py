"""Composition root of `vgpu extender`: watches → cache → verbs → HTTP, plus leader election.

* Node and pod watches (list, then watch; relist on 410) feed the `ClusterCache`. Pods are
  watched once the first node listing is in, so bound pods are counted against known nodes.
* With leader election, every replica keeps a warm cache and answers filter/prioritize, but
  only the leader binds, and only after re-listing the cluster for its own term (a new leader
  never acts on a cache from before it led). `/readyz` is 200 only on the leader once that
  resync is done, so the Service routes kube-scheduler's calls to the leader.
* A sweeper releases expired gang reservations and stale assumptions every `sweep_interval`.

`start()` returns once serving (port 0 picks a free port); `stop()` ends everything. Usable
in-process by tests and the end-to-end harness.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from vgpu.adapters.backoff import Backoff
from vgpu.adapters.kube.calls import KubeApi, KubeError, KubeNotFound, WatchEvent
from vgpu.adapters.kube.reflector import SYNCED
from vgpu.adapters.leader import LeaderConfig, LeaderElector
from vgpu.adapters.liveness import Liveness, done
from vgpu.api.podspec import pod_group_min_member
from vgpu.core.errors import ConfigError, InvalidRequest
from vgpu.extender.binder import Binder
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.invalid import InvalidPods
from vgpu.extender.metrics import ExtenderMetrics
from vgpu.extender.offloop import LeaveLoop, may_block
from vgpu.extender.queues.collector import QueueCollector
from vgpu.extender.queues.release_loop import QueueReleaser
from vgpu.extender.queues.release_pass import QueueIndex
from vgpu.extender.routes import Routes
from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.limits import HttpLimits
from vgpu.extender.server.tls import Reloader, TlsFiles, server_context
from vgpu.extender.service import Extender

log = logging.getLogger(__name__)
MAX_RETRY_S = 30.0  # cap of the capped, jittered exponential backoff after API failures
PROBE_LIMITS = HttpLimits(read_timeout=5.0, workers=1, max_unverified=256)
"""The probe port: one GET per connection, whole within 5 s (kubelet's probes time out in 3 to
5 s), up to 256 at once; its answers are made on its loop's thread, so no verb thread is used."""


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    """Everything `vgpu extender` is configured with."""

    key: bytes
    extender: ExtenderConfig = field(default_factory=ExtenderConfig)
    host: str = "0.0.0.0"
    port: int = 8080
    leader: LeaderConfig | None = None
    tls: TlsFiles | None = None
    """HTTPS with client certificates; None serves plain HTTP (`--insecure-http`)."""
    http: HttpLimits = field(default_factory=HttpLimits)
    probe_port: int | None = None
    """Plain-HTTP port for /healthz and /readyz on its own loop (kubelet probes), where clients
    misbehaving on the main port cannot starve them; None serves probes on the main port only."""
    tls_reload_interval: float = 30.0
    """Seconds between checks of the TLS files for renewal."""
    watch_timeout: int = 300
    sweep_interval: float = 1.0
    retry_delay: float = 1.0
    queues: tuple[str, str] | None = None
    """(namespace, name) of the queue ConfigMap: the leader runs the release loop
    (`vgpu.extender.queues.release_loop`); None: no queues, pods are never held by vgpu."""


class PodGroupSizes:
    """minMember of scheduling.x-k8s.io PodGroups, read on demand and kept for `ttl` seconds.

    A read is an API call: on the serving loop's thread (`offloop.on_loop`) a size not kept
    raises `LeaveLoop`, so the verb is answered on a worker and the loop never waits on the API
    server for one gang's filter."""

    KEPT = 4096
    """Sizes kept at most (a new one first drops those past their time, then the oldest)."""

    def __init__(
        self, api: KubeApi, *, ttl: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._api, self._ttl, self._clock = api, ttl, clock
        self._seen: dict[tuple[str, str], tuple[float, int | None]] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def __call__(self, namespace: str, name: str) -> int | None:
        now = self._clock()
        hit = self._seen.get((namespace, name))
        if hit is not None and hit[0] > now:
            return hit[1]
        if not may_block():
            raise LeaveLoop
        try:
            group = self._api.get_pod_group(namespace, name)
            size: int | None = pod_group_min_member(group, f"PodGroup {namespace}/{name}")
        except KubeNotFound:
            size = None
        except KubeError as err:
            raise InvalidRequest(
                f"PodGroup {namespace}/{name}", f"cannot be read ({err})", "retry later"
            ) from err
        self._keep((namespace, name), (now + self._ttl, size), now)
        return size

    def _keep(self, key: tuple[str, str], entry: tuple[float, int | None], now: float) -> None:
        """Keep a size read; the sizes kept are bounded whatever names pods invent (a tenant's
        pods may each name a new PodGroup): those past their time go first, then the oldest."""
        self._seen.pop(key, None)
        while self._seen:  # kept in the order read, so in the order they pass their time
            first = next(iter(self._seen))
            if self._seen[first][0] > now and len(self._seen) < self.KEPT:
                break
            del self._seen[first]
        self._seen[key] = entry


class ExtenderDaemon:
    """The running extender."""

    def __init__(
        self, api: KubeApi, config: DaemonConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.api, self.config = api, config
        self.metrics = ExtenderMetrics()
        self.cache = ClusterCache(
            key=config.key,
            memory_unit_mib=config.extender.memory_unit_mib,
            names=config.extender.names,
            gang_timeout=config.extender.gang_timeout,
            schedulers=config.extender.schedulers,
        )
        self.extender = Extender(
            self.cache,
            config=config.extender,
            clock=clock,
            group_size=PodGroupSizes(api),
            on_rejections=self.metrics.count_rejections,
            on_unwatched=self.metrics.unwatched_filters.inc,
            on_preemption_wait=self.metrics.preemption_waits.inc,
        )
        self.metrics.watch(self.extender)
        self.invalid_pods = InvalidPods(api, self.metrics)
        self.cache.subscribe(invalid=self.invalid_pods)
        self.binder = Binder(
            self.cache,
            self.extender.pods,
            api,
            clock=self.extender.clock,
            bind_wait=self.extender.config.bind_wait,
            key=config.key,
            may_bind=self.why_not_binding,
        )
        self.queue_index = QueueIndex(self.extender.queue_parts())
        self.elector = LeaderElector(api, config.leader) if config.leader is not None else None
        self.queues = self._queue_releaser()
        tls = server_context(config.tls) if config.tls is not None else None
        self.tls_reloader = Reloader(tls, config.tls) if tls and config.tls else None
        routes = Routes(self.extender, self.binder, self.metrics, ready=self.why_not_ready)
        self.probes = (
            HttpServer(
                routes,
                host=config.host,
                port=config.probe_port,
                limits=PROBE_LIMITS,
                probes_only=True,
            )
            if config.probe_port is not None
            else None
        )
        self.http = HttpServer(
            routes,
            host=config.host,
            port=config.port,
            tls=tls,
            limits=config.http,
            on_refused=lambda reason: self.metrics.refused.labels(reason).inc(),
            on_connection=self.metrics.connections.inc,
        )
        self.metrics.watch_leadership(
            lambda: self.elector is None or self.elector.is_leader,
            lambda: self.why_not_binding() is None,
        )
        self._stop = threading.Event()
        self._nodes_synced = threading.Event()
        self._pods_synced = threading.Event()
        self._term_ready = 0
        self._threads: list[threading.Thread] = []
        self.liveness = Liveness()

    def _queue_releaser(self) -> QueueReleaser | None:
        """The leader's queue release loop, when queues are configured (its metrics too)."""
        if self.config.queues is None:
            return None
        namespace, name = self.config.queues
        releaser = QueueReleaser(
            self.api,
            self.queue_index,
            namespace=namespace,
            config_map=name,
            may_act=self.why_not_binding,
            notes=self.elector,
            holder=self.config.leader.identity if self.config.leader is not None else "",
        )
        self.metrics.registry.register(QueueCollector(releaser.figures))
        return releaser

    def _apply_pod(self, kind: str, obj: dict[str, Any]) -> None:
        """A pod event: the cache, then the queue index (when queues are on)."""
        self.cache.apply_pod(kind, obj)
        if self.queues is not None:
            self.queue_index.apply(kind, obj)

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The HTTP port served."""
        return self.http.port

    @property
    def probe_port(self) -> int | None:
        """The probe port served, if any."""
        return self.probes.port if self.probes is not None else None

    def start(self) -> None:
        """Bind the HTTP ports first (an `OSError` if one is taken, before any thread starts),
        then start watches, the sweeper and leader election."""
        self.http.start()
        if self.probes is not None:
            try:
                self.probes.start()
            except OSError as err:
                self.http.stop()
                raise ConfigError(
                    f"--probe-port: cannot listen on {self.config.host}:{self.config.probe_port}: "
                    f"{err.strerror or err}; pick a free port (or 0 to serve probes on --port)"
                ) from err
        self._spawn(
            "nodes", self._watch, self._node_events, self.cache.apply_node, self._nodes_synced
        )
        self._spawn("pods", self._watch_pods)
        self._spawn("sweeper", self._sweep)
        if self.queues is not None:
            queues = self.queues
            self._spawn("queues", queues.run, self._stop, lambda: self.liveness.beat("queues"))
        if self.tls_reloader is not None:
            self._spawn("tls", self._reload_tls)
        if self.elector is not None:
            self._spawn(
                "leader",
                lambda: self.elector.run(  # type: ignore[union-attr]
                    self._stop, on_started_leading=self._lead, on_stopped_leading=self._follow
                ),
            )
        else:
            log.info("leader election off: this replica binds (run only one)")
        scheme = "HTTPS, client certificates required" if self.config.tls else "plain HTTP"
        log.info("vgpu extender serving on port %d (%s)", self.port, scheme)

    def stop(self) -> None:
        """Stop serving and end every thread."""
        self._stop.set()
        self.http.stop()
        if self.probes is not None:
            self.probes.stop()
        self.invalid_pods.close()
        for thread in self._threads:
            # Watch threads may sit in a blocking read until the server's next event; they are
            # daemons and stop at that event, so they are not waited for.
            thread.join(timeout=0.05 if thread.name.endswith(("nodes", "pods")) else 5)

    def wait_ready(self, timeout: float) -> bool:
        """Block until ready (tests and the e2e harness)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.why_not_ready() is None:
                return True
            time.sleep(0.02)
        return False

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(
            target=target, args=args, name=f"vgpu-extender-{name}", daemon=True
        )
        self._threads.append(thread)
        if not name.startswith("resync-"):  # a resync ends when done; the others never end
            self.liveness.register(name, thread, self._stuck_after(name))
        thread.start()

    def _stuck_after(self, name: str) -> float:
        """How long a loop may go without a turn before `/readyz` calls it stuck."""
        if name == "sweeper":
            return 3 * self.config.sweep_interval + MAX_RETRY_S
        return float("inf")  # watches block in reads; they are watched for ending only

    # -- readiness -------------------------------------------------------------------------------
    def why_not_ready(self) -> str | None:
        """None when this replica should receive kube-scheduler's calls."""
        if not (self._nodes_synced.is_set() and self._pods_synced.is_set()):
            return "cache not synced yet"
        if (dead := self.liveness.why_not_live()) is not None:
            return f"vgpu extender: {dead}"
        return self.why_not_binding()

    def why_not_binding(self) -> str | None:
        """None when this replica may bind."""
        if not (self._nodes_synced.is_set() and self._pods_synced.is_set()):
            return "vgpu extender: cache not synced yet"
        if self.elector is None:
            return None
        if not self.elector.is_leader:
            return "vgpu extender: this replica is not the leader"
        if self._term_ready != self.elector.term:
            return "vgpu extender: new leader is resyncing its cache"
        return None

    # -- threads ---------------------------------------------------------------------------------
    def _node_events(self) -> Iterator[WatchEvent]:
        return self.api.watch_nodes(
            stop=self._stop,
            timeout_seconds=self.config.watch_timeout,
            retry_delay=self.config.retry_delay,
        )

    def _pod_events(self) -> Iterator[WatchEvent]:
        return self.api.watch_pods(
            stop=self._stop,
            timeout_seconds=self.config.watch_timeout,
            retry_delay=self.config.retry_delay,
        )

    def _watch_pods(self) -> None:
        while not self._nodes_synced.wait(0.1):
            if self._stop.is_set():
                return
        self._watch(self._pod_events, self._apply_pod, self._pods_synced)

    def _watch(
        self,
        events: Callable[[], Iterator[WatchEvent]],
        apply: Callable[[str, dict[str, Any]], None],
        synced: threading.Event,
    ) -> None:
        backoff = Backoff(self.config.retry_delay, MAX_RETRY_S)
        while not self._stop.is_set():
            try:
                for event in events():
                    backoff.reset()
                    if event.type == SYNCED:
                        if not synced.is_set():  # the first listing; later relists are quiet
                            if synced is self._pods_synced:
                                self.extender.restore_gangs()  # before any pod is served
                            log.info("%s", self._synced_line(synced))
                        synced.set()
                        continue
                    try:
                        apply(event.type, event.object)
                    except Exception:  # a bug, not the object: skip the event, keep the watch
                        log.exception("applying a %s event failed; skipped", event.type)
            except Exception:
                log.exception("watch failed; restarting")
                self._stop.wait(backoff.next_delay())

    def _synced_line(self, synced: threading.Event) -> str:
        if synced is self._nodes_synced:
            return f"node watch synced: {len(self.cache.node_states)} node(s) with vgpu GPUs"
        return "pod watch synced: serving filter, prioritize and bind"

    def _reload_tls(self) -> None:
        """Renewed certificates (a Secret updated in place) take effect without a restart."""
        assert self.tls_reloader is not None
        while not self._stop.wait(self.config.tls_reload_interval):
            self.liveness.run_duty("reloading TLS files", done(self.tls_reloader.check))

    def _sweep(self) -> None:
        while not self._stop.wait(self.config.sweep_interval):
            self.liveness.beat("sweeper")
            try:
                self.extender.sweep()
                self._gang_events()
            except Exception:
                log.exception("sweep failed")

    def _gang_events(self) -> None:
        """Record the gang coordinator's Events (outside the cache lock: they are API calls)."""
        events = self.cache.gangs.take_events()
        for pod, reason, message in events:
            namespace, name = pod.split("/", 1)
            involved = {"kind": "Pod", "metadata": {"namespace": namespace, "name": name}}
            try:
                self.api.create_event(
                    involved,
                    reason=reason,
                    message=message,
                    event_type="Warning",
                    component="vgpu-extender",
                )
            except KubeError as e:
                log.warning("cannot record event %s for %s: %s", reason, pod, e)

    def _lead(self, term: int) -> None:
        self._spawn(f"resync-{term}", self._resync, term)

    def _resync(self, term: int) -> None:
        """Re-list the cluster for a new leadership term, then allow binding."""
        backoff = Backoff(self.config.retry_delay, MAX_RETRY_S)
        while not self._stop.is_set() and self.elector is not None and self.elector.term == term:
            try:
                nodes = self.api.list_nodes().items
                pods = self.api.list_pods().items
                with self.cache.atomic():
                    self.cache.replace_all(nodes, pods)
                    self.extender.restore_gangs()
                if self.queues is not None:
                    self.queue_index.replace_all(pods)
            except Exception as err:  # an API failure or a bug: retry, never end the term's resync
                delay = backoff.next_delay()
                log.warning("resync for term %d failed, retrying in %.1fs: %s", term, delay, err)
                self._stop.wait(delay)
                continue
            self._term_ready = term
            log.info(
                "leader term %d: cache resynced (%d nodes, %d pods)", term, len(nodes), len(pods)
            )
            return

    def _follow(self) -> None:
        log.info("no longer the leader; binds refused")
