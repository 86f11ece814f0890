"""`/metrics` of the node agent over real HTTP against a fake-GPU scenario: exact sample values
per GPU and per container, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.node.agent_harness import CORES, MEMORY, Box, make_box
from tests.node.usage_scenario import (
    GIB,
    MIB,
    FakeCgroups,
    cgroup_v2,
    names,
    run_pod,
    scrape,
    value,
)
from tests.waiting import holds_within
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.node.model import GpuInfo

CID = "c0ffee" + "0" * 58
T4_BYTES = 15360 * MIB


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def _gpu(backend: FakeGpuBackend, uuid: str) -> GpuInfo:
    return backend.inventory().by_uuid()[uuid]


def test_admitted_pod_using_3_of_4_gib_on_its_gpu(box: Box) -> None:
    backend = FakeGpuBackend.from_spec("2xT4", seed="node-a")
    cgroups = FakeCgroups()
    agent = box.start_agent(backend=backend, cgroups=cgroups, metrics_port=0, watchdog_s=0)
    assert agent.metrics.port
    g0, g1 = box.gpus
    box.place("a", [("main", 30, 4)], {"main": [(0, 30)]})  # box.gpus[0]: 30 cores, 4 GiB
    box.admit("a", "main", CORES, 30)
    box.admit("a", "main", MEMORY, 4)
    uid = run_pod(box, "a", {"main": CID})
    assert holds_within(lambda: len(agent.containers) == 1)
    cgroups.files[4242] = cgroup_v2(uid, CID)
    backend.set_process(g0, 4242, 3 * GIB)
    backend.set_utilization(g0, 0.55)

    samples = scrape(agent.metrics.port)

    for gpu in (g0, g1):
        index = str(_gpu(backend, gpu).index)
        assert value(samples, "vgpu_gpu_info", gpu=gpu, index=index, model="Tesla T4") == 1
        assert value(samples, "vgpu_gpu_memory_capacity_bytes", gpu=gpu) == T4_BYTES
        assert value(samples, "vgpu_gpu_healthy", gpu=gpu) == 1
    assert value(samples, "vgpu_gpu_memory_allocated_bytes", gpu=g0) == 4 * GIB
    assert value(samples, "vgpu_gpu_memory_allocated_bytes", gpu=g1) == 0
    assert value(samples, "vgpu_gpu_cores_allocated_ratio", gpu=g0) == 0.3
    assert value(samples, "vgpu_gpu_cores_allocated_ratio", gpu=g1) == 0
    assert value(samples, "vgpu_gpu_memory_used_bytes", gpu=g0) == 3 * GIB
    assert value(samples, "vgpu_gpu_memory_used_bytes", gpu=g1) == 0
    assert value(samples, "vgpu_gpu_utilization_ratio", gpu=g0) == 0.55
    labels = {"namespace": "default", "pod": "a", "container": "main", "gpu": g0}
    assert value(samples, "vgpu_container_gpu_memory_allocated_bytes", **labels) == 4 * GIB
    assert value(samples, "vgpu_container_gpu_memory_used_bytes", **labels) == 3 * GIB
    assert names(samples, "vgpu_container_gpu_memory_allocated_bytes") == [labels]
    assert names(samples, "vgpu_container_gpu_memory_over_grant_bytes") == []
    assert names(samples, "vgpu_unknown_process_gpu_memory_bytes") == []


def test_scrapes_follow_usage_over_time_and_count_xids(box: Box) -> None:
    backend = FakeGpuBackend.from_spec("2xT4", seed="node-a")
    cgroups = FakeCgroups()
    agent = box.start_agent(backend=backend, cgroups=cgroups, metrics_port=0, watchdog_s=0)
    assert agent.metrics.port
    g0, g1 = box.gpus
    box.place("a", [("main", 30, 4)], {"main": [(0, 30)]})
    uid = run_pod(box, "a", {"main": CID})
    assert holds_within(lambda: len(agent.containers) == 1)
    cgroups.files.update({10: cgroup_v2(uid, CID), 11: cgroup_v2(uid, CID)})
    labels = {"namespace": "default", "pod": "a", "container": "main", "gpu": g0}

    backend.set_process(g0, 10, 3 * GIB)
    backend.set_process(g0, 11, 2 * GIB)  # a second process takes it to 5 GiB of 4
    samples = scrape(agent.metrics.port)
    assert value(samples, "vgpu_container_gpu_memory_used_bytes", **labels) == 5 * GIB
    assert value(samples, "vgpu_container_gpu_memory_over_grant_bytes", **labels) == GIB

    backend.end_process(11)
    backend.set_memory_used(g1, 700 * MIB)  # driver-held memory outside any process
    backend.inject_xid(79, g1)  # fell off the bus
    backend.inject_xid(13, g0)  # application error: counted, GPU stays healthy
    assert holds_within(lambda: value(scrape(agent.metrics.port), "vgpu_gpu_healthy", gpu=g1) == 0)
    samples = scrape(agent.metrics.port)
    assert value(samples, "vgpu_container_gpu_memory_used_bytes", **labels) == 3 * GIB
    assert names(samples, "vgpu_container_gpu_memory_over_grant_bytes") == []
    assert value(samples, "vgpu_gpu_memory_used_bytes", gpu=g1) == 700 * MIB
    assert value(samples, "vgpu_gpu_xid_events_total", gpu=g1, xid="79") == 1
    assert value(samples, "vgpu_gpu_xid_events_total", gpu=g0, xid="13") == 1
    assert value(samples, "vgpu_gpu_healthy", gpu=g0) == 1


def test_a_failing_backend_drops_live_values_not_the_endpoint(box: Box) -> None:
    backend = FakeGpuBackend.from_spec("2xT4", seed="node-a")
    agent = box.start_agent(backend=backend, cgroups=FakeCgroups(), metrics_port=0, watchdog_s=0)
    assert agent.metrics.port
    backend.set_failure("GPU has fallen off the bus")
    samples = scrape(agent.metrics.port)
    assert value(samples, "vgpu_gpu_memory_capacity_bytes", gpu=box.gpus[0]) == T4_BYTES
    assert names(samples, "vgpu_gpu_memory_used_bytes") == []
    assert names(samples, "vgpu_container_gpu_memory_used_bytes") == []
    backend.set_failure(None)
