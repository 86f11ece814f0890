"""The extender says what it does at INFO, one line per event: its watches synced (with the
node count), it leads (or follows whom), its cache resynced for the term."""

from __future__ import annotations

import logging

import pytest

from tests.extender.builders import make_node
from tests.extender.conftest import Harness
from tests.waiting import wait_until
from vgpu.adapters.leader import LeaderConfig


def renewals(harness: Harness) -> int:
    """The lease writes (PUT) the leader made: one per election tick while it leads."""
    lease = "/namespaces/vgpu-system/leases/vgpu-extender"
    return sum(1 for r in harness.server.requests if r.method == "PUT" and r.path.endswith(lease))


def test_start_up_events_are_said_once(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="vgpu")
    harness.put(make_node("n1", gpus=1))
    harness.put(make_node("n2", gpus=2))
    lease = LeaderConfig("vgpu-system", "vgpu-extender", "a", 1.0, 0.6, 0.1)
    daemon = harness.start(leader=lease)
    # Once, not once per tick: five renewals of the lease (every 0.1 s) after it leads.
    wait_until(lambda: renewals(harness) >= 5, what="five renewals of the lease")
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    expected = [
        "node watch synced: 2 node(s) with vgpu GPUs",
        "pod watch synced: serving filter, prioritize and bind",
        "leader election: a leads vgpu-system/vgpu-extender (term 1)",
        "leader term 1: cache resynced (2 nodes, 0 pods)",
        f"vgpu extender serving on port {daemon.port} (plain HTTP)",
    ]
    assert sorted(m for m in said if m in expected) == sorted(expected), said
    assert len(said) == len(expected), said


def test_without_leader_election_it_says_so(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vgpu")
    harness.start()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert "leader election off: this replica binds (run only one)" in said
