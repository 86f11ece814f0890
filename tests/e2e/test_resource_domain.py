"""End to end with a non-default resource domain: agents, extender and report configured alike.

The node agents advertise `gpu.example.com/cores` and `/memory` and write
`gpu.example.com/gpu-inventory`; the extender and `kubectl inspect vgpu`, given the same
`--resource-domain`, must schedule and report exactly as with `vgpu.io`. Before the names were
built in one place, the extender read only `vgpu.io/...` and every pod was refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import ClusterFactory
from tests.e2e.driver import make_pod, run
from vgpu.api.resources import ResourceNames
from vgpu.inspect.build import build_report
from vgpu.inspect.cli import main as inspect_main
from vgpu.inspect.snapshot import Snapshot, dumps

NAMES = ResourceNames("gpu.example.com")
NODES = {"node-a": "2xT4"}


def test_a_pod_asking_the_configured_domain_is_placed_admitted_and_reported(
    make_cluster: ClusterFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, driver = make_cluster(NODES, NAMES)
    node = cluster.api.store.get("Node", "", "node-a")
    assert node is not None
    annotations = node["metadata"]["annotations"]
    assert NAMES.inventory in annotations and ResourceNames().inventory not in annotations
    cluster.put(make_pod("p", containers=[("main", 50, 8)], names=NAMES))

    outcome = run(cluster, driver, ["p"])

    assert outcome.unplaced == {} and outcome.admissions["p"].refusal == ""
    assert outcome.admissions["p"].envs["main"]["VGPU_CORES"] == "50"
    assert cluster.admitted("p") == ["main"]
    snapshot = Snapshot((node,), (cluster.pod("p"),))
    report = build_report(snapshot, names=NAMES)
    assert report.totals.cores_used == 50 and report.problems == ()
    assert build_report(snapshot).without_vgpu == ("node-a",)  # the default domain sees none

    saved = tmp_path / "cluster.json"
    saved.write_text(dumps(snapshot, as_json=True, names=NAMES))
    argv = ["--fake-cluster", str(saved), "-o", "json", "--resource-domain", NAMES.domain]
    assert inspect_main(argv) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["coresUsed"] == 50
