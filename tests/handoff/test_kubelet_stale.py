"""The extender does not place onto devices the kubelet still counts for pods that are gone.

After a restart the kubelet admits the pods of its first update against its device checkpoint,
which may still hold a deleted pod's devices (docs/handshake.md, "Devices the kubelet still counts
after its restart"). The node agent publishes those per GPU as `kubeletStale` in the inventory
annotation; the extender counts them as taken until the agent clears them.
"""

from __future__ import annotations

from typing import Any

from tests.extender.builders import A100, eventually, make_node, make_pod
from tests.extender.conftest import Harness
from vgpu.api.inventory import InventoryGpu, NodeGpuInventory, encode_inventory
from vgpu.inspect.build import build_report
from vgpu.inspect.snapshot import Snapshot


def _node(name: str, stale_cores: int, stale_mib: int) -> dict[str, Any]:
    gpus = (
        InventoryGpu(f"GPU-{name}-0", 0, A100, 81920, 100, True, 0, (), stale_cores, stale_mib),
        InventoryGpu(f"GPU-{name}-1", 1, A100, 81920, 100, True, 0, ()),
    )
    return make_node(name, inventory=encode_inventory(NodeGpuInventory(256, gpus)))


def test_stale_devices_are_not_offered_until_the_agent_clears_them(harness: Harness) -> None:
    harness.put(_node("n1", 30, 2560))
    daemon = harness.start()
    wire = harness.wire(daemon)
    state = eventually(lambda: daemon.cache.node_state("n1"))
    assert state.free_cores == [70, 100]
    # A pod needing all of a GPU goes to the GPU the kubelet will offer in full.
    harness.put(make_pod("whole", cores=100))
    assert wire.bind(harness.pod("whole"), "n1") == ""
    (holding,) = eventually(lambda: daemon.cache.ledger.holdings())
    assert [s.uuid for c in holding.assignment.containers for s in c.shares] == ["GPU-n1-1"]
    # With that GPU taken, an 80-core pod does not fit until the stale devices go.
    out = wire.filter(make_pod("second", cores=80), ["n1"])
    assert out["NodeNames"] == [], out
    harness.put(_node("n1", 0, 0))
    eventually(lambda: getattr(daemon.cache.node_state("n1"), "free_cores", None) == [100, 0])
    out = wire.filter(make_pod("second", cores=80), ["n1"])
    assert out["NodeNames"] == ["n1"], out


def test_the_report_shows_stale_devices_as_taken() -> None:
    """`kubectl inspect vgpu` counts them as used, held by "(kubelet)"."""
    node = _node("n1", 30, 2560)
    node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    report = build_report(Snapshot((node,), ()))
    (view,) = report.nodes
    gpu0, gpu1 = view.gpus
    assert [(h.pod, h.cores, h.memory_mmib) for h in gpu0.holders] == [
        ("(kubelet)", 30, 2560 * 1000)
    ]
    assert gpu0.cores_used == 30 and gpu1.holders == ()
    assert report.totals.cores_used == 30
