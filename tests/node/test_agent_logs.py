"""The node agent says what it does at INFO by default, one line per event with names: its GPUs,
registration with the kubelet, the pod watch's first sync; nothing more while it idles."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.node.agent_harness import CORES, NODE, Box, make_box
from tests.waiting import holds_within, wait_until


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def test_start_up_says_each_event_once(box: Box, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="vgpu")
    agent = box.start_agent(metrics_port=0)
    reads = box.node_requests("GET")  # idle: five reconcile periods (0.2 s) say nothing more
    wait_until(lambda: box.node_requests("GET") >= reads + 5, what="five more syncs of the node")
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert f"{NODE}: 2 GPU(s): ['Tesla T4', 'Tesla T4']" in said
    assert f"{NODE}: pod watch synced, 0 vgpu pod(s) bound here" in said
    assert f"{NODE}: /metrics, /healthz, /readyz on port {agent.metrics.port}" in said
    registered = [m for m in said if m.startswith("registered with the kubelet")]
    assert registered == [
        f"registered with the kubelet ({box.dir / 'kubelet.sock'}): vgpu.io/cores, vgpu.io/memory"
    ]
    assert len(said) == len(set(said)), said  # nothing repeats while idle


def test_a_lasting_failure_is_said_once_and_its_end_too(
    box: Box, caplog: pytest.LogCaptureFixture
) -> None:
    """The API server refusing node updates for a while: one WARNING, not one per retry."""
    box.start_agent()
    caplog.set_level(logging.INFO, logger="vgpu")
    caplog.clear()
    box.api.inject("GET", rf"/api/v1/nodes/{NODE}$", status=500, times=None)
    reads = box.node_requests("GET")
    box.agent.publisher.dirty = True  # a health change would do the same
    box.agent._wake.set()
    wait_until(lambda: box.node_requests("GET") >= reads + 3, 10, "three failed node reads")
    node_lines = [r for r in caplog.records if "labels/annotations" in r.getMessage()]
    assert [r.levelno for r in node_lines] == [logging.WARNING], [
        r.getMessage() for r in node_lines
    ]
    box.api.clear_faults()
    assert holds_within(lambda: any("works again" in r.getMessage() for r in caplog.records))


def test_a_kubelet_listing_unit_ids_in_pod_status_is_named_once(
    box: Box, caplog: pytest.LogCaptureFixture
) -> None:
    """The kubelet's ResourceHealthStatus listing (one ID per unit, in map order) rewrites
    every running vGPU pod's status: one WARNING naming the setting that stops it."""
    box.start_agent()
    caplog.set_level(logging.INFO, logger="vgpu")
    for name, gpu, cores in (("quiet", 1, 20), ("listed-a", 0, 10), ("listed-b", 0, 30)):
        box.place(name, [("main", cores, 0)], {"main": [(gpu, cores)]})
        pod = box.pod(name)  # as bound
        if name != "quiet":
            ids = [{"resourceID": f"{box.gpus[0]}::c{k}", "health": "Healthy"} for k in range(10)]
            pod["status"] = {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "main",
                        "allocatedResourcesStatus": [{"name": CORES, "resources": ids}],
                    }
                ],
            }
            box.api.store.put(pod)

    def told() -> list[str]:
        return [
            r.getMessage() for r in caplog.records if "allocatedResourcesStatus" in r.getMessage()
        ]

    assert holds_within(lambda: len(told()) > 0)
    # One watch, in order: once a pod placed after them is seen, both listed pods' events are in.
    box.place("last", [("main", 10, 0)], {"main": [(1, 10)]})
    (line,) = told()
    assert "default/listed-a" in line and "daemonset/kubelet/50-vgpu.conf" in line, line
