"""Health policy: XIDs, ignored application XIDs, recovery, backend failure."""

from __future__ import annotations

import pytest

from vgpu.node.health import HealthPolicy, HealthTracker, parse_xid_list
from vgpu.node.model import XidEvent


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tracker(clock: Clock, **policy: object) -> HealthTracker:
    return HealthTracker(("GPU-a", "GPU-b"), HealthPolicy(**policy), clock)  # type: ignore[arg-type]


def test_critical_xid_marks_only_its_gpu() -> None:
    t = tracker(Clock())
    t.observe([XidEvent(79, "GPU-b")])
    assert t.unhealthy() == {"GPU-b"}
    assert t.reason("GPU-b") == "XID 79"
    assert t.reason("GPU-a") is None


@pytest.mark.parametrize("xid", [13, 31, 43, 45, 68, 109])
def test_application_xids_are_ignored_by_default(xid: int) -> None:
    t = tracker(Clock())
    t.observe([XidEvent(xid, "GPU-a")])
    assert t.unhealthy() == frozenset()


def test_ignored_set_is_configurable() -> None:
    t = tracker(Clock(), ignored_xids=frozenset({79}))
    t.observe([XidEvent(79, "GPU-a"), XidEvent(13, "GPU-b")])
    assert t.unhealthy() == {"GPU-b"}


def test_unattributed_event_and_backend_failure_mark_all() -> None:
    t = tracker(Clock())
    t.observe([XidEvent(48, None)])
    assert t.unhealthy() == {"GPU-a", "GPU-b"}
    t2 = tracker(Clock())
    t2.backend_failed("driver gone")
    assert t2.unhealthy() == {"GPU-a", "GPU-b"}
    assert t2.reason("GPU-a") == "GPU backend failed: driver gone"


def test_unknown_gpu_is_ignored() -> None:
    t = tracker(Clock())
    t.observe([XidEvent(79, "GPU-zzz")])
    assert t.unhealthy() == frozenset()


def test_quiet_gpu_recovers_and_new_events_restart_the_timer() -> None:
    clock = Clock()
    t = tracker(clock, recovery_s=60.0)
    t.observe([XidEvent(79, "GPU-a")])
    clock.now += 59
    t.observe([XidEvent(79, "GPU-a")])
    clock.now += 59
    assert t.unhealthy() == {"GPU-a"}
    clock.now += 1
    assert t.unhealthy() == frozenset()


def test_no_recovery_when_disabled() -> None:
    clock = Clock()
    t = tracker(clock, recovery_s=None)
    t.observe([XidEvent(79, "GPU-a")])
    clock.now += 1e9
    assert t.unhealthy() == {"GPU-a"}


def test_parse_xid_list() -> None:
    assert parse_xid_list(" 13, 31,,43 ") == {13, 31, 43}
    assert parse_xid_list("") == frozenset()
    with pytest.raises(ValueError, match="'x1' is not an XID number"):
        parse_xid_list("13,x1")
    with pytest.raises(ValueError, match="recovery_s"):
        HealthPolicy(recovery_s=-1)
