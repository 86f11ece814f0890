"""Synthetic trace variants (two-axis, gangs) and the gang replay modes."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.builders import make_node, make_pod
from vgpu.cli.main import main
from vgpu.cli.trace_files import embedded, read_trace
from vgpu.core.ids import GangKey
from vgpu.core.model import GangRef, PodRequest
from vgpu.core.policy.specs import make_policy
from vgpu.core.workload import Workload
from vgpu.sim.engine import capacity_milli
from vgpu.sim.gangs import replay_units
from vgpu.sim.trace import DEFAULT_NODES, DEFAULT_PODS
from vgpu.sim.variants import TWO_AXIS_BASE_MIB, gangs, two_axis
from vgpu.sim.workload import arrivals


@pytest.fixture(scope="module")
def trace_pods() -> tuple[PodRequest, ...]:
    return read_trace().pods


def test_two_axis_redraws_memory_only_for_shares_and_is_seeded(
    trace_pods: tuple[PodRequest, ...],
) -> None:
    out = two_axis(trace_pods, 42)
    assert [p.key for p in out] == [p.key for p in trace_pods]
    assert [p.gpu_milli for p in out] == [p.gpu_milli for p in trace_pods]  # compute unchanged
    shares = {c.cores for p in trace_pods for c in p.gpu_containers if not c.whole}
    independent = 0
    for before, after in zip(trace_pods, out, strict=True):
        wanting = after.gpu_containers
        if len(wanting) == 1 and not wanting[0].whole:
            mib = wanting[0].memory_mib
            assert mib is not None and round(mib * 100 / TWO_AXIS_BASE_MIB) in shares
            independent += round(mib * 100 / TWO_AXIS_BASE_MIB) != wanting[0].cores
        else:
            assert after == before
    assert independent > 0.7 * sum(1 for p in out if p.gpu_containers and p.gpu_milli < 1000)
    assert two_axis(trace_pods, 42) == out
    assert two_axis(trace_pods, 43) != out


def test_gangs_regroup_the_same_pods_all_or_nothing_units(
    trace_pods: tuple[PodRequest, ...],
) -> None:
    trace = read_trace()
    seq = arrivals(trace_pods, capacity_milli=capacity_milli(trace.nodes), tune=1.0, seed=7)
    units = gangs(seq, 7)
    flat = [p for u in units for p in u]
    assert sorted(p.key for p in flat) == sorted(p.key for p in seq)
    groups = [u for u in units if len(u) > 1]
    assert len(groups) > 50
    for unit in groups:
        assert 2 <= len(unit) <= 16
        refs = {p.gang for p in unit}
        assert len(refs) == 1 and next(iter(refs)) == GangRef(unit[0].gang.key, len(unit))  # type: ignore[union-attr]
        for p in unit:
            (c,) = p.gpu_containers
            assert not c.whole or c.gpus == 1
    assert all(u[0].gang is None for u in units if len(u) == 1)
    assert [[p.key for p in u] for u in gangs(seq, 7)] == [[p.key for p in u] for u in units]


def _gang(name: str, size: int, cores: int) -> list[PodRequest]:
    ref = GangRef(GangKey(name), size)
    return [replace(make_pod(f"{name}-{i}", cores), gang=ref) for i in range(size)]


def test_planned_gangs_take_nothing_when_they_cannot_all_fit() -> None:
    # Two GPUs; a gang of three one-GPU members cannot fit, then two single one-GPU pods arrive.
    nodes = (make_node("n", gpus=2),)
    units = [_gang("g", 3, 100), [make_pod("s1", 100)], [make_pod("s2", 100)]]
    policy = make_policy("default", Workload((), ()))
    planned = replay_units(nodes, units, policy, seed=1, mode="plan")
    assert planned.extra["gangs_admitted"] == 0 and planned.extra["wasted_pct_final"] == 0
    assert planned.alloc_pct_final == 100.0 and planned.pods_placed == 2
    # Placed one by one, two members grab both GPUs, wait for a third forever, and the singles fail.
    loose = replay_units(
        nodes, units, make_policy("fgd", Workload((), ())), seed=1, mode="independent"
    )
    assert loose.extra["gangs_admitted"] == 0 and loose.extra["wasted_pct_final"] == 100.0
    assert loose.alloc_pct_final == 0.0 and loose.pods_failed == 5


def test_a_gang_that_fits_is_admitted_in_both_modes() -> None:
    nodes = (make_node("a", gpus=2), make_node("b", gpus=2))
    units = [_gang("g", 4, 50), [make_pod("s", 100)]]
    for mode in ("plan", "independent"):
        res = replay_units(
            nodes, units, make_policy("default", Workload((), ())), seed=1, mode=mode
        )
        assert res.extra["gangs_admitted"] == 1 and res.extra["gang_gpus_admitted"] == 2.0
        assert res.alloc_pct_final == 75.0
    with pytest.raises(ValueError, match="gang mode"):
        replay_units(nodes, units, make_policy("fgd", Workload((), ())), seed=1, mode="maybe")


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("slice")
    nodes, pods = root / "nodes.csv", root / "pods.csv"
    nodes.write_text("".join(embedded(DEFAULT_NODES).read_text().splitlines(True)[:41]))
    pods.write_text("".join(embedded(DEFAULT_PODS).read_text().splitlines(True)[:401]))
    return nodes, pods


@pytest.mark.parametrize("variant", ["two-axis", "gangs"])
def test_cli_runs_a_variant(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    nodes, pods = small_trace
    args = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--variant", variant]
    code = main(
        [*args, "--policy", "fgd", "--policy", "default", "--jobs", "1", "--json", "--quiet"]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)["policies"]
    run = doc["default"]["runs"][0]
    assert 0 < run["alloc_pct_at_100"] <= 100
    assert ("gangs_admitted" in run) == (variant == "gangs")
