"""`kubectl inspect vgpu` with DRA-mode nodes beside device-plugin nodes."""

from __future__ import annotations

from typing import Any

from tests.inspect.scenario import demo_cluster
from vgpu.adapters.fakegpu import parse_spec
from vgpu.dra.slices import build_slice
from vgpu.inspect.build import build_report
from vgpu.inspect.export import report_document
from vgpu.inspect.snapshot import Snapshot, dumps, loads
from vgpu.inspect.table import render_table

INV = parse_spec("2xA100-SXM4-80GB", seed="dra-1")


def claim(name: str, device: str, pod: str | None, **consumed: str) -> dict[str, Any]:
    status: dict[str, Any] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "vgpu.io",
                        "pool": "dra-1",
                        "device": device,
                        **({"consumedCapacity": consumed} if consumed else {}),
                    }
                ]
            }
        }
    }
    if pod:
        status["reservedFor"] = [{"resource": "pods", "name": pod, "uid": "u"}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "status": status,
    }


def snapshot() -> Snapshot:
    base = demo_cluster()
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "dra-1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    claims = (
        claim("infer", "gpu-0", "infer-0", cores="30", memory="8Gi"),
        claim("train", "gpu-1", "train-0"),  # a whole GPU: no consumed capacity recorded
        claim("later", "gpu-0", None, cores="20", memory="4Gi"),
    )
    return Snapshot(
        (*base.nodes, node),
        base.pods,
        base.pod_groups,
        base.taken_at,
        (build_slice("dra-1", INV, memory_unit_mib=256),),
        claims,
    )


def test_dra_node_shows_its_gpus_and_claims_beside_device_plugin_nodes() -> None:
    report = build_report(snapshot())
    modes = {n.name: n.mode for n in report.nodes}
    assert modes["dra-1"] == "dra" and modes["gpu-a"] == ""
    dra = next(n for n in report.nodes if n.name == "dra-1")
    gpu0, gpu1 = dra.gpus
    assert [(h.pod, h.container, h.cores, h.admitted) for h in gpu0.holders] == [
        ("ml/-", "claim/later", 20, False),
        ("ml/infer-0", "claim/infer", 30, True),
    ]
    assert gpu0.memory_used_mmib == (8192 + 4096) * 1000
    assert gpu1.cores_used == 100 and gpu1.memory_used_mmib == INV.gpus[1].memory_mib * 1000
    assert dra.usage.pending_cores == 20
    assert "dra-1 [dra]" in render_table(report)
    exported = {n["name"]: n for n in report_document(report)["nodes"]}
    assert exported["dra-1"]["mode"] == "dra" and "mode" not in exported["gpu-a"]


def test_snapshot_round_trip_keeps_slices_and_claims() -> None:
    original = snapshot()
    again = loads(dumps(original))
    assert len(again.resource_slices) == 1 and len(again.resource_claims) == 3
    assert build_report(again) == build_report(original)
