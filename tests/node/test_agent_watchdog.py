"""The usage watchdog in the running agent: Events through the fake API server, metrics over
HTTP, the kill port called only with `--watchdog-kill`, unknown processes reported on the node."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.node.agent_harness import NODE, Box, make_box
from tests.node.usage_scenario import (
    GIB,
    HOST_PROCESS,
    FakeCgroups,
    RecordingKiller,
    cgroup_v2,
    names,
    run_pod,
    scrape,
    value,
)
from tests.waiting import holds_within
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.agent.agent import NodeAgent
from vgpu.agent.metrics import KILL_SERIES_KEPT, NodeMetrics
from vgpu.node.watchdog import WatchdogPolicy

CID = "feed" + "1" * 60
LOOP_S = 0.05


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def _start(
    box: Box, *, kill: bool
) -> tuple[NodeAgent, FakeGpuBackend, FakeCgroups, RecordingKiller]:
    backend = FakeGpuBackend.from_spec("2xT4", seed=NODE)
    cgroups = FakeCgroups()
    killer = RecordingKiller(backend, cgroups)
    agent = box.start_agent(
        backend=backend,
        cgroups=cgroups,
        killer=killer,
        metrics_port=0,
        watchdog_s=LOOP_S,
        watchdog=WatchdogPolicy(kill=kill),
    )
    return agent, backend, cgroups, killer


def _greedy_pod(box: Box, agent: NodeAgent, backend: FakeGpuBackend, cgroups: FakeCgroups) -> str:
    """Pod `a`, granted 4 GiB on box.gpus[0], whose processes 10 and 11 use 3 + 2 GiB there."""
    box.place("a", [("main", 30, 4)], {"main": [(0, 30)]})
    uid = run_pod(box, "a", {"main": CID})
    assert holds_within(lambda: len(agent.containers) == 1)
    cgroups.files.update({10: cgroup_v2(uid, CID), 11: cgroup_v2(uid, CID)})
    backend.set_process(box.gpus[0], 10, 3 * GIB)
    backend.set_process(box.gpus[0], 11, 2 * GIB)
    return uid


def _steps_later(agent: NodeAgent, n: int) -> None:
    start = agent.watchdog.steps
    assert holds_within(lambda: agent.watchdog.steps >= start + n), "watchdog loop stalled"


def test_over_grant_is_reported_once_and_nothing_is_stopped_by_default(box: Box) -> None:
    agent, backend, cgroups, killer = _start(box, kill=False)
    uid = _greedy_pod(box, agent, backend, cgroups)
    assert holds_within(lambda: len(box.events("VgpuMemoryOverGrant")) == 1)
    _steps_later(agent, 5)  # the condition lasts: still one Event (rate-limited), no kill

    [event] = box.events("VgpuMemoryOverGrant")
    assert event["type"] == "Warning"
    assert event["involvedObject"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "name": "a",
        "namespace": "default",
        "uid": uid,
    }
    assert "5.0 GiB" in event["message"] and "4.0 GiB" in event["message"]
    assert box.gpus[0] in event["message"] and "10, 11" in event["message"]
    assert killer.killed == [] and box.events("VgpuProcessKilled") == []
    assert agent.metrics.port
    samples = scrape(agent.metrics.port)
    assert value(samples, "vgpu_watchdog_findings_total", finding="over_grant") == 1
    labels = {"namespace": "default", "pod": "a", "container": "main", "gpu": box.gpus[0]}
    assert value(samples, "vgpu_container_gpu_memory_over_grant_bytes", **labels) == GIB
    assert names(samples, "vgpu_watchdog_kills_total") == []


def test_watchdog_kill_stops_the_largest_process_then_all_is_quiet(box: Box) -> None:
    agent, backend, cgroups, killer = _start(box, kill=True)
    _greedy_pod(box, agent, backend, cgroups)
    assert holds_within(lambda: killer.killed == [10])  # 5 GiB - 3 GiB fits the 4 GiB grant
    _steps_later(agent, 3)
    assert killer.killed == [10]
    [killed] = box.events("VgpuProcessKilled")
    assert "stopped process(es) 10" in killed["message"]
    assert killed["involvedObject"]["name"] == "a"
    assert agent.metrics.port
    samples = scrape(agent.metrics.port)
    kills = {"namespace": "default", "pod": "a", "container": "main"}
    assert value(samples, "vgpu_watchdog_kills_total", **kills) == 1
    labels = {**kills, "gpu": box.gpus[0]}
    assert value(samples, "vgpu_container_gpu_memory_used_bytes", **labels) == 2 * GIB
    assert names(samples, "vgpu_container_gpu_memory_over_grant_bytes") == []


def test_a_pid_reused_between_sample_and_kill_is_spared(box: Box) -> None:
    agent, backend, cgroups, killer = _start(box, kill=True)
    box.place("a", [("main", 30, 4)], {"main": [(0, 30)]})
    uid = run_pod(box, "a", {"main": CID})
    assert holds_within(lambda: len(agent.containers) == 1)
    cgroups.files[11] = cgroup_v2(uid, CID)
    # PID 10 is pod a's when sampled, a host process's when the kill is about to happen.
    cgroups.then[10] = [cgroup_v2(uid, CID), HOST_PROCESS]
    backend.set_process(box.gpus[0], 11, 2 * GIB)
    backend.set_process(box.gpus[0], 10, 3 * GIB)
    assert holds_within(lambda: len(box.events("VgpuMemoryOverGrant")) == 1)
    _steps_later(agent, 3)
    assert killer.killed == [] and box.events("VgpuProcessKilled") == []


def test_unknown_gpu_process_is_reported_on_the_node(box: Box) -> None:
    agent, backend, cgroups, killer = _start(box, kill=True)
    box.place("a", [("main", 30, 4)], {"main": [(0, 30)]})
    uid = run_pod(box, "a", {"main": CID})
    assert holds_within(lambda: len(agent.containers) == 1)
    g1 = box.gpus[1]
    cgroups.files[777] = HOST_PROCESS  # a host process nobody scheduled
    cgroups.files[778] = cgroup_v2(uid, "ab" * 32)  # pod a's new container, status lags: skip
    other_pod = "99999999-8888-7777-6666-555555555555"
    cgroups.files[779] = cgroup_v2(other_pod, "cd" * 32)  # a pod this node doesn't run
    backend.set_process(g1, 777, GIB)
    backend.set_process(g1, 778, GIB)
    backend.set_process(g1, 779, 512 * 1024 * 1024)
    assert holds_within(lambda: len(box.events("VgpuUnknownGpuProcess")) == 2)
    _steps_later(agent, 5)

    events = box.events("VgpuUnknownGpuProcess")
    assert len(events) == 2
    assert {e["involvedObject"]["kind"] for e in events} == {"Node"}
    assert {e["involvedObject"]["name"] for e in events} == {NODE}
    assert any("process 777 uses 1.0 GiB" in e["message"] for e in events)
    assert any("process 779 uses 512 MiB" in e["message"] for e in events)
    assert killer.killed == []  # unknown processes are only reported
    assert agent.metrics.port
    samples = scrape(agent.metrics.port)
    assert value(samples, "vgpu_unknown_process_gpu_memory_bytes", gpu=g1, pid="777") == GIB
    assert value(samples, "vgpu_unknown_process_gpu_memory_bytes", gpu=g1, pid="779") == 2**29
    assert names(samples, "vgpu_unknown_process_gpu_memory_bytes") == [
        {"gpu": g1, "pid": "777"},
        {"gpu": g1, "pid": "779"},
    ]
    assert value(samples, "vgpu_watchdog_findings_total", finding="unknown") == 2


def test_the_kill_counters_series_are_bounded_however_many_pods_are_stopped() -> None:
    """Found by a node-side review: each pod the watchdog stopped added a series that was never
    removed, so pod churn grew the agent and its /metrics output without bound. The oldest
    series go first; Prometheus reads a series that disappears as ended."""
    metrics = NodeMetrics()
    for n in range(KILL_SERIES_KEPT + 50):
        metrics.killed("default", f"p{n}", "main")
    metrics.killed("default", f"p{KILL_SERIES_KEPT + 49}", "main")  # the newest, twice
    series = [
        s
        for family in metrics.registry.collect()
        if family.name == "vgpu_watchdog_kills"
        for s in family.samples
        if s.name == "vgpu_watchdog_kills_total"
    ]
    assert len(series) == KILL_SERIES_KEPT
    newest = [s.value for s in series if s.labels["pod"] == f"p{KILL_SERIES_KEPT + 49}"]
    assert newest == [2.0]
    assert not [s for s in series if s.labels["pod"] == "p0"]
