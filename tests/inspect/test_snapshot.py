"""The snapshot file: round trip, kubectl List input, trimming, clear errors."""

from __future__ import annotations

import json
import sys

import pytest

from tests.inspect.builders import node, pod
from vgpu.inspect.snapshot import Snapshot, SnapshotError, dumps, loads


def test_round_trip_keeps_what_the_report_needs() -> None:
    p = pod("a/x", node="n1", asks={"m": (30, 16)}, shares={"m": [(0, 30, 4096)]})
    p["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": "secret"}]
    p["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    original = Snapshot((node("n1", [("Tesla T4", 15360)], ip="10.0.0.1"),), (p,), (), "now")
    text = dumps(original)
    assert "secret" not in text and "last-applied" not in text and "image" not in text
    back = loads(text)
    assert back.taken_at == "now"
    assert back.pods[0]["metadata"]["annotations"] == {
        k: v for k, v in p["metadata"]["annotations"].items() if k.startswith("vgpu.io/")
    }
    assert (
        back.pods[0]["spec"]["containers"][0]["resources"]
        == p["spec"]["containers"][0]["resources"]
    )
    assert back.nodes[0]["status"]["addresses"][0]["address"] == "10.0.0.1"
    assert loads(dumps(original, as_json=True)) == back


def test_kubectl_list_is_accepted() -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [node("n1", None), pod("a/x")]}
    snap = loads(json.dumps(doc))
    assert (len(snap.nodes), len(snap.pods), snap.taken_at) == (1, 1, "")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes: [", "not valid YAML"),
        ("- 1", "expected a mapping"),
        ("kind: Pod", "kind: expected 'ClusterSnapshot'"),
        ("kind: ClusterSnapshot\nnodes: 3", "snap.nodes: expected a list"),
        (
            "kind: ClusterSnapshot\npods: [{name: x}]",
            "snap.pods[0]: expected an object with metadata",
        ),
    ],
)
def test_bad_files_name_the_field(text: str, message: str) -> None:
    with pytest.raises(SnapshotError, match=message.replace("[", r"\[").replace("]", r"\]")):
        loads(text, source="snap")


def test_json_snapshots_are_read_without_pyyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON goes through json.loads (PyYAML's pure-Python loader took 42 s on 1,000 nodes)."""
    from tests.inspect.scenario import demo_cluster

    text = dumps(demo_cluster(), as_json=True)
    monkeypatch.setitem(sys.modules, "yaml", None)  # any `import yaml` now fails
    assert len(loads(text).nodes) == 4


def test_a_saved_snapshot_keeps_the_queue_gate_so_held_pods_stay_held() -> None:
    held = pod("qb/b0", asks={"main": (50, 0)}, labels={"vgpu.io/queue": "qb"}, phase="Pending")
    held["spec"]["schedulingGates"] = [{"name": "vgpu.io/queue"}]
    saved = loads(dumps(Snapshot((), (held,)), as_json=True), source="saved.json")
    assert saved.pods[0]["spec"]["schedulingGates"] == [{"name": "vgpu.io/queue"}]
