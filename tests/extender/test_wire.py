"""Contract tests: requests shaped exactly like kube-scheduler's, over real HTTP."""

from __future__ import annotations

import json

import pytest

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until
from vgpu.adapters import fastjson
from vgpu.extender import wire


def _setup(harness: Harness) -> tuple[object, list[str]]:
    for i in range(3):
        harness.put(make_node(f"n{i}", gpus=2))
    harness.put(make_pod("p", cores=30))
    daemon = harness.start()
    return daemon, ["n0", "n1", "n2"]


def test_filter_result_uses_go_field_names(harness: Harness) -> None:
    daemon, names = _setup(harness)
    wire = harness.wire(daemon)  # type: ignore[arg-type]
    status, body = wire.raw(
        "POST",
        "/scheduler/filter",
        json.dumps({"Pod": harness.pod("p"), "Nodes": None, "NodeNames": names}).encode(),
    )
    assert status == 200
    doc = json.loads(body)
    assert set(doc) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    # --filter-best 1 (the default): the one best node of those named
    assert len(doc["NodeNames"]) == 1 and doc["NodeNames"][0] in names
    assert doc["Nodes"] is None and doc["Error"] == ""


def test_prioritize_is_a_bare_host_score_list_in_range(harness: Harness) -> None:
    daemon, names = _setup(harness)
    wire = harness.wire(daemon)  # type: ignore[arg-type]
    out = wire.post("prioritize", {"Pod": harness.pod("p"), "Nodes": None, "NodeNames": names})
    assert isinstance(out, list) and {h["Host"] for h in out} == set(names)
    assert all(set(h) == {"Host", "Score"} and 0 <= h["Score"] <= 10 for h in out)


def test_requests_without_node_cache_get_nodes_back(harness: Harness) -> None:
    daemon, _ = _setup(harness)
    wire = harness.wire(daemon)  # type: ignore[arg-type]
    nodes = [harness.store.get("Node", None, "n0"), make_node("ghost", gpus=1)]
    doc = wire.post(
        "filter", {"Pod": harness.pod("p"), "Nodes": {"items": nodes}, "NodeNames": None}
    )
    assert doc["NodeNames"] is None
    assert [n["metadata"]["name"] for n in doc["Nodes"]["items"]] == ["n0"]
    assert "ghost" in doc["FailedNodes"]


def test_bind_request_and_result_shape(harness: Harness) -> None:
    daemon, _ = _setup(harness)
    wire = harness.wire(daemon)  # type: ignore[arg-type]
    pod = harness.pod("p")
    body = {
        "PodName": "p",
        "PodNamespace": "default",
        "PodUID": pod["metadata"]["uid"],
        "Node": "n1",
    }
    assert wire.post("bind", body) == {"Error": ""}
    assert harness.pod("p")["spec"]["nodeName"] == "n1"


def test_malformed_requests_get_400_with_a_message(harness: Harness) -> None:
    daemon, _ = _setup(harness)
    wire = harness.wire(daemon)  # type: ignore[arg-type]
    cases = [
        ("filter", b"{not json"),
        ("filter", b"[]"),
        ("filter", json.dumps({"Pod": {"metadata": {"name": "x"}}}).encode()),
        ("prioritize", json.dumps({"Pod": None, "NodeNames": []}).encode()),
        ("bind", json.dumps({"PodName": "p"}).encode()),
    ]
    for verb, body in cases:
        status, text = wire.raw("POST", f"/scheduler/{verb}", body)
        assert status == 400, (verb, body)
        assert text.decode().startswith(verb)
    status, text = wire.raw("POST", "/scheduler/preempt", b"{}")
    assert status == 400 and b"Pod" in text
    status, _ = wire.raw("POST", "/scheduler/reserve", b"{}")
    assert status == 404
    # still serving after all that
    assert wire.filter(harness.pod("p"), ["n0"])["NodeNames"] == ["n0"]


def test_health_ready_and_metrics(harness: Harness) -> None:
    daemon, names = _setup(harness)
    wire = harness.wire(daemon)  # type: ignore[arg-type]
    assert wire.raw("GET", "/healthz")[0] == 200
    assert wire.raw("GET", "/readyz")[0] == 200
    harness.shown(make_pod("huge", cores=200))
    wire.filter(harness.pod("huge"), names)  # 2 GPUs free per node, fits
    wire.filter(harness.shown(make_pod("toobig", cores=800)), names)
    status, text = wire.raw("GET", "/metrics")
    assert status == 200
    metrics = text.decode()
    assert 'vgpu_extender_request_seconds_count{verb="filter"} 2.0' in metrics
    assert 'vgpu_extender_filter_rejections_total{reason="gpu-too-small"} 3.0' in metrics
    assert "vgpu_extender_reservations 0.0" in metrics


