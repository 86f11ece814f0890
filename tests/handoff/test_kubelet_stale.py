"""The extender does not place onto devices the kubelet still counts for pods that are gone.

After a restart the kubelet admits the pods of its first update against its device checkpoint,
which may still hold a deleted pod's devices (docs/handshake.md, "Devices the kubelet still counts
after its restart"). The node agent publishes those per GPU as `kubeletStale` in the inventory
annotation; the extender counts them as taken until the agent clears them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.extender.builders import A100, make_node, make_pod
from tests.extender.conftest import Harness
from tests.kubelet_model.pods import container, pod
from tests.kubelet_model.soak import SoakConfig, soak
from tests.kubelet_model.world import World
from tests.waiting import wait_until
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
    state = wait_until(lambda: daemon.cache.node_state("n1"))
    assert state.free_cores == [70, 100]
    # A pod needing all of a GPU goes to the GPU the kubelet will offer in full.
    harness.put(make_pod("whole", cores=100))
    assert wire.bind(harness.pod("whole"), "n1") == ""
    (holding,) = wait_until(lambda: daemon.cache.ledger.holdings())
    assert [s.uuid for c in holding.assignment.containers for s in c.shares] == ["GPU-n1-1"]
    # With that GPU taken, an 80-core pod does not fit until the stale devices go.
    second = harness.shown(make_pod("second", cores=80))
    out = wire.filter(second, ["n1"])
    assert out["NodeNames"] == [], out
    reason = out["FailedNodes"]["n1"]  # says why 70 cores look free with no pod on the rest
    assert "GPU 0: the kubelet still holds 30 cores and 2560 MiB for deleted pods" in reason, out
    harness.put(_node("n1", 0, 0))
    wait_until(lambda: getattr(daemon.cache.node_state("n1"), "free_cores", None) == [100, 0])
    out = wire.filter(second, ["n1"])
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


def one_container(name: str, cores: int) -> dict[str, Any]:
    return pod(name, [container("main", cores)])


@pytest.mark.parametrize("publish", [True, False])
def test_kubelet_model_restart_with_a_deleted_pods_devices(publish: bool) -> None:
    """The kubelet model (tests/kubelet_model) frees lazily and restarts: a pod deleted just
    before the restart still holds 30 cores in the checkpoint; a 100-core pod is bound before
    the restarted kubelet's first update. With `kubeletStale` published the extender waits until
    the agent's release step has the kubelet free them; without it the pod is refused."""
    world = World(nodes=1, gpus=1, seed=1, lazy_release=True, publish_stale=publish)
    (node,) = world.nodes.values()
    holder = world.submit(one_container("holder", 30))
    assert world.schedule(holder)
    assert world.admit_next(node) is not None and world.tally["admitted"] == 1
    world.delete(holder)  # the kubelet has not freed its devices yet
    whole = world.submit(one_container("whole", 100))
    bound = world.schedule(whole)
    assert bound is not publish  # with the devices published as stale, nothing fits
    world.restart_kubelet(node)  # its first update admits `whole` if bound
    if publish:
        world.release(node)  # the agent's List + resend: freed, checkpointed, stale cleared
        assert world.schedule(whole)
        assert world.admit_next(node) is not None
        assert world.tally["admitted"] == 2 and not world.refusals
    else:
        assert world.tally["refused-avoidably"] == 1, world.tally


@pytest.mark.parametrize("publish", [True, False])
def test_a_soak_with_kubelet_restarts_and_lazy_release(publish: bool) -> None:
    """Random pods with kubelets that free deleted pods' devices lazily and restart now and then:
    no avoidable refusal with `kubeletStale` published (and the same soak without it has some,
    so the soak can tell)."""
    cfg = SoakConfig(
        pods=300,
        nodes=2,
        gpus=2,
        seed=5,
        ignore_preferred=0.0,
        kubelet_restart_p=0.0,
        agent_restart_p=0.0,
        lazy_release=True,
        publish_stale=publish,
        kubelet_crash_p=0.05,
        release_p=0.3,
    )
    world, _ = soak(cfg)
    assert world.tally["admitted"] > 80, world.tally
    if publish:
        assert world.tally["refused-avoidably"] == 0, world.refusals[:5]
    else:
        assert world.tally["refused-avoidably"] > 0, world.tally
    assert world.tally["swapped"] == 0, world.swaps[:5]
