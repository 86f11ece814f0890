"""A running web view over a snapshot file the test may rewrite."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.inspect.scenario import demo_cluster
from tests.web.sample import queue_cluster
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.snapshot import Snapshot, dumps, loads
from vgpu.inspect.web.refresh import Refresher
from vgpu.inspect.web.server import make_server


@dataclass
class Served:
    url: str
    refresher: Refresher
    path: Path

    def save(self, snapshot: Snapshot) -> None:
        """Rewrite the snapshot file and read it now (as the loop would, without the wait)."""
        self.path.write_text(dumps(snapshot, as_json=True, names=DEFAULT_NAMES))
        self.refresher.refresh()


def serve(
    tmp_path: Path, snapshot: Snapshot, config: str | None, interval: float
) -> Iterator[Served]:
    path = tmp_path / "cluster.json"
    path.write_text(dumps(snapshot, as_json=True, names=DEFAULT_NAMES))

    def read() -> tuple[Snapshot, str | None]:
        return loads(path.read_text(), source=str(path)), config

    refresher = Refresher(read, DEFAULT_NAMES, interval, live=False)
    refresher.refresh()
    server = make_server(refresher, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{server.server_address[1]}", refresher, path)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The demo cluster plus the queue sample's queues, re-read only when a test asks."""
    snapshot = demo_cluster()
    queued, config = queue_cluster()
    merged = Snapshot(snapshot.nodes + queued.nodes, snapshot.pods + queued.pods,
                      snapshot.pod_groups, snapshot.taken_at,
                      extender_lease=snapshot.extender_lease, lease_read=True)  # fmt: skip
    yield from serve(tmp_path, merged, config, 1.0)
