"""The watchdog's pure decisions: usage against grants, what to stop, unknown processes, throttling."""

from __future__ import annotations

from vgpu.core.ids import GpuUUID, PodKey
from vgpu.core.model import GpuShare
from vgpu.node.containers import ContainerKey, Unresolved
from vgpu.node.handoff.admissions import GrantedContainer
from vgpu.node.model import ProcessUsage
from vgpu.node.watchdog import (
    ContainerUsage,
    Grant,
    OverGrant,
    Throttle,
    UnknownProcess,
    WatchdogPolicy,
    assess,
    gib,
    grants_of,
)

GIB = 1024**3
G0, G1 = "GPU-0", "GPU-1"
MAIN = ContainerKey("ml", "train", "main", "uid-1")
SIDE = ContainerKey("ml", "train", "side", "uid-1")
PLAIN = ContainerKey("ml", "plain", "app", "uid-2")
GRANTS = {MAIN: {G0: Grant(30, 4 * GIB)}, SIDE: {G0: Grant(10, 1 * GIB)}}


def test_grants_round_memory_up_to_whole_mib_like_the_container_limit() -> None:
    shares = (GpuShare(GpuUUID(G0), 30, 4096 * 1000), GpuShare(GpuUUID(G1), 5, 768_500))
    granted = [GrantedContainer(PodKey("ml/train"), "uid-1", "main", shares, True)]
    assert grants_of(granted) == {MAIN: {G0: Grant(30, 4 * GIB), G1: Grant(5, 769 * 1024 * 1024)}}


def test_usage_within_grants_is_reported_per_container_and_gpu() -> None:
    samples = [ProcessUsage(G0, 10, 2 * GIB), ProcessUsage(G0, 11, GIB), ProcessUsage(G0, 20, None)]
    owners = {10: MAIN, 11: MAIN, 20: SIDE}
    result = assess(samples, owners, GRANTS)
    assert result.containers == (
        ContainerUsage(MAIN, G0, 4 * GIB, 3 * GIB, (10, 11)),
        ContainerUsage(SIDE, G0, GIB, 0, (20,)),
    )
    assert result.over == () and result.unknown == ()


def test_granted_container_without_processes_shows_zero_use() -> None:
    result = assess([], {}, GRANTS)
    assert [(c.key, c.used_bytes) for c in result.containers] == [(MAIN, 0), (SIDE, 0)]


def test_over_grant_is_found_and_nothing_is_stopped_without_kill() -> None:
    samples = [ProcessUsage(G0, 10, 3 * GIB), ProcessUsage(G0, 11, 2 * GIB)]
    result = assess(samples, {10: MAIN, 11: MAIN}, GRANTS)
    assert result.over == (OverGrant(MAIN, G0, 5 * GIB, 4 * GIB, (10, 11)),)
    assert result.over[0].excess_bytes == GIB
    assert result.kills == ()


def test_kill_stops_the_largest_processes_until_the_rest_fits() -> None:
    samples = [
        ProcessUsage(G0, 10, GIB),
        ProcessUsage(G0, 11, 3 * GIB),
        ProcessUsage(G0, 12, 2 * GIB),
    ]
    result = assess(samples, {10: SIDE, 11: SIDE, 12: SIDE}, GRANTS, WatchdogPolicy(kill=True))
    assert [pid for _, pid in result.kills] == [11, 12]  # 6 GiB -> 3 -> 1, within its 1 GiB
    result = assess(samples, {10: MAIN, 11: MAIN, 12: MAIN}, GRANTS, WatchdogPolicy(kill=True))
    assert [pid for _, pid in result.kills] == [11]  # 6 GiB -> 3, within its 4 GiB


def test_tolerance_absorbs_small_excess() -> None:
    samples = [ProcessUsage(G0, 10, 4 * GIB + 100 * 1024 * 1024)]
    assert assess(samples, {10: MAIN}, GRANTS).over != ()
    policy = WatchdogPolicy(kill=True, tolerance_bytes=256 * 1024 * 1024)
    assert assess(samples, {10: MAIN}, GRANTS, policy).over == ()


def test_use_of_a_gpu_without_a_grant_there_is_over_a_zero_grant() -> None:
    samples = [ProcessUsage(G1, 10, GIB), ProcessUsage(G0, 30, 512 * 1024 * 1024)]
    result = assess(samples, {10: MAIN, 30: PLAIN}, GRANTS, WatchdogPolicy(kill=True))
    assert {(f.key, f.gpu_uuid, f.granted_bytes, f.kill) for f in result.over} == {
        (MAIN, G1, 0, (10,)),
        (PLAIN, G0, 0, (30,)),
    }
    row = next(c for c in result.containers if c.key == PLAIN)
    assert row.granted_bytes is None and row.used_bytes == 512 * 1024 * 1024


def test_foreign_processes_are_unknown_gone_and_starting_ones_are_skipped() -> None:
    samples = [
        ProcessUsage(G1, 99, GIB),
        ProcessUsage(G0, 98, 2 * GIB),
        ProcessUsage(G0, 97, 3 * GIB),
        ProcessUsage(G0, 96, GIB),  # no owner given at all: foreign
    ]
    owners = {99: Unresolved.FOREIGN, 98: Unresolved.GONE, 97: Unresolved.STARTING}
    result = assess(samples, owners, {})
    assert result.unknown == (UnknownProcess(G0, 96, GIB), UnknownProcess(G1, 99, GIB))
    assert result.over == () and result.containers == ()


def test_throttle_lets_each_key_through_once_per_interval() -> None:
    now = [0.0]
    throttle = Throttle(60.0, lambda: now[0])
    assert throttle.allow("a") and throttle.allow("b")
    now[0] = 59.0
    assert not throttle.allow("a")
    now[0] = 60.0
    assert throttle.allow("a") and not throttle.allow("a")


def test_sizes_read_well_in_messages() -> None:
    assert gib(5 * GIB) == "5.0 GiB" and gib(512 * 1024 * 1024) == "512 MiB"
