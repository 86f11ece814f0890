"""`kubectl inspect vgpu --queues`: per queue weight, deserved, allocated, pending and
share from the ConfigMap and the pods, with the extender's own functions; held pods and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.inspect.builders import node, pod
from vgpu.inspect.cli import main
from vgpu.inspect.queues import LEADER_DECIDES, queue_report, render_queues
from vgpu.inspect.snapshot import Snapshot

GATE = [{"name": "vgpu.io/queue"}]
A100 = ("A100-SXM4-80GB", 81920)  # 320 memory units of 256 MiB
GANG = {"pod-group.scheduling.sigs.k8s.io/name": "trio",
        "pod-group.scheduling.sigs.k8s.io/min-available": "3"}  # fmt: skip


def _queued(key: str, queue: str, cores: int, *, held: bool, blocks: int = 0, **kw: Any) -> Any:
    labels = {"vgpu.io/queue": queue, **kw.pop("labels", {})}
    obj = pod(key, asks={"main": (cores, blocks)}, labels=labels, phase="Pending", **kw)
    if held:
        obj["spec"]["schedulingGates"] = list(GATE)
    return obj


def _config(*queues: dict[str, Any]) -> str:
    """The queues, each bound to the namespace of its own name."""
    return json.dumps({"queues": [{**q, "namespaces": [q["name"]]} for q in queues]})


def _cluster(*pods: Any) -> Snapshot:
    return Snapshot((node("n1", [A100] * 4),), tuple(pods))


def test_each_queue_shows_weight_deserved_allocated_pending_and_share() -> None:
    snapshot = _cluster(
        _queued("t/a1", "qa", 50, held=False, blocks=40, node="n1"),
        _queued("t/a2", "qa", 100, held=False, node="n1"),  # a whole GPU: all its 320 units
        *(_queued(f"t/b{i}", "qb", 50, held=True, blocks=10) for i in range(8)),
        _queued("t/b8", "qb", 25, held=True),  # cores only: a quarter of the GPU's memory
        pod("t/plain", asks={"main": (100, 0)}),  # no queue: not counted
    )
    report = queue_report(snapshot, _config({"name": "qa"}, {"name": "qb", "weight": 3}))
    assert report.capacity == (400, 1280)
    qa, qb = report.queues
    # water-filling of 400 cores, weights 1:3, qa asking 150 and qb 425: 100 and 300; memory
    # (1,280 units) covers both asks: qa's 40 + 320, qb's 80 + 80 (a quarter of 320)
    assert (qa.weight, qa.deserved, qa.allocated, qa.pending) == (1, (100, 360), (150, 360), (0, 0))
    assert (qb.weight, qb.deserved, qb.allocated, qb.pending) == (3, (300, 160), (0, 0), (425, 160))
    assert float(qa.share) == 1.5 and float(qb.share) == 0.0
    assert [h.pod for h in report.held] == [f"t/b{i}" for i in range(9)]
    assert report.held[-1].ask == (25, 80)
    table = render_queues(report)
    assert "QUEUE" in table and "qb      3        0.00    cores          300        0" in table


def test_a_bound_pod_counts_the_memory_it_holds_on_its_own_gpu() -> None:
    """Half of a 16 GiB GPU is 32 units: a pod bound there counts those, as the leader counts
    its holding; a held one counts what the largest GPU (80 GiB) would give it."""
    t4 = ("Tesla-T4", 16384)
    snapshot = Snapshot(
        (node("n1", [A100]), node("n2", [t4])),
        (
            _queued("qa/run", "qa", 50, held=False, node="n2", shares={"main": [(0, 50, 8192)]}),
            _queued("qa/wait", "qa", 50, held=True),
        ),
    )
    (qa,) = queue_report(snapshot, _config({"name": "qa"})).queues
    assert (qa.allocated, qa.pending) == ((50, 32), (50, 160))


def test_held_pods_say_why_they_wait() -> None:
    snapshot = _cluster(
        _queued("t/g0", "qa", 100, held=True, labels=GANG),
        _queued("t/g1", "qa", 100, held=True, labels=GANG),
        _queued("t/lost", "nowhere", 10, held=True),
        _queued("t/capped", "qc", 300, held=True),
        _queued("t/next", "qb", 10, held=True),
    )
    config = _config({"name": "qa"}, {"name": "qb"}, {"name": "qc", "cap": {"cores": 200}})
    why = {h.pod: h.why for h in queue_report(snapshot, config).held}
    assert why == {
        "t/g0": "gang t/trio: 2 of 3 members exist",
        "t/g1": "gang t/trio: 2 of 3 members exist",
        "t/lost": "queue nowhere is not configured",
        "t/capped": "queue qc is at its cap of 200 cores",
        "t/next": LEADER_DECIDES,
    }


def test_a_malformed_configuration_is_one_line_naming_the_field() -> None:
    report = queue_report(_cluster(), _config({"name": "qa", "weight": 0}))
    assert report.queues == ()
    assert report.problem.startswith("queues[0].weight: 0 must be a whole number")
    assert "The ConfigMap's queue configuration is refused: queues[0]" in render_queues(report)


@pytest.mark.parametrize("output", ["table", "json"])
def test_the_command_line_reports_queues_from_a_saved_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    saved = {"apiVersion": "vgpu.io/v1alpha1", "kind": "ClusterSnapshot",
             "nodes": [node("n1", [A100])], "pods": [_queued("t/p", "qa", 50, held=True)]}  # fmt: skip
    (tmp_path / "c.json").write_text(json.dumps(saved))
    (tmp_path / "q.json").write_text(_config({"name": "qa", "weight": 2}))
    argv = ["--fake-cluster", str(tmp_path / "c.json"), "--queues"]
    assert main([*argv, "--queues-file", str(tmp_path / "q.json"), "-o", output]) == 0
    out = capsys.readouterr().out
    if output == "json":
        doc = json.loads(out)
        assert doc["queues"][0]["weight"] == 2
        assert doc["queues"][0]["pending"] == {"cores": 50, "memory": 160}  # half of 320
        assert doc["held"][0]["pod"] == "t/p"
    else:
        assert "qa      2        0.00" in out and "t/p" in out
