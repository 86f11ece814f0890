"""Where a waiting pod or gang could go: the pod page asks the scheduling core
(`vgpu.core.gang.plan`) on the cluster the snapshot shows, with bound pods' holdings charged and
only Ready nodes offered; a gang goes whole or the page gives the core's reason."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.inspect.builders import node, pod
from tests.web.test_pages import STATUS, Elements
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.web.detail import pod_page
from vgpu.inspect.web.view import build_view
from vgpu.inspect.web.where import where_now

A100 = ("A100-SXM4-80GB", 81920)


def gang_pod(key: str, cores: int, size: int) -> dict[str, object]:
    obj = pod(key, asks={"main": (cores, 0)}, phase="Pending",
              annotations={"vgpu.io/gang-name": "train", "vgpu.io/gang-size": str(size)})  # fmt: skip
    return obj


def _page(snapshot: Snapshot, name: str) -> str:
    return pod_page(build_view(snapshot, None, DEFAULT_NAMES), name, STATUS) or ""


def could_go_rows(page: str) -> list[str]:
    """The "could go" table's rows, each its cells' text joined by |."""
    start = page.index('class="could-go"')
    rows = page[start : page.index("</table>", start)].split("<tr>")[2:]
    return ["|".join(Elements(r).text) for r in rows]


def test_a_waiting_pod_is_shown_on_the_only_gpu_with_room() -> None:
    pods = (
        pod("a/full", node="n1", shares={"main": [(0, 100, 8192)]}),
        pod("a/part", node="n1", shares={"main": [(1, 70, 8192)]}),
        pod("b/w", asks={"main": (30, 0)}, phase="Pending"),
    )
    page = _page(Snapshot((node("n1", [A100] * 2),), pods), "b/w")
    assert "Where it could go now" in page
    assert could_go_rows(page)[0].startswith("b/w|n1|GPU 1 (A100-SXM4-80GB)|main|30|")


def test_a_gang_goes_whole_one_member_per_free_gpu() -> None:
    pods = tuple(gang_pod(f"ml/w{i}", 100, 2) for i in range(2))
    page = _page(Snapshot((node("n1", [A100] * 2),), pods), "ml/w0")
    rows = could_go_rows(page)
    assert len(rows) == 2 and {r.split("|")[0] for r in rows} == {"ml/w0", "ml/w1"}
    assert {r.split("|")[2] for r in rows} == {"GPU 0 (A100-SXM4-80GB)", "GPU 1 (A100-SXM4-80GB)"}


def test_a_gang_that_does_not_fit_whole_gives_the_cores_reason() -> None:
    pods = (*(gang_pod(f"ml/w{i}", 100, 3) for i in range(3)),
            pod("a/x", node="n1", shares={"main": [(0, 100, 8192)]}))  # fmt: skip
    page = _page(Snapshot((node("n1", [A100] * 3),), pods), "ml/w2")
    why = "".join(Elements(page[page.index('<p id="could-go"') :]).text)
    assert why.startswith("Nowhere now: gang ml/train: only 2 of 3 members fit; ml/w")
    assert "fits nowhere after them (1 node(s) gpu-busy)" in why


def test_a_not_ready_node_is_never_offered() -> None:
    nodes = (node("down", [A100], ready=False), node("up", [A100]))
    pods = (pod("a/x", node="up", shares={"main": [(0, 100, 8192)]}),
            pod("b/w", asks={"main": (50, 0)}, phase="Pending"))  # fmt: skip
    page = _page(Snapshot(nodes, pods), "b/w")
    assert "Nowhere now:" in page and "could-go" in page and 'class="could-go"' not in page


def test_a_bound_pod_has_no_could_go_section() -> None:
    pods = (pod("a/x", node="n1", shares={"main": [(0, 50, 8192)]}),)
    assert "Where it could go now" not in _page(Snapshot((node("n1", [A100]),), pods), "a/x")


@settings(max_examples=40, deadline=None)
@given(held=st.lists(st.integers(0, 100), min_size=1, max_size=4), ask=st.integers(1, 100))
def test_the_place_found_has_the_room_the_report_counts_and_one_is_found_when_any_has(
    held: list[int], ask: int
) -> None:
    """Cross-check of the two readings of one snapshot: the core's plan and the report's
    free cores per GPU agree on where a one-GPU ask fits."""
    pods = [pod(f"a/h{i}", node="n1", shares={"main": [(i, c, 1024)]})
            for i, c in enumerate(held) if c]  # fmt: skip
    pods.append(pod("b/w", asks={"main": (ask, 0)}, phase="Pending"))
    snapshot = Snapshot((node("n1", [A100] * len(held)),), tuple(pods))
    view = build_view(snapshot, None, DEFAULT_NAMES)
    free = {g.uuid: g.cores_total - g.cores_used for g in view.report.nodes[0].gpus}
    where = where_now(snapshot, DEFAULT_NAMES, "b/w", ["n1"])
    assert where is not None
    if max(free.values()) < ask:
        assert where.reason and not where.assignments
        return
    assert not where.reason
    (share,) = [s for a in where.assignments for c in a.containers for s in c.shares]
    assert share.cores == ask and free[share.uuid] >= ask


def test_a_views_placer_answers_every_question_as_a_fresh_one_would() -> None:
    """The state is built once per view and kept: each plan must leave it as it was."""
    pods = (*(gang_pod(f"ml/w{i}", 100, 2) for i in range(2)),
            pod("b/w", asks={"main": (60, 0)}, phase="Pending"),
            pod("a/x", node="n1", shares={"main": [(0, 50, 8192)]}))  # fmt: skip
    snapshot = Snapshot((node("n1", [A100] * 3),), pods)
    placer = build_view(snapshot, None, DEFAULT_NAMES).placer
    assert placer is not None
    asked = ["ml/w0", "b/w", "ml/w1", "b/w", "ml/w0"]
    assert [placer.where(p) for p in asked] == [
        where_now(snapshot, DEFAULT_NAMES, p, ["n1"]) for p in asked
    ]
