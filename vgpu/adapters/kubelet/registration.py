"""Keeps the device plugins registered: serve, register, and start over when the kubelet restarts.

The kubelet never re-dials a plugin. When it restarts it wipes the socket files in the
device-plugin directory and creates a new `kubelet.sock`; every plugin must notice, serve on a
fresh socket and register again. The manager polls (every `poll_interval_s`, default 200 ms)
the identity (inode, mtime) of `kubelet.sock` and the existence of each plugin's own socket:

- kubelet.sock replaced → every plugin restarts on a fresh socket and re-registers;
- a plugin's own socket deleted → that plugin restarts and re-registers;
- a failed registration is retried with capped exponential backoff (never fatal).

Polling rather than inotify keeps this portable and dependency-free; 200 ms polling gives
re-registration well within 2 s.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType

from vgpu.adapters.kubelet.device_plugin import KubeletError, PluginOptions, ResourcePlugin

log = logging.getLogger(__name__)

_MAX_BACKOFF_S = 5.0


def _socket_identity(path: os.PathLike[str]) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


class DevicePluginManager:
    """Owns the plugins' lifecycle. `start()` returns at once; `stop()` is graceful."""

    def __init__(self, plugins: Sequence[ResourcePlugin], options: PluginOptions) -> None:
        self.plugins = tuple(plugins)
        self._options = options
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending: dict[str, float] = {}  # resource -> monotonic time of next attempt
        self._failures: dict[str, int] = {}
        self._kubelet: tuple[int, int] | None = None
        self._waiting = False  # "waiting for kubelet.sock" said, not yet found
        self._rounds = 0  # registration rounds completed: 1 is the first, then re-registrations
        self.registrations = 0  # successful Register calls, for tests and metrics

    def start(self) -> None:
        for plugin in self.plugins:
            plugin.serve()
            self._pending[plugin.resource] = 0.0
        self._kubelet = _socket_identity(self._options.kubelet_socket_path)
        self._thread = threading.Thread(target=self._run, name="vgpu-plugin-manager", daemon=True)
        self._thread.start()

    def stop(self, grace_s: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        for plugin in self.plugins:
            plugin.stop(grace_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # the watcher must survive anything; log and keep polling
                log.exception("device-plugin manager: unexpected error")
            self._stop.wait(self._options.poll_interval_s)

    def _tick(self) -> None:
        identity = _socket_identity(self._options.kubelet_socket_path)
        self._say_waiting(identity is None)
        if identity != self._kubelet:
            self._kubelet = identity
            if identity is not None:
                log.info("kubelet.sock (re)created: restarting and re-registering all plugins")
                for plugin in self.plugins:
                    self._restart(plugin)
        for plugin in self.plugins:
            if not plugin.socket_present():
                log.info("%s: own socket vanished, restarting", plugin.resource)
                self._restart(plugin)
        if identity is not None:
            self._register_due()

    def _restart(self, plugin: ResourcePlugin) -> None:
        plugin.serve()
        self._pending[plugin.resource] = 0.0
        self._failures.pop(plugin.resource, None)

    def _register_due(self) -> None:
        now = time.monotonic()
        for plugin in self.plugins:
            due = self._pending.get(plugin.resource)
            if due is None or due > now or self._stop.is_set():
                continue
            try:
                plugin.register()
            except KubeletError as e:
                failures = self._failures.get(plugin.resource, 0) + 1
                self._failures[plugin.resource] = failures
                backoff = min(_MAX_BACKOFF_S, 0.25 * 2**failures)
                # The first failure of a streak is news; the retries are not (DEBUG).
                level = logging.WARNING if failures == 1 else logging.DEBUG
                log.log(level, "%s (retrying every %.1fs at most)", e, _MAX_BACKOFF_S)
                self._pending[plugin.resource] = now + backoff
                continue
            del self._pending[plugin.resource]
            self._failures.pop(plugin.resource, None)
            self.registrations += 1
            if not self._pending:
                self._say_registered()

    def _say_waiting(self, absent: bool) -> None:
        """One line when the kubelet's socket goes missing, not one per poll."""
        path = self._options.kubelet_socket_path
        if absent and not self._waiting:  # its appearance is the "(re)created" line
            log.info("waiting for the kubelet: %s does not exist yet", path)
        self._waiting = absent

    def _say_registered(self) -> None:
        self._rounds += 1
        names = ", ".join(p.resource for p in self.plugins)
        again = "re-registered" if self._rounds > 1 else "registered"
        log.info("%s with the kubelet (%s): %s", again, self._options.kubelet_socket_path, names)

    def registered(self) -> bool:
        """True when every plugin's current socket is registered."""
        return not self._pending


def serve_until_signal(manager: DevicePluginManager, grace_s: float | None = None) -> None:
    """Run the manager until SIGTERM/SIGINT, then stop gracefully. Main thread only."""
    stop = threading.Event()

    def _handler(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, _handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        manager.start()
        stop.wait()
    finally:
        manager.stop(grace_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
