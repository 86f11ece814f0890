"""The demand of GPU-type-constrained shapes on GPU models (`stranding.pressures`,
`core.model_demand`)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.errors import InvalidRequest
from vgpu.core.fragmentation import FragmentMeter
from vgpu.core.model import ANY_GPU, GpuSelector, Node
from vgpu.core.model_demand import ModelDemand
from vgpu.core.policy.default import DefaultPolicy
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.stranding import pressures
from vgpu.core.workload import TaskShape, Workload

T4 = GpuSelector(include_models=("T4",))
HALF_T4 = Workload((TaskShape(8_000, 100, 1), TaskShape(8_000, 100, 1, None, T4)), (0.5, 0.5))


def test_constrained_demand_is_spread_over_the_allowed_models_by_capacity() -> None:
    # Half the GPU demand may only use T4, a quarter of the GPUs: T4 is claimed twice over.
    allowed = [(True, False), (True, True)]  # class 0: G2, class 1: T4
    assert pressures(HALF_T4, allowed, [6, 2]) == pytest.approx([0.0, 2.0])
    # A shape allowed on both classes claims them equally, whatever their sizes.
    both = Workload((TaskShape(1000, 50, 1, None, GpuSelector(("G2", "T4"))),), (1.0,))
    assert pressures(both, [(True,), (True,)], [6, 2]) == pytest.approx([1.0, 1.0])


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 100), st.integers(1, 9)), max_size=6),
    st.lists(st.integers(0, 8), min_size=3, max_size=3),
)
def test_claims_add_up_to_the_constrained_share_of_the_demand(
    rows: list[tuple[int, int, int]], counts: list[int]
) -> None:
    # Each class's claim times its capacity share, summed, is the GPU demand share of the
    # constrained shapes that have somewhere to run: nothing is lost or counted twice.
    models = ("G2", "T4", "P100")
    sels = (ANY_GPU, GpuSelector(("T4",)), GpuSelector(("T4", "P100")), GpuSelector(("A10",)))
    shapes = tuple(TaskShape(1000, k, g, None, sels[s]) for s, k, g in rows)
    w = Workload(shapes, tuple(1 / len(shapes) for _ in shapes)) if shapes else Workload((), ())
    allowed = [tuple(s.selector.allows_model(m) for s in shapes) for m in models]
    got = pressures(w, allowed, counts)
    gpus = sum(counts)
    demand = [p * s.gpus * s.cores for s, p in zip(w.shapes, w.probs, strict=True)]
    placeable = [
        d
        for d, s, m in zip(demand, w.shapes, range(len(demand)), strict=True)
        if not s.selector.is_any and any(allowed[c][m] and counts[c] for c in range(3))
    ]
    total = sum(demand)
    expected = sum(placeable) / total if total and gpus else 0.0
    spread = sum(c * n for c, n in zip(got, counts, strict=True)) / gpus if gpus else 0.0
    assert spread == pytest.approx(expected)


def _claims(
    workload: Workload, nodes: list[Node], *, lo: float = 1.0
) -> tuple[ModelDemand, FragmentMeter]:
    meter = FragmentMeter(workload)
    claims = ModelDemand(reserve=1.0, lo=lo)
    for node in nodes:
        claims.note(node)
    assert claims.dirty
    claims.refresh(meter, workload)
    return claims, meter


def test_only_a_pod_that_could_go_elsewhere_pays_for_a_claimed_gpu() -> None:
    t4, g2 = make_node("t4", gpus=2, model="T4"), make_node("g2", gpus=6, model="G2")
    claims, meter = _claims(HALF_T4, [t4, g2])
    t4_class, g2_class = meter.gpu_class(t4.gpus[0]), meter.gpu_class(g2.gpus[0])
    assert claims.of(t4_class) == pytest.approx(2.0)
    assert claims.cost(ANY_GPU, t4_class, 100) == pytest.approx(1000)
    assert claims.cost(ANY_GPU, g2_class, 100) == 0
    assert claims.cost(T4, t4_class, 100) == 0  # it has nowhere else to go


def test_the_cost_ramps_up_from_lo_to_a_claim_of_one() -> None:
    t4, g2 = make_node("t4", gpus=2, model="T4"), make_node("g2", gpus=8, model="G2")
    light = Workload(HALF_T4.shapes, (0.8, 0.2))  # T4 claimed at 0.2 / 0.2 = 1.0
    claims, meter = _claims(light, [t4, g2], lo=0.5)
    assert claims.cost(ANY_GPU, meter.gpu_class(t4.gpus[0]), 50) == pytest.approx(500)
    lighter = Workload(HALF_T4.shapes, (0.85, 0.15))  # claimed at 0.75: half way up the ramp
    claims, meter = _claims(lighter, [t4, g2], lo=0.5)
    assert claims.cost(ANY_GPU, meter.gpu_class(t4.gpus[0]), 50) == pytest.approx(250)
    claims, meter = _claims(lighter, [t4, g2], lo=1.0)  # a step at 1: nothing yet
    assert claims.cost(ANY_GPU, meter.gpu_class(t4.gpus[0]), 50) == 0


def test_reserve_keeps_a_cpu_heavy_free_pod_off_the_models_typed_pods_need() -> None:
    # T4 nodes are CPU-rich, G2 nodes CPU-poor. A CPU-heavy pod that may run anywhere strands
    # G2 GPUs, so stranding alone sends it to the T4, which the T4-only pods claim twice over;
    # the reserve term keeps it on the G2. (The first pod lets the policy count the models.)
    def pick(policy: str) -> str:
        state = ClusterState(
            [
                make_node("a-t4", gpus=2, model="T4", cpu=104_000),
                make_node("b-g2", gpus=8, model="G2", cpu=64_000),
            ]
        )
        sched = Scheduler(state, make_policy(policy, HALF_T4))
        sched.select(make_pod("warm-up", cpu=1))
        sel = sched.select(make_pod("heavy", 100, cpu=16_000))
        assert sel is not None
        return str(sel.node)

    assert pick("fgd") == "b-g2"
    assert pick("default:online=0,reserve=0") == "a-t4"
    assert pick("default:online=0") == "b-g2"


def test_without_constrained_shapes_nothing_is_claimed_and_scores_are_unchanged() -> None:
    nodes = [make_node("t4", gpus=2, model="T4", cpu=16_000), make_node("g2", gpus=8, model="G2")]
    free = Workload(
        (TaskShape(8_000, 100, 1), TaskShape(2_000, 30, 1), TaskShape(0, 0, 0)), (0.4, 0.4, 0.2)
    )
    new, old = (make_policy(p, free) for p in ("default:online=0", "default:online=0,typed=0"))
    assert isinstance(new, DefaultPolicy)
    for i, pod in enumerate(
        [make_pod("a", 100, cpu=12_000), make_pod("b", 30, cpu=1000), make_pod("c", cpu=9000)]
    ):
        got = []
        for policy in (new, old):
            state = ClusterState(nodes)
            sched = Scheduler(state, policy)
            got.append([sched.evaluate(ns, pod) for ns in state.nodes()])
        assert got[0] == got[1], i
    assert not any(new.demand.claim)
    assert new.generation == 0  # counting the models changed no claim: memos stay valid


def test_claim_knobs_parse_and_a_bad_rule_is_a_clear_error() -> None:
    policy = make_policy("default:contested=step,reserve=2,reserve_lo=0.5", HALF_T4)
    assert isinstance(policy, DefaultPolicy)
    assert (policy.config.contested, policy.config.reserve, policy.config.reserve_lo) == (
        "step",
        2.0,
        0.5,
    )
    with pytest.raises(InvalidRequest, match="contested=pressure"):
        make_policy("default:contested=bogus", HALF_T4)
