"""CPU stranding (`vgpu.core.stranding`): the prefix-sum evaluation equals the plain sums."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.model import GpuSelector
from vgpu.core.stranding import NO_FEED, feed
from vgpu.core.workload import TaskShape, Workload

T4_ONLY = GpuSelector(include_models=("T4",))

shapes = st.lists(
    st.tuples(
        st.integers(0, 64_000), st.integers(5, 100), st.sampled_from([0, 1, 2, 8]), st.booleans()
    ),
    min_size=1,
    max_size=8,
)


def _workload(rows: list[tuple[int, int, int, bool]]) -> Workload:
    got = tuple(TaskShape(c, k if g else 0, g) for c, k, g, _ in rows)
    return Workload(got, tuple(1 / len(got) for _ in got))


def _plain(w: Workload, allowed: list[bool], cpu: int, free: int, per_shape: bool) -> float:
    rows = [(s, p, p * s.gpus * s.cores * 10) for s, p in zip(w.shapes, w.probs, strict=True)]
    total = sum(d for _, _, d in rows)
    fed = [(s, p, d) for (s, p, d), ok in zip(rows, allowed, strict=True) if ok and s.gpus]
    gpu, need = sum(d for *_, d in fed), sum(p * s.cpu_milli for s, p, _ in fed)
    if not gpu or not need:
        return 0.0
    if not per_shape:
        return gpu / total * max(0.0, free - cpu * gpu / need)
    return sum(
        d / total * max(0.0, free - cpu * s.gpus * s.cores * 10 / s.cpu_milli)
        for s, _, d in fed
        if s.cpu_milli
    )


@given(shapes, st.integers(0, 200_000), st.integers(0, 8000), st.booleans())
def test_stranded_equals_the_plain_expectation(
    rows: list[tuple[int, int, int, bool]], cpu: int, free: int, per_shape: bool
) -> None:
    w = _workload(rows)
    allowed = [ok for *_, ok in rows]
    got = feed(w, allowed, per_shape=per_shape).stranded(cpu, free)
    assert got == pytest.approx(_plain(w, allowed, cpu, free, per_shape), rel=1e-9, abs=1e-6)


def test_a_node_every_shape_may_use_gets_the_workload_ratio_at_full_weight() -> None:
    # 10 vCPU per GPU on average: 40 vCPU feed 4 of 8 free GPUs; the other 4 are stranded.
    w = Workload((TaskShape(10_000, 100, 1), TaskShape(5_000, 50, 1)), (0.5, 0.5))
    assert feed(w, None, per_shape=False).stranded(40_000, 8000) == pytest.approx(4000)
    assert feed(w, [True, True], per_shape=False).stranded(40_000, 8000) == pytest.approx(4000)


def test_shapes_that_cannot_run_on_the_node_do_not_set_its_ratio() -> None:
    # Half the GPU demand is T4-only and CPU-hungry (40 vCPU per GPU). On a node where it cannot
    # run, only the 10-vCPU shape counts, at half weight: 40 vCPU then feed 4 GPUs. Blind to
    # types, the mean of 25 vCPU per GPU would leave 6.4 GPUs stranded at full weight.
    w = Workload((TaskShape(10_000, 100, 1), TaskShape(40_000, 100, 1, None, T4_ONLY)), (0.5, 0.5))
    assert feed(w, [True, False], per_shape=False).stranded(40_000, 8000) == pytest.approx(2000)
    assert feed(w, None, per_shape=False).stranded(40_000, 8000) == pytest.approx(6400)
    assert feed(w, [False, False], per_shape=False) is NO_FEED
