"""`kubectl inspect vgpu` says where the driver holds memory: a tag on the node's row, a line in
the details, a field in the exported document, from the agent's node label."""

from __future__ import annotations

from tests.inspect.builders import node
from vgpu.inspect.build import build_report
from vgpu.inspect.details import render_details
from vgpu.inspect.export import report_document
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.table import render_table

T4 = ("Tesla T4", 15360)


def labelled(name: str, backend: str) -> dict[str, object]:
    obj = node(name, [T4])
    obj["metadata"]["labels"]["vgpu.io/gpu.memory-backend"] = backend
    return obj


def test_the_memory_backend_shows_per_node() -> None:
    nodes = (labelled("hard", "driver"), labelled("soft", "vgpu-core"), node("old", [T4]))
    report = build_report(Snapshot(nodes, ()))
    assert {n.name: n.memory_backend for n in report.nodes} == {
        "hard": "driver",
        "soft": "vgpu-core",
        "old": "",
    }
    table = render_table(report, width=200)
    assert "hard [driver memory]" in table and "soft [" not in table
    details = render_details(report)
    assert "NODE hard" in details and "memory held by: driver" in details
    assert "memory held by: vgpu-core" in details
    exported = {n["name"]: n for n in report_document(report)["nodes"]}
    assert exported["hard"]["memoryBackend"] == "driver" and "memoryBackend" not in exported["old"]