@pytest.mark.parametrize("fast", [True, False])
def test_encoders_agree_with_and_without_orjson(
    fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not fast:
        monkeypatch.setattr(fastjson, "_fast_dumps", None)
        monkeypatch.setattr(fastjson, "_fast_loads", None)
    elif fastjson._fast_dumps is None:
        pytest.skip("orjson is not installed")
    odd = ['n"1', "n\\2", "nœud-3", "n4"]
    scores = dict(zip(odd, (0, 10, 7, 3), strict=True))
    assert json.loads(wire.encode_priorities(scores)) == [
        {"Host": h, "Score": s}
        for h, s in scores.items()
        if s  # 0: left out
    ]
    plain = wire.Priorities(list(scores), list(scores.values()))
    assert wire.encode_priorities(plain) == wire.encode_priorities(scores)
    result = wire.FilterResult(passed=odd[:2], failed={"n4": "GPU 0: 20 cores free, 30 asked"})
    assert json.loads(wire.encode_filter(result)) == {
        "Nodes": None,
        "NodeNames": odd[:2],
        "FailedNodes": {"n4": "GPU 0: 20 cores free, 30 asked"},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }
    body = json.dumps({"pod": {"metadata": {"name": "p"}}, "nodeNames": odd, "x": 2**70})
    assert wire.parse_extender_args(body.encode()).node_names == odd  # huge ints: stdlib path


def _args_body(pod: dict[str, object], names: list[str], *, names_first: bool = False) -> bytes:
    """ExtenderArgs as Go writes them: compact, fields in struct order (Pod, Nodes, NodeNames)."""
    doc: dict[str, object] = {"Pod": pod, "Nodes": None, "NodeNames": names}
    if names_first:
        doc = {"NodeNames": names, "Pod": pod, "Nodes": None}
    return json.dumps(doc, separators=(",", ":")).encode()


def test_repeated_node_names_are_reused_not_parsed_again() -> None:
    memo = wire.NamesMemo()
    names = [f"node-{i}" for i in range(50)]
    first = wire.parse_extender_args(_args_body(make_pod("a", cores=10), names), memo)
    second = wire.parse_extender_args(_args_body(make_pod("b", cores=20), names), memo)
    assert second.node_names is first.node_names and second.node_names == names
    assert second.pod["metadata"]["name"] == "b"
    other = wire.parse_extender_args(_args_body(make_pod("c"), names[:-1]), memo)
    assert other.node_names == names[:-1] and other.node_names is not first.node_names


def test_names_memo_never_takes_a_body_it_does_not_fit() -> None:
    memo = wire.NamesMemo()
    names = ["n1", "n2"]
    wire.parse_extender_args(_args_body(make_pod("a"), names), memo)
    # names first (another encoder): no reuse, parsed as a whole
    moved = wire.parse_extender_args(_args_body(make_pod("b"), ["n3"], names_first=True), memo)
    assert moved.node_names == ["n3"] and moved.pod["metadata"]["name"] == "b"
    # a pod whose own annotation is called NodeNames, ending like the remembered member
    tricky = make_pod("c", annotations={"NodeNames": "x"})
    got = wire.parse_extender_args(_args_body(tricky, names), memo)
    assert got.node_names == names and got.pod["metadata"]["annotations"]["NodeNames"] == "x"
    # a body that is not JSON before the names is refused, not half-parsed
    with pytest.raises(wire.BadRequest):
        wire.parse_extender_args(
            b'{"Pod":{"metadata":' + _args_body(make_pod("d"), names)[-40:], memo
        )


def test_prioritize_memo_expects_the_filter_survivors_and_learns_nothing_else() -> None:
    memo = wire.NamesMemo(learn=False)
    survivors = ["n1", "n3"]
    memo.expect(survivors)
    got = wire.parse_extender_args(_args_body(make_pod("a"), ["n1", "n3"]), memo)
    assert got.node_names is survivors and got.pod["metadata"]["name"] == "a"
    other = wire.parse_extender_args(_args_body(make_pod("b"), ["n2"]), memo)
    assert other.node_names == ["n2"]
    again = wire.parse_extender_args(_args_body(make_pod("c"), ["n2"]), memo)
    assert again.node_names is not other.node_names  # not learned from the request


def test_bound_but_not_admitted_containers_are_a_gauge_per_node(harness: Harness) -> None:
    """vgpu_extender_pending_containers: what the dashboard's "pending" panel and the
    VgpuPendingAdmission alert read; it clears when the agent marks the pod admitted."""
    daemon, _ = _setup(harness)
    wire = harness.wire(daemon)  # type: ignore[arg-type]
    pod = harness.pod("p")
    body = {"PodName": "p", "PodNamespace": "default", "PodUID": pod["metadata"]["uid"]}
    assert wire.post("bind", {**body, "Node": "n1"}) == {"Error": ""}
    line = 'vgpu_extender_pending_containers{node="n1"} 1.0'
    wait_until(lambda: line in wire.raw("GET", "/metrics")[1].decode())
    admitted = harness.pod("p")
    admitted["metadata"].setdefault("annotations", {})["vgpu.io/admitted"] = "true"
    harness.put(admitted)
    wait_until(
        lambda: "vgpu_extender_pending_containers{" not in wire.raw("GET", "/metrics")[1].decode()
    )
