"""A gang is decided whole, once: the leader records each gang it decides on its
Lease before removing a gate, and a gang half released is finished from that record only, never
inferred from a released member. Reusing a released gang's name or annotating a held pod into it
releases nothing; a gang cut short by a failover is finished exactly as recorded."""

from __future__ import annotations

import json

import pytest

from tests.extender.builders import make_node
from tests.extender.conftest import Harness
from tests.extender.lease_stub import Lease
from tests.extender.test_queue_release import (
    _daemon,
    _gated,
    _held,
    _queues,
    _releaser,
    _watched,
)
from tests.extender.test_strict_handoff import T0, _leader, _released
from vgpu.daemons.extender.daemon import ExtenderDaemon
from vgpu.extender.gangs.record import GANGS_ANNOTATION, decode, encode

GANG = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "1"}
PAIR = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}


def _release_gate(harness: Harness, name: str) -> None:
    pod = harness.pod(name)
    pod["spec"]["schedulingGates"] = []
    harness.put(pod)


def _gang_of_two(harness: Harness) -> ExtenderDaemon:
    """Queue `a` on four GPUs, and gang `g` of two whole-GPU members, held."""
    harness.put(make_node("n1", gpus=4))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    for i in range(2):
        _held(harness, f"g{i}", "a", 100, annotations=dict(PAIR))
    return daemon


def _uid(harness: Harness, name: str) -> str:
    return str(harness.pod(name)["metadata"]["uid"])


def test_reusing_a_released_gangs_name_releases_nothing_past_the_cap(harness: Harness) -> None:
    """The attack: a gang of one was released; three more 100-core pods name the same gang."""
    harness.put(make_node("n1", gpus=4))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a", "cap": {"cores": 100}})
    _held(harness, "g0", "a", 100, annotations=dict(GANG))
    _release_gate(harness, "g0")
    for i in range(3):
        _held(harness, f"x{i}", "a", 100, annotations=dict(GANG))
    _watched(daemon, "g0", "x0", "x1", "x2")
    releaser = _leader(daemon, Lease(), T0)
    assert _released(releaser) == []
    assert "no record of a decision" in releaser.last.waiting["default/x0"]


def test_a_held_pod_annotated_into_a_released_gang_stays_held(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=4))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    _held(harness, "g0", "a", 100, annotations=dict(GANG))
    _watched(daemon, "g0")
    lease = Lease()
    releaser = _leader(daemon, lease, T0)
    assert _released(releaser) == ["g0"]
    _held(harness, "big", "a", 400)  # cannot fit beside g0: held
    _watched(daemon, "big")
    assert _released(releaser) == []
    big = harness.pod("big")
    big["metadata"]["annotations"].update(GANG)
    harness.put(big)
    assert _released(releaser) == []
    assert _released(_leader(daemon, lease, T0 + 5)) == []  # nor by the next leader


def test_a_gang_cut_short_is_finished_from_the_lease_record_exactly(harness: Harness) -> None:
    daemon = _gang_of_two(harness)
    _held(harness, "late", "a", 100, annotations=dict(PAIR))  # not in the decision
    lease = Lease()
    lease.carry(
        GANGS_ANNOTATION, encode({"default/g": frozenset(_uid(harness, n) for n in ("g0", "g1"))})
    )
    _release_gate(harness, "g0")  # the old leader removed g0's gate and died
    _watched(daemon, "g0", "g1", "late")
    assert _released(_leader(daemon, lease, T0)) == ["g1"]
    assert _released(_leader(daemon, lease, T0 + 5)) == []
    assert GANGS_ANNOTATION not in lease.annotations  # finished: the record is dropped


def test_a_gangs_gates_wait_until_the_lease_records_its_decision(harness: Harness) -> None:
    """The elector writes a carried note with its next renewal; until then no gate is removed,
    so a leader dying in between leaves the gang whole and held, never half released."""

    class Slow(Lease):
        def __init__(self) -> None:
            super().__init__()
            self.unwritten: dict[str, str | None] = {}

        def carry(self, key: str, value: str | None) -> None:
            self.unwritten[key] = value

        def renew(self) -> None:
            for key, value in self.unwritten.items():
                super().carry(key, value)

    daemon = _gang_of_two(harness)
    _watched(daemon, "g0", "g1")
    lease = Slow()
    releaser = _leader(daemon, lease, T0)
    _released(releaser)
    assert _gated(harness, "g0") and _gated(harness, "g1")
    lease.renew()
    assert sorted(_released(releaser)) == ["g0", "g1"]
    assert not _gated(harness, "g0") and not _gated(harness, "g1")
    assert json.loads(lease.annotations[GANGS_ANNOTATION]) == {
        "default/g": sorted(_uid(harness, n) for n in ("g0", "g1"))
    }


def test_without_a_lease_a_decided_gang_is_released_in_one_pass(harness: Harness) -> None:
    daemon = _gang_of_two(harness)
    _watched(daemon, "g0", "g1")
    releaser = _releaser(daemon)
    releaser.index.replace_all(releaser.api.list_pods().items)
    assert sorted(q.pod.key for q in releaser.pass_once().release) == ["default/g0", "default/g1"]


@pytest.mark.parametrize(
    ("text", "record"),
    [
        (None, {}),
        ("not json", {}),
        ("[1]", {}),
        ('{"ns/g": ["u1", "u2"], "ns/h": "u3", "ns/i": [1]}', {"ns/g": frozenset({"u1", "u2"})}),
    ],
)
def test_a_record_that_cannot_be_read_releases_nothing_of_its_gangs(
    text: str | None, record: dict[str, frozenset[str]]
) -> None:
    assert decode(text) == record


def test_the_record_round_trips_and_none_removes_the_annotation() -> None:
    assert encode({}) is None
    assert decode(encode({"ns/g": frozenset({"b", "a"})})) == {"ns/g": frozenset({"a", "b"})}


def test_a_gang_with_a_cpu_only_member_is_released_whole(harness: Harness) -> None:
    """A TFJob's parameter server asks no vGPU: it is still a member, held and released with
    the others, and the gang waits for it."""
    harness.put(make_node("n1", gpus=4))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "3"}
    for i in range(2):
        _held(harness, f"w{i}", "a", 100, annotations=dict(gang))
    _watched(daemon, "w0", "w1")
    releaser = _leader(daemon, Lease(), T0)
    assert _released(releaser) == []
    assert releaser.last.waiting["default/w0"] == "gang default/g: 2 of 3 members exist"
    _held(harness, "ps", "a", 0, annotations=dict(gang))
    _watched(daemon, "ps")
    assert sorted(_released(releaser)) == ["ps", "w0", "w1"]
    assert not any(_gated(harness, n) for n in ("ps", "w0", "w1"))
