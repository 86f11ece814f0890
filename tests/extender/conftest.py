"""Fixtures: a fake API server, an in-process extender daemon on port 0, and a wire client."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.extender.builders import FakeClock, Wire, make_pod
from tests.kubeapi.fixtures import kube_client, kube_server
from tests.kubeapi.server import FakeApiServer
from tests.waiting import wait_until
from vgpu.adapters.kube.calls import KubeApi
from vgpu.adapters.leader import LeaderConfig
from vgpu.core.ids import PodKey
from vgpu.core.policy.specs import parse_policy
from vgpu.daemons.extender.daemon import DaemonConfig, ExtenderDaemon
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.server.tls import TlsFiles

__all__ = ["kube_client", "kube_server"]

KEY = b"test-key"


class Harness:
    """The fake API server plus started extender daemons."""

    def __init__(self, server: FakeApiServer) -> None:
        self.server = server
        self.store = server.store
        self.clock = FakeClock()
        self.daemons: list[ExtenderDaemon] = []
        self.clients: list[Any] = []
        self._barriers = 0

    def start(
        self,
        *,
        gang_timeout: float = 60.0,
        bind_wait: float = 0.5,
        leader: LeaderConfig | None = None,
        request_timeout: float = 5.0,
        wait: bool = True,
        pod_policies: tuple[str, ...] = (),
        tls: TlsFiles | None = None,
        probe_port: int | None = None,
        watch_wait: float = 1.0,
        watch_waiters: int = 4,
    ) -> ExtenderDaemon:
        api_client = self.server.api_client()
        self.clients.append(api_client)
        api = KubeApi(api_client, request_timeout=request_timeout)
        config = DaemonConfig(
            key=KEY,
            extender=ExtenderConfig(
                gang_timeout=gang_timeout,
                bind_wait=bind_wait,
                pod_policies=tuple(parse_policy(p) for p in pod_policies),
                watch_wait=watch_wait,
                watch_waiters=watch_waiters,
            ),
            host="127.0.0.1",
            port=0,
            leader=leader,
            tls=tls,
            probe_port=probe_port,
            watch_timeout=30,
            sweep_interval=3600,
            retry_delay=0.05,
        )
        daemon = ExtenderDaemon(api, config, clock=self.clock)
        daemon.start()
        self.daemons.append(daemon)
        if wait:
            assert daemon.wait_ready(10), daemon.why_not_ready()
        return daemon

    def wire(self, daemon: ExtenderDaemon) -> Wire:
        return Wire(daemon.port)

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.store.put(obj)

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        pod = self.store.get("Pod", namespace, name)
        assert pod is not None, name
        return pod

    def shown(self, pod: dict[str, Any], daemon: ExtenderDaemon | None = None) -> dict[str, Any]:
        """Create (or overwrite) `pod` and return it once the daemon's watch shows this version:
        a request only names its pod, so the pods the tests ask about are real. An overwrite is
        known to be applied when a later write (a barrier pod, then its deletion) is."""
        shown_by = daemon if daemon is not None else self.daemons[-1]
        meta = pod.get("metadata", {})
        key = PodKey(f"{meta.get('namespace', 'default')}/{meta.get('name')}")
        existed = self.store.get("Pod", key.split("/")[0], key.split("/")[1]) is not None
        stored = self.put(pod)
        if existed:
            self._barrier(shown_by)
        wait_until(lambda: key in shown_by.cache.pods or key in shown_by.cache.invalid)
        return stored

    def _barrier(self, daemon: ExtenderDaemon) -> None:
        """Wait until the daemon's watch has applied every pod write made before this call."""
        self._barriers += 1
        name = f"zz-barrier-{self._barriers}"
        barrier = self.put(make_pod(name))
        key = PodKey(f"default/{name}")
        wait_until(lambda: key in daemon.cache.pods or key in daemon.cache.invalid)
        self.store.remove("Pod", "default", barrier["metadata"]["name"])
        wait_until(lambda: key not in daemon.cache.pods and key not in daemon.cache.invalid)

    def seen(self, daemon: ExtenderDaemon, check: Callable[[], Any]) -> Any:
        return wait_until(check)

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.stop()
        for client in self.clients:
            client.close()


@pytest.fixture
def harness(kube_server: FakeApiServer) -> Iterator[Harness]:
    h = Harness(kube_server)
    try:
        yield h
    finally:
        h.close()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extender's certificates as the shipped script makes them, one set for the HTTP
    tests (they only read them); a module needing another shape defines its own."""
    out = tmp_path_factory.mktemp("extender-certs")
    script = Path(__file__).resolve().parents[2] / "hack" / "make-extender-certs.sh"
    subprocess.run([str(script), str(out), "--days", "2"], check=True, capture_output=True)
    return out
