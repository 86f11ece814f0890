"""The shipped `vgpu-refuse-impossible-asks` ValidatingAdmissionPolicy, evaluated (cel-python):
a pod whose vGPU asks can never be granted is refused at creation in the very words
`kubectl inspect vgpu` prints under Problems for it (`vgpu.inspect.waiting.never_fits`), and the
two agree on random asks. The CEL's number of cores per GPU is `vgpu.core.units.CORES_PER_GPU`.

Kubernetes' CEL quantity library (k8s.io/apiserver pkg/cel/library/quantity.go: `quantity`,
`asInteger`) is not in cel-python; it is stood in for by the project's one quantity parser,
which reads Kubernetes' grammar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.deploy.cel import cel, refusals
from tests.pods import container, pod_obj
from vgpu.api.inventory import InventoryGpu, NodeGpuInventory
from vgpu.api.podasks import pod_asks
from vgpu.api.quantity import parse_quantity
from vgpu.core.units import CORES_PER_GPU
from vgpu.inspect.waiting import never_fits

celtypes = pytest.importorskip("celpy.celtypes")

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "daemonset" / "ask-policy.yaml"
Obj = dict[str, Any]


class _Quantity:
    def __init__(self, text: str) -> None:
        self.value = parse_quantity(text, "quantity")


def _quantity(text: Any) -> _Quantity:
    return _Quantity(str(text))


def _as_integer(q: _Quantity) -> Any:
    assert q.value.denominator == 1, "asInteger of a fraction is an error in Kubernetes too"
    return celtypes.IntType(int(q.value))


FUNCTIONS = {"quantity": _quantity, "asInteger": _as_integer}


def _spec() -> Obj:
    docs = [d for d in yaml.safe_load_all(POLICY.read_text()) if d]
    (policy,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    return dict(policy["spec"])


SPEC = _spec()


def refused(pod: Obj) -> list[str]:
    """The messages of the validations `pod` fails at creation (empty: admitted)."""
    return refusals(SPEC, {"object": cel(pod)}, functions=FUNCTIONS)


MAX_GPUS = int(next(v["expression"] for v in SPEC["variables"] if v["name"] == "maxGpus"))
NODE = NodeGpuInventory(
    256,
    tuple(InventoryGpu(f"GPU-{i}", i, "A100", 10**6, 100, True, 0, ()) for i in range(MAX_GPUS)),
)


def report(pod: Obj) -> str | None:
    """The report's Problem for `pod` on a cluster whose largest node has the policy's number
    of GPUs (each large enough for any share), as the policy words it; None: no Problem."""
    why = never_fits(pod, pod_asks(pod), [NODE])
    return None if why is None else f"vGPU pod: can never be scheduled: {why}"


def canonical(count: int) -> str:
    """A count as the API server writes it back (1000 is "1k", 2000000 "2M")."""
    for suffix, scale in (("M", 10**6), ("k", 10**3)):
        if count and count % scale == 0:
            return f"{count // scale}{suffix}"
    return str(count)


EDGES = [0, 1, 99, 100, 101, 150, 200, 250, 1000, 1100, 2000, 10**6]
EDGES += [g * CORES_PER_GPU + d for g in (MAX_GPUS, MAX_GPUS + 1) for d in (0, 50)]
CORES = st.one_of(st.sampled_from(EDGES), st.integers(0, 120))
MEMORY = st.one_of(st.none(), st.integers(0, 40), st.sampled_from([1000, 3000]))


@st.composite
def pods(draw: st.DrawFn) -> Obj:
    def one(i: int, prefix: str) -> Obj:
        cores, memory = draw(CORES), draw(MEMORY)
        made = container(f"{prefix}{i}", limits={"cpu": "1"})
        limits = made["resources"]["limits"]
        if cores:
            limits["vgpu.io/cores"] = canonical(cores)
        if memory is not None:
            limits["vgpu.io/memory"] = canonical(memory)
        if draw(st.booleans()):  # a hand-made object: the request alone
            made["resources"] = {"requests": limits}
        return made

    apps = [one(i, "c") for i in range(draw(st.integers(1, 2)))]
    inits = [one(i, "i") for i in range(draw(st.integers(0, 1)))]
    return pod_obj("p", apps, init=inits)


def _admitted_by_both(pod: Obj) -> bool:
    return not refused(pod) and report(pod) is None


def _whole(n: int) -> str:
    return canonical(n * CORES_PER_GPU)


@settings(max_examples=80, deadline=None)
@given(pods())
@example(pod_obj("p", [container("c", cores=_whole(MAX_GPUS + 1))]))  # more GPUs than a node
@example(pod_obj("p", [container("a", cores=_whole(MAX_GPUS)), container("b", cores=100)]))
@example(pod_obj("p", [container(cores=30)], init=[container("i", cores=150)]))
@example(pod_obj("p", [container(memory=4), container("b", cores=_whole(MAX_GPUS + 2))]))
def test_the_policy_refuses_with_the_reports_words(pod: Obj) -> None:
    """Whatever the policy refuses, the report calls never schedulable in the same words; what
    it admits the report refuses only for the pod's cores in all (a sum over init reuse, left to
    the extender)."""
    messages = refused(pod)
    expected = report(pod)
    if messages:
        (message,) = messages
        assert expected is not None
        assert message == expected or message == f"{expected} (admissionPolicy.maxGpusPerNode)"
    else:
        assert expected is None or "cores in all" in expected


@pytest.mark.parametrize(
    ("cores", "memory", "words"),
    [
        ("150", None, "spec.containers[0].resources[cores]: 150 is more than one GPU but not a "
         "multiple of 100 (ask for a share below 100 or whole GPUs (100 or 200))"),
        (None, "16", "spec.containers[0].resources[memory]: GPU memory asked without GPU cores "
         "(add a cores request (1..99) for the share)"),
        ("200", "16", "spec.containers[0].resources[memory]: whole GPUs come with all their "
         "memory (omit the memory request when asking for multiples of 100 cores)"),
    ],
)  # fmt: skip
def test_the_issues_examples_are_refused(cores: str | None, memory: str | None, words: str) -> None:
    limits = {k: v for k, v in (("vgpu.io/cores", cores), ("vgpu.io/memory", memory)) if v}
    pod = pod_obj("p", [container(limits=limits)])
    assert refused(pod) == [f"vGPU pod: can never be scheduled: invalid asks: {words}"]


def test_more_whole_gpus_than_any_node_has_is_refused_naming_the_value() -> None:
    pod = pod_obj("p", [container("big", cores=canonical((MAX_GPUS + 1) * CORES_PER_GPU))])
    assert refused(pod) == [
        f"vGPU pod: can never be scheduled: container big asks {MAX_GPUS + 1} whole GPUs; the "
        f"largest node has {MAX_GPUS} it may use (admissionPolicy.maxGpusPerNode)"
    ]
    assert refused(pod_obj("p", [container("fits", cores=MAX_GPUS * CORES_PER_GPU)])) == []


def test_valid_asks_and_pods_without_vgpu_pass() -> None:
    assert refused(pod_obj("p", [container(cores=30, memory=16)])) == []
    assert refused(pod_obj("p", [container(cores=100)], init=[container("i", cores=99)])) == []
    assert refused(pod_obj("p", [container(limits={"cpu": "2", "nvidia.com/gpu": "1"})])) == []


def test_the_cel_counts_cores_per_gpu_as_the_python_does() -> None:
    """The one number the CEL states, in the template that daemonset/ is rendered from."""
    gpu = next(v["expression"] for v in SPEC["variables"] if v["name"] == "gpu")
    assert int(gpu) == CORES_PER_GPU
    template = (ROOT / "charts" / "vgpu" / "templates" / "ask-policy.yaml").read_text()
    assert f'expression: "{CORES_PER_GPU}"' in template
    assert "ask-policy.yaml" in (ROOT / "daemonset" / "kustomization.yaml").read_text()
