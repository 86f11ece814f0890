"""`vgpu_extender_binds_total{outcome}`: a gang member's by-design wait (for admission of an
equal member on its node, for its peers) is `deferred`, not `error` (such waits once counted
as errors, so VgpuBindErrors fired in normal gang operation); a real failure stays `error`."""

from __future__ import annotations

import re

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.extender.test_gang import _filter_all, _gang
from vgpu.daemons.extender.daemon import ExtenderDaemon


def _binds(daemon: ExtenderDaemon) -> dict[str, float]:
    text = daemon.metrics.exposition().decode()
    found = re.findall(r'^vgpu_extender_binds_total\{outcome="(\w+)"\} (\S+)$', text, re.M)
    return {outcome: float(n) for outcome, n in found}


def test_a_member_waiting_for_admission_is_a_deferred_bind(harness: Harness) -> None:
    pods = _gang(harness, "job", 2)
    harness.put(make_node("n1", gpus=2))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert _filter_all(harness, wire, pods) == dict.fromkeys(pods, "n1")
    assert wire.bind(harness.pod(pods[0]), "n1") == ""
    assert "waits for admission" in wire.bind(harness.pod(pods[1]), "n1")
    assert _binds(daemon) == {"ok": 1.0, "deferred": 1.0}


def test_a_member_waiting_for_its_peers_is_a_deferred_bind(harness: Harness) -> None:
    pods = _gang(harness, "job", 2)
    harness.put(make_node("n1", gpus=2))
    daemon = harness.start(bind_wait=0.05)
    wire = harness.wire(daemon)
    wire.filter(harness.pod(pods[0]), ["n1"])  # reserves both; only this one is confirmed
    assert "waiting until 2 members have their place" in wire.bind(harness.pod(pods[0]), "n1")
    assert _binds(daemon) == {"deferred": 1.0}


def test_a_pod_that_does_not_fit_its_node_is_a_bind_error(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("big", cores=200))
    daemon = harness.start()
    assert "does not fit node n1" in harness.wire(daemon).bind(harness.pod("big"), "n1")
    assert _binds(daemon) == {"error": 1.0}
