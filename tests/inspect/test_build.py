"""Report building: what counts as used, pending, unhealthy, a problem; gang states."""

from __future__ import annotations

from typing import Any

import pytest

from tests.inspect.builders import node, pod
from vgpu.inspect.build import build_report
from vgpu.inspect.gangs import GangState
from vgpu.inspect.model import Report
from vgpu.inspect.pods import pod_facts
from vgpu.inspect.snapshot import Snapshot

T4 = ("Tesla T4", 15360)


def report(*pods: Any, nodes: tuple[Any, ...] | None = None) -> Report:
    return build_report(Snapshot(nodes or (node("n1", [T4, T4]),), tuple(pods)))


def test_cells_count_admitted_and_pending_shares_pending_only_the_unadmitted() -> None:
    r = report(
        pod("a/run", node="n1", asks={"m": (30, 0)}, shares={"m": [(0, 30, 4608)]}),
        pod(
            "a/wait", node="n1", asks={"m": (20, 0)}, shares={"m": [(0, 20, 3072)]}, phase="Pending"
        ),
    )
    gpu0 = r.nodes[0].gpus[0]
    assert (gpu0.cores_used, gpu0.memory_used_mmib) == (50, 7680 * 1000)
    u = r.nodes[0].usage
    assert (u.pending_pods, u.pending_cores, u.pending_memory_mmib) == (1, 20, 3072 * 1000)
    assert r.totals.cores_percent == pytest.approx(25.0)


def test_finished_pods_hold_nothing() -> None:
    r = report(pod("a/x", node="n1", shares={"m": [(1, 100, 15360)]}, phase="Succeeded"))
    assert r.totals.cores_used == 0 and r.problems == ()


@pytest.mark.parametrize(
    ("value", "admitted"),
    [
        ("true", True),
        ("m", True),
        ('["m"]', True),
        ("other,x", False),
        ("", False),
        ('{"m": true}', True),
        ('{"m": false}', False),  # the report used to count every key as admitted
    ],
)
def test_admitted_annotation_forms(value: str, admitted: bool) -> None:
    p = pod("a/x", node="n1", shares={"m": [(0, 10, 100)]}, phase="Pending", admitted=value)
    assert pod_facts(p).is_admitted("m") is admitted


def test_unhealthy_gpus_are_counted_and_flagged() -> None:
    r = report(nodes=(node("n1", [T4, T4], unhealthy=(1,)),))
    assert [g.healthy for g in r.nodes[0].gpus] == [True, False]
    assert r.totals.unhealthy == 1


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (pod("a/r", node="n1", asks={"m": (20, 0)}), "has no assignment"),
        (pod("a/w", node="n1", shares={"m": [(7, 10, 100)]}), "GPU-n1-07, not on n1"),
        (
            {
                **pod("a/c", node="n1"),
                "metadata": {
                    "name": "c",
                    "namespace": "a",
                    "annotations": {"vgpu.io/assignment": "{"},
                },
            },
            "unreadable assignment",
        ),
    ],
    ids=["unassigned", "unknown-gpu", "garbled"],
)
def test_problems_name_the_pod_and_the_cause(bad: dict[str, object], expected: str) -> None:
    r = report(bad)
    assert len(r.problems) == 1 and expected in r.problems[0].message
    assert r.problems[0].node == "n1"


def test_assignment_for_another_node_or_pod_is_a_problem_not_usage() -> None:
    moved = pod("a/m", node="n1", shares={"m": [(0, 10, 100)]})
    moved["spec"]["nodeName"] = "n2"
    copied = pod("a/c", node="n1", shares={"m": [(0, 10, 100)]})
    copied["metadata"]["uid"] = "someone-else"
    r = report(moved, copied, nodes=(node("n1", [T4]), node("n2", [T4])))
    assert r.totals.cores_used == 0
    assert sorted(p.message.split(" ")[0] for p in r.problems) == ["assignment", "assignment"]
    assert any("uid differs" in p.message for p in r.problems)


def test_nodes_without_inventory_and_bad_inventory() -> None:
    broken = node("bad", [T4])
    broken["metadata"]["annotations"]["vgpu.io/gpu-inventory"] = '{"version": 9}'
    r = report(nodes=(node("n1", [T4]), node("cpu", None), broken))
    assert [n.name for n in r.nodes] == ["n1"]
    assert r.without_vgpu == ("bad", "cpu")
    assert "unsupported 9" in r.problems[0].message


def test_restricting_to_nodes_drops_others_and_reports_unknown_names() -> None:
    r = build_report(
        Snapshot(
            (node("n1", [T4]), node("n2", [T4])),
            (pod("a/u", asks={"m": (10, 0)}, phase="Pending"),),
        ),
        ["n2", "zz"],
    )
    assert [n.name for n in r.nodes] == ["n2"]
    assert [p.subject for p in r.problems] == ["zz"]
    assert r.unscheduled == ()


GANG = {
    "pod-group.scheduling.sigs.k8s.io/name": "g",
    "pod-group.scheduling.sigs.k8s.io/min-available": "2",
}


@pytest.mark.parametrize(
    ("pods", "state"),
    [
        ([("n1", "Running"), ("n1", "Running")], GangState.RUNNING),
        ([("n1", "Running"), ("n1", "Pending")], GangState.BOUND),
        ([("n1", "Pending"), ("", "Pending")], GangState.PARTIAL),
        ([("", "Pending"), ("", "Pending")], GangState.WAITING),
        ([("", "Pending")], GangState.INCOMPLETE),
    ],
    ids=lambda v: v.value if isinstance(v, GangState) else None,
)
def test_gang_states(pods: list[tuple[str, str]], state: GangState) -> None:
    members = [pod(f"a/g{i}", node=n, phase=ph, labels=GANG) for i, (n, ph) in enumerate(pods)]
    (gang,) = report(*members).gangs
    assert (gang.key, gang.min_member, gang.state) == ("a/g", 2, state)


def test_gang_by_vgpu_annotation_and_podgroup_minimum() -> None:
    a = pod(
        "a/x",
        annotations={"vgpu.io/gang-name": "v", "vgpu.io/gang-size": "3"},
        phase="Pending",
    )
    b = pod("a/y", labels={"scheduling.x-k8s.io/pod-group": "pg"}, phase="Pending")
    group = {
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "a"},
        "spec": {"minMember": 4},
    }
    r = build_report(Snapshot((node("n1", [T4]),), (a, b), (group,)))
    assert [(g.key, g.min_member) for g in r.gangs] == [("a/pg", 4), ("a/v", 3)]


def test_devices_reused_from_an_init_container_are_counted_once() -> None:
    """The kubelet hands an init container's devices to the app container: the pod holds 30
    cores, not 60, as the extender charges it (`Assignment.charged`)."""
    shares = {"setup": [(0, 30, 4608)], "main": [(0, 30, 4608)]}
    r = report(
        pod("a/init", node="n1", asks={"main": (30, 0)}, shares=shares, reused=((0, 30, 4608),))
    )
    gpu0 = r.nodes[0].gpus[0]
    assert (gpu0.cores_used, gpu0.memory_used_mmib) == (30, 4608 * 1000)
