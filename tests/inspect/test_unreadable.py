"""`kubectl inspect vgpu` reports an unreadable object as a problem of its
own; the rest of the cluster is still shown (one such value once made the report exit 1)."""

from __future__ import annotations

from tests.inspect.builders import node, pod
from vgpu.api.admitted import ADMITTED
from vgpu.inspect.build import build_report
from vgpu.inspect.snapshot import Snapshot

T4 = ("Tesla T4", 15360)
HUGE = "9" * 4301
INVENTORY = "vgpu.io/gpu-inventory"


def _poisoned_node(name: str) -> dict[str, object]:
    bad = node(name, [T4])
    annotations = bad["metadata"]["annotations"]
    annotations[INVENTORY] = annotations[INVENTORY].replace('"index":0', f'"index":{HUGE}')
    return bad


def test_an_unreadable_inventory_is_a_problem_and_the_other_nodes_are_shown() -> None:
    snapshot = Snapshot((node("n1", [T4]), _poisoned_node("n2")), ())
    report = build_report(snapshot)
    assert [n.name for n in report.nodes] == ["n1"]
    (problem,) = report.problems
    assert problem.subject == "n2" and "unreadable GPU inventory" in problem.message
    assert len(problem.message) < 400


def test_an_unreadable_admitted_value_is_a_problem_and_the_pod_still_counts() -> None:
    held = pod("a/held", node="n1", asks={"m": (100, 0)}, shares={"m": [(0, 100, 15360)]})
    held["metadata"]["annotations"][ADMITTED] = HUGE
    held["status"] = {"phase": "Running"}
    report = build_report(Snapshot((node("n1", [T4]),), (held,)))
    assert report.nodes[0].gpus[0].cores_used == 100
    assert any(ADMITTED in p.message and p.subject == "a/held" for p in report.problems)


def test_a_pod_of_the_wrong_shape_is_a_problem_of_its_own() -> None:
    odd = pod("a/odd", node="n1")
    odd["status"] = {"containerStatuses": ["not an object"]}
    fine = pod("a/fine", node="n1", asks={"m": (30, 0)}, shares={"m": [(0, 30, 1024)]})
    report = build_report(Snapshot((node("n1", [T4]),), (odd, fine)))
    assert report.nodes[0].gpus[0].cores_used == 30
    assert any(p.subject == "pod odd" for p in report.problems)
