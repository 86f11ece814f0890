"""`kubectl inspect vgpu` says where the driver holds memory: a tag on the node's row, a line in
the details, a field in the exported document, from the agent's node label (or, on a DRA node,
from its ResourceSlice)."""

from __future__ import annotations

from tests.inspect.builders import node
from vgpu.adapters.fakegpu import parse_spec
from vgpu.dra.slices import build_slice
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


def test_a_dra_node_shows_the_memory_backend_its_slice_names() -> None:
    """A DRA node has no agent label: its slice's devices say what holds memory there."""
    dra_node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dra-1"}}
    nodes = (dra_node, {**dra_node, "metadata": {"name": "dra-2"}})
    slices = (
        build_slice(
            "dra-1", parse_spec("2xT4", seed="a"), memory_unit_mib=256, memory_backend="driver"
        ),
        build_slice(
            "dra-2", parse_spec("1xT4", seed="b"), memory_unit_mib=256, memory_backend="plain"
        ),
    )
    report = build_report(Snapshot(nodes, (), resource_slices=slices))
    assert {n.name: n.memory_backend for n in report.nodes} == {"dra-1": "driver", "dra-2": "plain"}
    assert "dra-1 (NotReady) [dra] [driver memory]" in render_table(report, width=200)
