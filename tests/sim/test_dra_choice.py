"""The DRA allocator's device choice as `vgpu simulate --device-choice` models it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.cli.main import main
from vgpu.core.ids import NodeName
from vgpu.core.ledger import Ledger
from vgpu.core.placement import assignment_for
from vgpu.core.state import ClusterState
from vgpu.sim.dra import _fullest_first, _static, chooser, first_fit


def _state_with(*taken: tuple[int, int]) -> ClusterState:
    """One 4-GPU node where GPU `pos` already has `cores` taken."""
    state = ClusterState([make_node("n1", gpus=4)])
    ledger = Ledger(state)
    for i, (pos, cores) in enumerate(taken):
        ns = state.node(NodeName("n1"))
        ledger.confirm(assignment_for(ns, make_pod(f"old{i}", cores), ((pos,),)))
    return state


def test_static_order_takes_the_first_gpu_with_room_not_the_fullest() -> None:
    state = _state_with((2, 80))  # GPU 2 has 20 free: best fit for a 20-core share
    ns = state.node(NodeName("n1"))
    assert first_fit(ns, make_pod("p", 20), _static) == ((0,),)
    assert first_fit(ns, make_pod("p", 20), _fullest_first) == ((2,),)


def test_first_fit_skips_gpus_without_room_and_whole_asks_take_idle_gpus() -> None:
    state = _state_with((0, 90), (1, 50))
    ns = state.node(NodeName("n1"))
    assert first_fit(ns, make_pod("p", 60), _static) == ((2,),)
    assert first_fit(ns, make_pod("p", 200), _static) == ((2, 3),)
    assert first_fit(ns, make_pod("p", 300), _static) is None
    assert ns.free_cores == [10, 50, 100, 100]  # the trial leaves the node as it was


def test_extender_choice_is_no_chooser_and_greedy_failure_falls_back() -> None:
    assert chooser("extender") is None
    with pytest.raises(ValueError, match="unknown device choice"):
        chooser("dra-magic")
    state = _state_with((0, 50))
    ns = state.node(NodeName("n1"))
    pick = chooser("dra")
    assert pick is not None
    # Containers of 50 and 100 cores, GPU 0 with 50 free and 1-3 idle: greedy first fit works.
    assert pick(ns, make_pod("p", 50, 100), ((9,), (9,))) == ((0,), (1,))
    # GPU 0 with 60 free, GPU 1 with 50, the rest full: greedy puts the 50 on GPU 0 and finds no
    # room for the 60; the real allocator backtracks, the model lets the policy's choice stand.
    tight = _state_with((0, 40), (1, 50), (2, 100), (3, 100)).node(NodeName("n1"))
    assert first_fit(tight, make_pod("p", 50, 60), _static) is None
    assert pick(tight, make_pod("p", 50, 60), ((1,), (0,))) == ((1,), (0,))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 100)), max_size=8),
    st.sampled_from([5, 20, 50, 99, 100, 200]),
    st.sampled_from(["dra", "dra-sorted"]),
)
def test_first_fit_choice_always_fits(taken: list[tuple[int, int]], ask: int, who: str) -> None:
    state = ClusterState([make_node("n1", gpus=4)])
    ledger = Ledger(state)
    ns = state.node(NodeName("n1"))
    for i, (pos, cores) in enumerate(taken):
        if ns.free_cores[pos] >= cores:
            ledger.confirm(assignment_for(ns, make_pod(f"old{i}", cores), ((pos,),)))
    order = _static if who == "dra" else _fullest_first
    before = (list(ns.free_cores), list(ns.free_mem))
    choice = first_fit(ns, make_pod("p", ask), order)
    assert (list(ns.free_cores), list(ns.free_mem)) == before  # the trial gives everything back
    need = 1 if ask < 100 else ask // 100
    room = [p for p in range(4) if ns.free_cores[p] >= ask or ns.free_cores[p] == 100]
    assert (choice is None) == (len(room) < need), (choice, ns.free_cores)
    gpus = choice[0] if choice is not None else ()
    for pos in gpus:
        assert ns.free_cores[pos] >= min(ask, 100)
        if ask >= 100:
            assert ns.free_cores[pos] == 100
    if who == "dra-sorted" and ask < 100 and gpus:
        fitting = [p for p in range(4) if ns.free_cores[p] >= ask]
        assert ns.free_cores[gpus[0]] == min(ns.free_cores[p] for p in fitting)


def test_cli_compares_device_choices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vgpu.cli.trace_files import embedded
    from vgpu.sim.trace import DEFAULT_NODES, DEFAULT_PODS

    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text("".join(embedded(DEFAULT_NODES).read_text().splitlines(True)[:41]))
    pods.write_text("".join(embedded(DEFAULT_PODS).read_text().splitlines(True)[:301]))
    argv = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "default"]
    argv += ["--device-choice", "extender", "--device-choice", "dra", "--jobs", "1", "--json"]
    assert main([*argv, "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)["policies"]
    assert set(out) == {"default", "default/dra"}
    assert main(["simulate", "--variant", "gangs", "--device-choice", "dra", "--quiet"]) == 2
    assert "--device-choice" in capsys.readouterr().err
