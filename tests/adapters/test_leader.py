"""LeaderElector against the fake API server, on a virtual clock."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.kubeapi import FakeApiServer
from vgpu.adapters.kube.calls import KubeApi
from vgpu.adapters.leader import LeaderConfig, LeaderConfigError, LeaderElector

NS = "kube-system"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # microsecond == 0: exercises MicroTime formatting


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def wall(self, skew: float = 0.0) -> Any:
        return lambda: EPOCH + timedelta(seconds=self.now + skew)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(kube_client: Any) -> KubeApi:
    return KubeApi(kube_client, request_timeout=5.0)


def elector(kube: KubeApi, clock: FakeClock, identity: str, skew: float = 0.0) -> LeaderElector:
    config = LeaderConfig(NS, "vgpu-extender", identity)
    return LeaderElector(kube, config, clock=clock, wall_clock=clock.wall(skew))


def lease_spec(server: FakeApiServer) -> dict[str, Any]:
    lease = server.store.get("Lease", NS, "vgpu-extender")
    assert lease is not None
    spec: dict[str, Any] = lease["spec"]
    return spec


def test_first_candidate_creates_the_lease(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    a = elector(kube, clock, "a")
    assert a.try_acquire_or_renew() and a.is_leader and a.term == 1
    spec = lease_spec(kube_server)
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
    assert spec["leaseDurationSeconds"] == 15
    assert spec["acquireTime"] == spec["renewTime"] == "2026-01-01T00:00:00.000000Z"


def test_renewal_moves_renew_time_only(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    a = elector(kube, clock, "a")
    a.try_acquire_or_renew()
    clock.advance(2)
    assert a.try_acquire_or_renew() and a.term == 1
    spec = lease_spec(kube_server)
    assert spec["acquireTime"] == "2026-01-01T00:00:00.000000Z"
    assert spec["renewTime"] == "2026-01-01T00:00:02.000000Z"
    assert spec["leaseTransitions"] == 0


def test_takeover_waits_a_full_duration_on_the_candidates_own_clock(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    a = elector(kube, clock, "a", skew=-3600)  # a's wall clock is an hour behind
    b = elector(kube, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and b.holder == "a"
    clock.advance(14)  # a has stopped renewing; b has watched the record for 14 s
    assert not b.try_acquire_or_renew()
    clock.advance(2)
    assert b.try_acquire_or_renew() and b.term == 1
    spec = lease_spec(kube_server)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew()  # a sees the new holder and follows
    assert not a.is_leader and a.holder == "b"


def lease_annotations(server: FakeApiServer) -> dict[str, Any]:
    lease = server.store.get("Lease", NS, "vgpu-extender")
    assert lease is not None
    found: dict[str, Any] = lease["metadata"].get("annotations") or {}
    return found


def test_carried_annotations_reach_the_next_leader(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    assert a.try_acquire_or_renew()
    a.carry("vgpu.io/note", "from a")
    clock.advance(2)
    assert a.try_acquire_or_renew()
    assert lease_annotations(kube_server) == {"vgpu.io/note": "from a"}
    assert not b.try_acquire_or_renew()
    clock.advance(16)  # a died
    assert b.try_acquire_or_renew()
    assert b.annotation("vgpu.io/note") == "from a"
    assert lease_annotations(kube_server) == {"vgpu.io/note": "from a"}
    b.carry("vgpu.io/note", None)
    clock.advance(2)
    assert b.try_acquire_or_renew()
    assert lease_annotations(kube_server) == {}


def test_a_candidate_taking_over_never_writes_notes_of_its_older_term(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    assert a.try_acquire_or_renew()
    a.carry("vgpu.io/note", "a, term 1")
    assert not b.try_acquire_or_renew()
    clock.advance(16)  # a stalls; b takes over and carries its own note
    assert b.try_acquire_or_renew()
    b.carry("vgpu.io/note", "b, term 1")
    clock.advance(2)
    assert b.try_acquire_or_renew()
    assert not a.try_acquire_or_renew()  # a wakes up and follows
    clock.advance(16)  # b died
    assert a.try_acquire_or_renew() and a.term == 2
    assert a.annotation("vgpu.io/note") == "b, term 1"
    clock.advance(2)
    assert a.try_acquire_or_renew()
    assert lease_annotations(kube_server) == {"vgpu.io/note": "b, term 1"}


def test_leader_stops_after_renew_deadline_when_api_fails(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    a = elector(kube, clock, "a")
    a.try_acquire_or_renew()
    kube_server.inject(None, r"/leases/", status=500, times=None)
    clock.advance(5)
    assert a.try_acquire_or_renew()  # still inside the 10 s renew deadline
    clock.advance(6)
    assert not a.try_acquire_or_renew() and not a.is_leader
    kube_server.clear_faults()
    assert a.try_acquire_or_renew() and a.term == 2  # regained: a new term


def test_concurrent_candidates_race_and_exactly_one_wins(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    old = elector(kube, clock, "old")
    old.try_acquire_or_renew()
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    assert not a.try_acquire_or_renew()  # both observe "old" holding the lease
    assert not b.try_acquire_or_renew()
    clock.advance(16)
    kube_server.clear_requests()
    # Hold both writes, so that each candidate has read the same resourceVersion before either
    # write lands (2 s: long enough for both threads to read even on a loaded 2-core machine).
    kube_server.inject("PUT", r"/leases/vgpu-extender", delay=2.0, times=2)
    results: dict[str, bool] = {}

    def attempt(name: str, candidate: LeaderElector) -> None:
        results[name] = candidate.try_acquire_or_renew()

    threads = [threading.Thread(target=attempt, args=pair) for pair in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == [False, True]
    winner = "a" if results["a"] else "b"
    spec = lease_spec(kube_server)
    assert spec["holderIdentity"] == winner and spec["leaseTransitions"] == 1
    assert len([r for r in kube_server.requests if r.method == "PUT"]) == 2


def test_injected_conflict_loses_the_round_only(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    a = elector(kube, clock, "a")
    a.try_acquire_or_renew()
    a.step_down()
    b = elector(kube, clock, "b")
    kube_server.inject("PUT", r"/leases/", status=409, reason="Conflict")
    assert not b.try_acquire_or_renew()
    assert b.try_acquire_or_renew() and b.term == 1


def test_step_down_hands_over_at_once(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer
) -> None:
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.step_down()
    assert not a.is_leader and lease_spec(kube_server)["holderIdentity"] == ""
    assert b.try_acquire_or_renew()  # no need to wait for expiry
    assert lease_spec(kube_server)["leaseTransitions"] == 1


def test_run_reports_leadership_and_releases_on_stop(
    kube: KubeApi, kube_server: FakeApiServer
) -> None:
    config = LeaderConfig(
        NS, "vgpu-extender", "a", lease_duration=2, renew_deadline=1, retry_period=0.02
    )
    stop, started, calls = threading.Event(), threading.Event(), []

    def on_started(term: int) -> None:
        calls.append(f"started {term}")
        started.set()

    thread = threading.Thread(
        target=LeaderElector(kube, config).run,
        args=(stop,),
        kwargs={
            "on_started_leading": on_started,
            "on_stopped_leading": lambda: calls.append("stopped"),
        },
    )
    thread.start()
    assert started.wait(5)
    stop.set()
    thread.join(5)
    assert calls == ["started 1", "stopped"]
    assert lease_spec(kube_server)["holderIdentity"] == ""


@pytest.mark.parametrize(
    "kwargs",
    [{"identity": ""}, {"renew_deadline": 20.0}, {"retry_period": 12.0}, {"retry_period": 0.0}],
    ids=["no-identity", "deadline-past-duration", "retry-past-deadline", "zero-retry"],
)
def test_bad_config_is_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(LeaderConfigError, match="leader election"):
        LeaderConfig(**{"namespace": NS, "name": "l", "identity": "a", **kwargs})


def test_leadership_changes_are_logged_once_each(
    kube: KubeApi, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """At INFO: who leads, who follows, who stops leading; one line per change, not per tick."""
    import logging

    caplog.set_level(logging.INFO, logger="vgpu.adapters.leader")
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    for _ in range(3):
        assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
        clock.advance(2)
    a.step_down()
    clock.advance(2)
    assert b.try_acquire_or_renew()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert said == [
        f"leader election: a leads {NS}/vgpu-extender (term 1)",
        f"leader election: a leads {NS}/vgpu-extender; b follows",
        "leader election: a stops leading: stepped down",
        f"leader election: b leads {NS}/vgpu-extender (term 1)",
    ]


def test_an_unreachable_lease_is_warned_once_per_outage(
    kube: KubeApi, clock: FakeClock, kube_server: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    a = elector(kube, clock, "a")
    a.try_acquire_or_renew()
    caplog.set_level(logging.INFO, logger="vgpu.adapters.leader")
    kube_server.inject(None, r"/leases/", status=500, times=None)
    for _ in range(4):
        clock.advance(2)
        a.try_acquire_or_renew()
    kube_server.clear_faults()
    clock.advance(2)
    assert a.try_acquire_or_renew()
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert [level for level, _ in said] == [logging.WARNING, logging.INFO], said
    assert said[0][1].startswith(f"leader election: lease {NS}/vgpu-extender (will retry): reading")
    assert said[1][1].endswith("works again after 4 failure(s)")
