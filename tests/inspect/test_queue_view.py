"""One queue view: a held pod's reason is the leader's own (its latest VgpuQueued Event), the
configuration shown is the one in force (the leader's last good one while the ConfigMap is
refused), the report says whether any leader runs queues, units are spelled out, and the text
and -o json say the same."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.inspect.builders import node, pod
from tests.inspect.test_queues import A100, _config, _queued
from vgpu.api.queues.in_force import IN_FORCE_ANNOTATION, encode_in_force
from vgpu.inspect.build import build_report
from vgpu.inspect.details import render_details
from vgpu.inspect.queues import (
    NO_LEADER,
    REFUSED_NONE_IN_FORCE,
    as_dict,
    queue_report,
    render_queues,
)
from vgpu.inspect.snapshot import Snapshot, dumps, loads

GOOD = _config({"name": "qa", "weight": 2})
BAD = _config({"name": "qa", "weight": 0})


def _lease(holder: str, record: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "vgpu-extender", "namespace": "vgpu-system"}
    if record is not None:
        meta["annotations"] = {IN_FORCE_ANNOTATION: record}
    spec = {
        "holderIdentity": holder,
        "renewTime": "2026-01-01T00:00:00Z",
        "leaseDurationSeconds": 15,
    }
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


def _event(pod_key: str, message: str, when: str, uid: str = "") -> dict[str, Any]:
    namespace, name = pod_key.split("/")
    ref = {"kind": "Pod", "namespace": namespace, "name": name} | ({"uid": uid} if uid else {})
    return {"kind": "Event", "reason": "VgpuQueued", "message": message,
            "lastTimestamp": when, "involvedObject": ref}  # fmt: skip


def _cluster(*pods: Any, lease: dict[str, Any] | None, events: Any = ()) -> Snapshot:
    return Snapshot(
        (node("n1", [A100] * 2),), tuple(pods), events=tuple(events),
        extender_lease=lease, lease_read=True,
    )  # fmt: skip


def test_a_held_pod_shows_the_leaders_latest_reason_in_text_json_and_details() -> None:
    held = _queued("qa/p", "qa", 50, held=True)
    events = [
        _event("qa/p", "no node has 50 cores free on one GPU", "2026-01-01T00:00:05Z"),
        _event("qa/p", "an older word", "2026-01-01T00:00:01Z"),
        _event("qa/p", "about a pod of that name before", "2026-01-01T00:00:09Z", uid="other"),
    ]
    snap = _cluster(held, lease=_lease("ext-0", encode_in_force("ext-0", GOOD)), events=events)
    report = queue_report(snap, GOOD)
    (line,) = report.held
    assert (line.why, line.source) == ("no node has 50 cores free on one GPU", "leader")
    assert "leader: no node has 50 cores free on one GPU" in render_queues(report)
    assert as_dict(report)["held"][0]["why"] == line.why
    details = render_details(build_report(snap, ()))
    assert "held by queue qa: leader: no node has 50 cores free on one GPU" in details
    assert "scheduling gates" not in details


def test_a_refused_configmap_shows_the_leaders_configuration_in_force() -> None:
    snap = _cluster(
        _queued("qa/p", "qa", 50, held=True),
        lease=_lease("ext-0", encode_in_force("ext-0", GOOD)),
    )
    report = queue_report(snap, BAD)
    assert report.in_force == "leader" and report.problem.startswith("queues[0].weight")
    assert [(q.name, q.weight) for q in report.queues] == [("qa", 2)]
    assert "not configured" not in report.held[0].why
    text = render_queues(report)
    assert "refused: queues[0].weight" in text and "the leader's last good configuration" in text


def test_a_refused_configmap_with_nothing_known_in_force_says_so_for_each_held_pod() -> None:
    held = _queued("qa/p", "qa", 50, held=True)
    unread = dataclasses.replace(_cluster(held, lease=None), lease_read=False)
    report = queue_report(unread, BAD)  # the Lease unread: who runs queues is unknown
    assert report.in_force == "none" and report.queues == ()
    assert report.held[0].why == REFUSED_NONE_IN_FORCE
    assert "In force: not known" in render_queues(report)


def test_without_the_leaders_record_held_pods_are_said_to_wait_for_no_one() -> None:
    held = _queued("qa/p", "qa", 50, held=True)
    for lease in (_lease("ext-0", None), _lease("ext-1", encode_in_force("ext-0", GOOD)), None):
        report = queue_report(_cluster(held, lease=lease), GOOD)
        assert report.leader == "" and report.held[0].why == NO_LEADER
        assert render_queues(report).startswith("Queues: no extender leader runs queues")
    running = queue_report(
        _cluster(held, lease=_lease("ext-0", encode_in_force("ext-0", GOOD))), GOOD
    )
    assert render_queues(running).startswith("Queues: run by the extender's leader ext-0")


def test_units_are_spelled_out_and_text_and_json_give_the_same_numbers() -> None:
    snap = _cluster(
        _queued("qa/r", "qa", 50, held=False, blocks=40, node="n1"),
        _queued("qa/p", "qa", 100, held=True),
        lease=_lease("ext-0", encode_in_force("ext-0", GOOD)),
    )
    report = queue_report(snap, GOOD)
    text, doc = render_queues(report), as_dict(report)
    assert "c/" not in text and "a memory unit is 256 MiB" in text
    assert doc["memoryUnitMiB"] == 256 and doc["leader"] == "ext-0"
    rows = {tuple(r.split()[-4:]) for r in text.splitlines()}
    for q in doc["queues"]:
        for dim, unit in (("cores", "cores"), ("memory", "units")):
            figures = tuple(str(q[k][dim]) for k in ("deserved", "allocated", "pending"))
            assert (unit, *figures) in rows, (dim, figures, text)
    held = doc["held"][0]["asks"]  # a whole GPU: all its memory
    assert f"{held['cores']} cores, {held['memory']} memory units" in text and held["memory"] == 320


def test_a_saved_snapshot_keeps_the_queue_gate_and_the_leaders_record() -> None:
    held = _queued("qa/p", "qa", 50, held=True)
    snap = _cluster(held, lease=_lease("ext-0", encode_in_force("ext-0", GOOD)),
                    events=[_event("qa/p", "waits", "2026-01-01T00:00:05Z")])  # fmt: skip
    again = loads(dumps(snap, as_json=True))
    assert as_dict(queue_report(again, BAD)) == as_dict(queue_report(snap, BAD))
    assert json.loads(dumps(again, as_json=True))["pods"][0]["spec"]["schedulingGates"]


def test_a_pod_without_the_gate_is_not_held() -> None:
    report = queue_report(_cluster(pod("qa/x", asks={"main": (50, 0)}), lease=None), GOOD)
    assert report.held == ()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["qa", "qb", "qc"]),
            st.sampled_from([10, 50, 100, 200]),
            st.booleans(),
            st.integers(0, 40),
        ),
        max_size=8,
    ),
    st.lists(st.integers(1, 4), min_size=2, max_size=2),
)
def test_text_and_json_say_the_same_for_any_queues_and_pods(
    asks: list[tuple[str, int, bool, int]], weights: list[int]
) -> None:
    """Every figure of -o json is in the text's row for its queue and dimension, and every
    held pod's reason is in the text, whatever the pods and weights."""
    config = _config(
        *({"name": q, "weight": w} for q, w in zip(("qa", "qb"), weights, strict=True))
    )
    made = [
        _queued(f"{q}/p{i}", q, cores, held=held, blocks=blocks if cores < 100 else 0,
                **({} if held else {"node": "n1"}))
        for i, (q, cores, held, blocks) in enumerate(asks)
    ]  # fmt: skip
    report = queue_report(_cluster(*made, lease=_lease("e", encode_in_force("e", config))), config)
    text, doc = render_queues(report), as_dict(report)
    rows = [line.split() for line in text.splitlines()]
    for q in doc["queues"]:
        (start,) = [i for i, r in enumerate(rows) if r[:2] == [q["name"], str(q["weight"])]]
        cores, memory = rows[start][-3:], rows[start + 1][-3:]
        for i, key in enumerate(("deserved", "allocated", "pending")):
            assert (cores[i], memory[i]) == (str(q[key]["cores"]), str(q[key]["memory"]))
        assert rows[start][2] == f"{q['share']:.2f}"
    for h in doc["held"]:
        assert h["why"] in text and h["pod"] in text
