"""Each change that can alter a filter answer without changing capacity (admission, a pending
pod that is not counted going away) refreshes a repeated request's patched reply; and the
filter treats pods assumed by a bind in flight as pending, as bind does (invariant I)."""

from __future__ import annotations

from tests.extender.builders import make_node
from tests.extender.test_incremental_answers import SHAPES, Obj, World, pod_obj
from vgpu.core.fit import Verdict
from vgpu.core.ids import PodKey
from vgpu.extender.wire import ExtenderArgs


def _two_gpu_world() -> tuple[World, Obj, list[str]]:
    """n1 (2 GPUs) where a 25-core pod is pending admission on GPU 0 and a 75-core pod fills
    the rest of that GPU: another 25-core pod would be confusable on GPU 1 and cannot join
    GPU 0, so n1 fails (invariant I) until the pending pod is admitted; n0 (1 GPU) is full."""
    world = World(None)
    world.nodes["n1"] = make_node("n1", gpus=2, memory_mib=16384, cpu="64")
    world.nodes["n0"] = make_node("n0", gpus=1, memory_mib=16384, cpu="64")
    for obj in world.nodes.values():
        world.cache.apply_node("ADDED", obj)
    full = world.new_pod(SHAPES.index(((100,), None, "3")))
    world.bind(full, "n0", world.placed(full, "n0"), "true")
    probe = pod_obj("probe", (25,), None, "1", {})
    world.cache.apply_pod("ADDED", probe)  # the watch shows the pod a request names
    return world, probe, ["n0", "n1"]


def _fill_gpu0(world: World, pending: Obj) -> None:
    a = world.placed(pending, "n1")
    assert a is not None and {s.uuid for s in a.shares} == {"GPU-n1-0"}
    filler = pod_obj("filler", (75,), None, "1", {})
    world.pods["filler"] = filler
    world.cache.apply_pod("ADDED", filler)
    b = world.placed(filler, "n1")
    assert b is not None and {s.uuid for s in b.shares} == {"GPU-n1-0"}
    world.bind(filler, "n1", b, "true")


def test_admission_alone_refreshes_a_repeated_filter_reply() -> None:
    world, probe, names = _two_gpu_world()
    pending = world.new_pod(0)
    world.bind(pending, "n1", world.placed(pending, "n1"), None)
    _fill_gpu0(world, pending)
    first = world.ext.filter(ExtenderArgs(probe, list(names)))
    assert first.passed == [] and "waiting for admission" in first.failed["n1"]
    world.admit(pending["metadata"]["name"], "true")  # no capacity changes, only pending
    assert world.ext.filter(ExtenderArgs(probe, list(names))).passed == ["n1"]


def test_an_assumption_observed_bound_then_admitted_refreshes_a_repeated_reply() -> None:
    world, probe, names = _two_gpu_world()
    pending = world.new_pod(0)
    world.assume(pending, "n1")
    name = pending["metadata"]["name"]
    world.bind(world.pods[name], "n1", world.assumed.pop(name), None)  # bound, not admitted
    _fill_gpu0(world, pending)
    first = world.ext.filter(ExtenderArgs(probe, list(names)))
    assert first.passed == [] and "waiting for admission" in first.failed["n1"]
    world.admit(name, "c0")
    assert world.ext.filter(ExtenderArgs(probe, list(names))).passed == ["n1"]


def test_the_filter_counts_assumed_pods_for_invariant_i_as_bind_does() -> None:
    """A pod assumed by a bind in flight, not yet seen bound by the watch, is pending on its
    node (`ClusterCache.pending_on`): bind refuses a confusable placement next to it, so the
    filter must not pass the node either."""
    world, probe, names = _two_gpu_world()
    pending = world.new_pod(0)
    world.assume(pending, "n1")
    _fill_gpu0(world, pending)
    spec = world.cache.parse(probe)
    bind_says = world.ext.cache.place(spec, "n1", world.ext.policies.default, world.ext.scheduler)
    assert isinstance(bind_says, Verdict) and "waiting for admission" in str(bind_says)
    got = world.ext.filter(ExtenderArgs(probe, list(names)))
    assert got.passed == [] and "waiting for admission" in got.failed["n1"]


def test_prioritize_gives_no_score_where_the_pod_would_wait_for_admission() -> None:
    """kube-scheduler may have filtered before the other pod's bind arrived: prioritize then
    gives the node 0, not the top score binpacking would give a fuller node."""
    world, probe, names = _two_gpu_world()
    before = world.ext.prioritize(ExtenderArgs(probe, list(names))).as_dict()
    assert before["n1"] > 0
    pending = world.new_pod(0)
    world.assume(pending, "n1")
    _fill_gpu0(world, pending)
    assert world.ext.prioritize(ExtenderArgs(probe, list(names))).as_dict()["n1"] == 0


def test_deleting_an_uncounted_pending_pod_refreshes_a_repeated_filter_reply() -> None:
    """A pod bound by someone else whose signed assignment does not fit what this extender
    holds is not counted, but its pending containers still constrain the node."""
    world, probe, names = _two_gpu_world()
    other = world.new_pod(0)
    a = world.placed(other, "n1")
    assert a is not None and {s.uuid for s in a.shares} == {"GPU-n1-0"}
    whole = pod_obj("whole", (100,), None, "1", {"vgpu.io/gpu-uuid": "GPU-n1-0"})
    world.pods["whole"] = whole
    world.cache.apply_pod("ADDED", whole)
    world.assume(whole, "n1")
    world.bind(other, "n1", a, None)
    assert PodKey(f"default/{other['metadata']['name']}") in world.cache.unheld
    first = world.ext.filter(ExtenderArgs(probe, list(names)))
    assert first.passed == [] and "waiting for admission" in first.failed["n1"]
    world.drop_pod(other["metadata"]["name"], finished=False)
    assert world.ext.filter(ExtenderArgs(probe, list(names))).passed == ["n1"]
