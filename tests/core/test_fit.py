import dataclasses

from tests.builders import make_node, make_pod
from vgpu.core.fit import Code, check
from vgpu.core.ids import NodeName
from vgpu.core.ledger import Ledger
from vgpu.core.model import GpuSelector
from vgpu.core.placement import assignment_for, choose
from vgpu.core.state import ClusterState


def _state(**kw: object) -> tuple[ClusterState, Ledger]:
    state = ClusterState([make_node("n1", **kw)])  # type: ignore[arg-type]
    return state, Ledger(state)


def _take(state: ClusterState, ledger: Ledger, name: str, *cores: int) -> None:
    ns = state.node(NodeName("n1"))
    pod = make_pod(name, *cores)
    choice = choose(ns, pod)
    assert choice is not None
    ledger.assume(assignment_for(ns, pod, choice))


def test_best_gpu_reported_with_its_free_cores() -> None:
    state, ledger = _state(gpus=2)
    _take(state, ledger, "a", 80)
    _take(state, ledger, "b", 90)
    verdict = check(state.node(NodeName("n1")), make_pod("c", 30))
    assert verdict.code is Code.GPU_BUSY and verdict.resolvable
    assert "no GPU with 30 cores and 4.8 GiB free; best: GPU 0 with 20 cores" in str(verdict)


def test_whole_gpus_need_idle_gpus() -> None:
    state, ledger = _state(gpus=2)
    _take(state, ledger, "a", 10)
    ns = state.node(NodeName("n1"))
    assert check(ns, make_pod("w", 100)).ok
    verdict = check(ns, make_pod("w2", 200))
    assert not verdict.ok and verdict.resolvable
    assert "2 whole GPU(s) asked, 1 idle" in str(verdict)


def test_whole_gpu_is_exclusive() -> None:
    state, ledger = _state(gpus=1)
    _take(state, ledger, "w", 100)
    assert not check(state.node(NodeName("n1")), make_pod("tiny", 1)).ok


def test_unresolvable_failures() -> None:
    state, _ = _state(gpus=2, model="Tesla T4")
    ns = state.node(NodeName("n1"))
    wrong_type = check(ns, make_pod("a", 10, selector=GpuSelector(include_models=("A100", "H100"))))
    assert wrong_type.code is Code.GPU_TYPE and not wrong_type.resolvable
    assert "A100|H100" in str(wrong_type) and "Tesla T4" in str(wrong_type)
    too_many = check(ns, make_pod("b", 400))
    assert too_many.code is Code.GPU_TOO_SMALL and not too_many.resolvable
    too_big = check(ns, make_pod("c", 10, memory_mib=20_000))
    assert too_big.code is Code.GPU_TOO_SMALL and not too_big.resolvable


def test_unhealthy_gpus_are_not_used() -> None:
    state, _ = _state(gpus=2, unhealthy=(0,))
    ns = state.node(NodeName("n1"))
    assert choose(ns, make_pod("a", 50)) == ((1,),)
    verdict = check(ns, make_pod("b", 200))
    assert verdict.code is Code.GPU_UNHEALTHY
    assert "GPU 0 unhealthy" in str(verdict)


def test_cpu_and_memory_fit_like_kube_scheduler() -> None:
    state, _ = _state(gpus=1, cpu=2000, mem=4000)
    ns = state.node(NodeName("n1"))
    assert check(ns, make_pod("a", 10, cpu=3000)).code is Code.INSUFFICIENT_CPU
    assert check(ns, make_pod("b", 10, mem=5000)).code is Code.INSUFFICIENT_MEMORY
    assert check(ns, make_pod("c", cpu=2000)).ok


def test_memory_axis_blocks_a_gpu_with_free_cores() -> None:
    state, ledger = _state(gpus=1, memory_mib=16384)
    ns = state.node(NodeName("n1"))
    pod = make_pod("a", 10, memory_mib=15000)
    ledger.assume(assignment_for(ns, pod, ((0,),)))
    verdict = check(ns, make_pod("b", 10, memory_mib=2000))
    assert not verdict.ok
    assert "90 cores" in str(verdict)


def _stale_node(cores: int, mib: int) -> ClusterState:
    """One GPU whose kubelet still counts `cores`/`mib` for deleted pods."""
    node = make_node("n1", gpus=1)
    gpu = dataclasses.replace(node.gpus[0], stale_cores=cores, stale_memory_mib=mib)
    return ClusterState([dataclasses.replace(node, gpus=(gpu,))])


def test_capacity_the_kubelet_holds_for_deleted_pods_is_named() -> None:
    """Otherwise an operator sees "70 cores" free and no pod using the other 30."""
    ns = _stale_node(30, 2560).node(NodeName("n1"))
    verdict = check(ns, make_pod("big", 80))
    assert verdict.code is Code.GPU_BUSY and verdict.resolvable
    assert "best: GPU 0 with 70 cores" in str(verdict)
    assert "GPU 0: the kubelet still holds 30 cores and 2560 MiB for deleted pods" in str(verdict)
    whole = check(ns, make_pod("whole", 100))
    assert "1 whole GPU(s) asked, 0 idle" in str(whole)
    assert "the kubelet still holds 30 cores and 2560 MiB" in str(whole)


def test_no_word_of_the_kubelet_when_it_holds_nothing() -> None:
    state, ledger = _state(gpus=1)
    _take(state, ledger, "a", 80)
    assert "kubelet" not in str(check(state.node(NodeName("n1")), make_pod("b", 30)))
