"""On call, "why is this pod pending?": each unscheduled pod shows the scheduler's or the
extender's last word on it, pods that can never fit are problems, and the report says whether
the extender is up (all such pods once read "waiting for a node", with Problems empty, and
the report looked healthy with the extender down)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.inspect.builders import node, pod
from vgpu.api.nodefit import NO_NODE_ADMITS
from vgpu.inspect.build import build_report
from vgpu.inspect.cli import render
from vgpu.inspect.model import Report
from vgpu.inspect.snapshot import Snapshot, dumps, loads

T4 = ("Tesla T4", 15360)
A100 = ("NVIDIA A100-SXM4-80GB", 81920)
NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
FULL = "0/2 nodes are available: 2 node(s) didn't fit: vgpu gpu-busy."
Obj = dict[str, Any]


def pending(key: str, cores: int = 100, blocks: int = 0, **kw: Any) -> Obj:
    return pod(key, asks={"main": (cores, blocks)}, phase="Pending", **kw)


def scheduled_false(obj: Obj, message: str, at: str = "2025-01-01T11:00:00Z") -> Obj:
    obj["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": at,
        }
    ]
    return obj


def invalid_event(key: str, message: str, at: str = "2025-01-01T11:30:00Z") -> Obj:
    namespace, name = key.split("/")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": name},
        "reason": "InvalidPod",
        "type": "Warning",
        "message": message,
        "lastTimestamp": at,
    }


def report(*pods: Obj, events: tuple[Obj, ...] = (), **kw: Any) -> Report:
    nodes = (node("n1", [T4, T4]), node("n2", [T4]))
    return build_report(Snapshot(nodes, pods, events=events, **kw), now=NOW)


def problems(r: Report) -> dict[str, str]:
    return {p.subject: p.message for p in r.problems}


def test_an_unscheduled_pod_shows_the_schedulers_last_message() -> None:
    r = report(scheduled_false(pending("a/p"), FULL))
    (u,) = r.unscheduled
    assert u.reason == FULL
    assert problems(r) == {}  # it could fit once the cluster has room: not a problem
    assert f"why: {FULL}" in render(r, details=True)


def test_a_pod_the_extender_refuses_as_invalid_is_a_problem_with_its_reason() -> None:
    refused = "vgpu extender cannot schedule this pod: gang size is not a number"
    r = report(
        scheduled_false(pending("a/p"), FULL),
        events=(invalid_event("a/p", refused), invalid_event("a/other", "not this pod")),
    )
    assert r.unscheduled[0].reason == refused
    assert problems(r) == {"a/p": f"the extender refuses it: {refused}"}


def test_the_newest_word_wins() -> None:
    old = invalid_event("a/p", "old refusal", at="2025-01-01T10:00:00Z")
    r = report(scheduled_false(pending("a/p"), FULL, at="2025-01-01T11:00:00Z"), events=(old,))
    assert r.unscheduled[0].reason == FULL and problems(r) == {}


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        (pending("a/big", cores=300), "asks 3 whole GPUs; the largest node has 2"),
        (pending("a/h100", annotations={"vgpu.io/gpu-type": "H100"}), "which no node has"),
        (pending("a/odd", cores=150), "invalid asks"),
        (pending("a/mem", cores=50, blocks=100), "more GPU memory than the largest GPU"),
        (pending("a/whole-mem", cores=100, blocks=4), "invalid asks"),
    ],
)
def test_a_pod_that_can_never_fit_is_a_problem(obj: Obj, needle: str) -> None:
    r = report(obj)
    (message,) = problems(r).values()
    assert message.startswith("can never be scheduled: ") and needle in message
    assert len(r.unscheduled) == 1


@pytest.mark.parametrize(
    "obj",
    [
        pending("a/two", cores=200),
        pending("a/frac", cores=30, blocks=10),
        pending("a/t4", annotations={"vgpu.io/gpu-type": "T4"}),
        pending("a/not-a100", annotations={"vgpu.io/gpu-type-exclude": "A100"}),
    ],
)
def test_a_pod_that_fits_some_node_is_not_a_problem(obj: Obj) -> None:
    assert problems(report(obj)) == {}


def test_gpu_type_matching_is_by_whole_words_as_the_extender_does() -> None:
    """ "A10" is not an A100 (`vgpu.core.model.model_matches`)."""
    nodes = (node("n1", [A100]),)
    obj = pending("a/a10", annotations={"vgpu.io/gpu-type": "A10"})
    r = build_report(Snapshot(nodes, (obj,)), now=NOW)
    assert "which no node has (models: NVIDIA A100-SXM4-80GB)" in problems(r)["a/a10"]


def test_memory_that_comes_with_the_cores_is_auto_not_zero() -> None:
    r = report(pending("a/p", cores=30), pending("a/q", cores=30, blocks=8))
    assert [u.memory for u in r.unscheduled] == ["auto", "8"]
    text = render(r, details=True)
    assert re.search(r"a/p\s+30\s+auto\s", text) and re.search(r"a/q\s+30\s+8\s", text)


def lease(renewed: str, holder: str = "vgpu-extender-7c9f") -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "vgpu-extender", "namespace": "vgpu-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renewed},
    }


def test_a_freshly_renewed_lease_shows_the_extender_up() -> None:
    r = report(extender_lease=lease("2025-01-01T11:59:57.000000Z"), lease_read=True)
    assert r.extender is not None and r.extender.up
    assert "Extender: up, leader vgpu-extender-7c9f (renewed 3s ago" in render(r)
    assert problems(r) == {}


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"extender_lease": lease("2025-01-01T11:50:00.000000Z")}, "DOWN: not renewed within"),
        ({"extender_lease": None}, "no Lease vgpu-system/vgpu-extender"),
        ({"extender_lease": lease("2025-01-01T11:59:59Z", holder="")}, "has no holder"),
    ],
)
def test_an_extender_that_is_not_up_is_a_problem(kw: dict[str, Any], needle: str) -> None:
    r = report(lease_read=True, **kw)
    assert r.extender is not None and not r.extender.up
    assert needle in problems(r)["extender"]
    assert needle in render(r)


def test_a_snapshot_without_the_lease_says_nothing_of_the_extender() -> None:
    """An older snapshot, or a reader not allowed to get Leases: unknown, not down."""
    r = report()
    assert r.extender is None and "Extender" not in render(r)


def test_a_saved_snapshot_keeps_reasons_events_and_the_lease() -> None:
    obj = scheduled_false(pending("a/p"), FULL)
    obj["spec"]["containers"][0]["env"] = [{"name": "SECRET", "value": "x"}]
    snap = Snapshot(
        (node("n1", [T4]),),
        (obj,),
        taken_at="2025-01-01T12:00:00Z",
        events=(invalid_event("a/p", "refused") | {"source": {"host": "h"}},),
        extender_lease=lease("2025-01-01T11:59:57.000000Z"),
        lease_read=True,
    )
    for as_json in (True, False):
        again = loads(dumps(snap, as_json=as_json))
        assert build_report(again) == build_report(snap)
        assert "SECRET" not in dumps(snap, as_json=as_json)
        assert "source" not in again.events[0]


def on(obj: Obj, **spec: Any) -> Obj:
    obj["spec"].update(spec)
    return obj


def test_a_pod_no_node_admits_is_a_problem_that_says_so() -> None:
    """Its nodeSelector, required node affinity or tolerations rule out every node
    (`vgpu.api.nodefit`): kube-scheduler never schedules it, however empty the GPUs are."""
    r = report(on(pending("a/p"), nodeSelector={"pool": "h100"}))
    assert problems(r) == {"a/p": f"can never be scheduled: {NO_NODE_ADMITS}"}


def test_a_pod_too_large_for_every_node_it_may_use_can_never_fit() -> None:
    """n1 has the two GPUs it asks, but its nodeSelector allows n2 alone, which has one."""
    r = report(on(pending("a/p", cores=200), nodeSelector={"kubernetes.io/hostname": "n2"}))
    assert problems(r) == {
        "a/p": "can never be scheduled: container main asks 2 whole GPUs; the largest node has 1 "
        "it may use"
    }


def test_a_pod_that_tolerates_the_tainted_node_it_needs_is_not_a_problem() -> None:
    taint = {"key": "gpu", "value": "big", "effect": "NoSchedule"}
    nodes = (on_node(node("n1", [T4, T4]), taints=[taint]), node("n2", [T4]))
    big = pending("a/p", cores=200)
    assert "a/p" in problems(build_report(Snapshot(nodes, (big,)), now=NOW))
    tolerant = on(pending("a/q", cores=200), tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert problems(build_report(Snapshot(nodes, (tolerant,)), now=NOW)) == {}


def on_node(obj: Obj, **spec: Any) -> Obj:
    obj["spec"] = spec
    return obj


def test_a_saved_snapshot_keeps_what_decides_which_nodes_a_pod_may_use() -> None:
    """Trimmed on save, a snapshot once lost the pods' nodeSelector, affinity and tolerations
    and the nodes' taints and cordon: rendered from the file, the report told another story."""
    taint = {"key": "gpu", "value": "big", "effect": "NoSchedule"}
    nodes = (
        on_node(node("n1", [T4, T4]), taints=[taint]),
        on_node(node("n2", [T4]), unschedulable=True),
    )
    hosts = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]}
    required = {"nodeSelectorTerms": [{"matchExpressions": [hosts]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    pods = (
        on(pending("a/big", cores=200)),
        on(pending("a/sel"), nodeSelector={"pool": "h100"}),
        on(
            pending("a/ok", cores=200),
            affinity=affinity,
            tolerations=[{"key": "gpu", "operator": "Exists"}],
        ),
    )
    snap = Snapshot(nodes, pods)
    live = problems(build_report(snap, now=NOW))
    assert set(live) == {"a/big", "a/sel"}
    assert problems(build_report(loads(dumps(snap)), now=NOW)) == live
