"""Filter and prioritize against the watch-fed cache."""

from __future__ import annotations

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until

H100 = "NVIDIA H100 80GB HBM3"


def test_failed_nodes_carry_reasons_and_resolvability(harness: Harness) -> None:
    harness.put(make_node("a100", gpus=1))
    harness.put(make_node("h100", gpus=1, model=H100))
    harness.put(make_node("cpu-only", inventory=False))
    harness.put(make_node("broken", inventory="{oops"))
    harness.put(make_node("small", gpus=1, memory_mib=16384))
    wire = harness.wire(harness.start())
    names = ["a100", "h100", "cpu-only", "broken", "small", "unknown"]
    pod = make_pod("p", cores=50, memory=100, annotations={"vgpu.io/gpu-type": "A100|A10"})
    out = wire.filter(harness.shown(pod), names)
    assert out["NodeNames"] == ["a100"]
    unresolvable = out["FailedAndUnresolvableNodes"]
    assert "no GPU of type A100|A10" in unresolvable["h100"]
    assert "no vgpu.io/gpu-inventory annotation" in unresolvable["cpu-only"]
    assert "invalid" in unresolvable["broken"]
    assert "small" in unresolvable and "unknown" in out["FailedNodes"]


def test_busy_gpus_fail_resolvably_and_never_one_node_forced(harness: Harness) -> None:
    for name in ("n1", "n2", "n3"):
        harness.put(make_node(name, gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    for i, node in enumerate(("n1", "n2")):
        harness.put(make_pod(f"big{i}", cores=80))
        assert wire.bind(harness.pod(f"big{i}"), node) == ""
    wait_until(lambda: len(daemon.cache.ledger.holdings()) == 2)
    out = wire.filter(harness.shown(make_pod("p", cores=30)), ["n1", "n2", "n3"])
    assert out["NodeNames"] == ["n3"]  # the only node that fits, not a forced choice
    assert "no GPU with 30 cores" in out["FailedNodes"]["n1"]
    assert out["FailedAndUnresolvableNodes"] == {}


def test_uuid_selection_and_exclusion(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=2))
    harness.put(make_node("n2", gpus=2))
    wire = harness.wire(harness.start())
    only = harness.shown(make_pod("p", cores=10, annotations={"vgpu.io/gpu-uuid": "GPU-n2-1"}))
    assert wire.filter(only, ["n1", "n2"])["NodeNames"] == ["n2"]
    harness.put(
        make_pod("q", cores=10, annotations={"vgpu.io/gpu-uuid-exclude": "GPU-n1-0,GPU-n1-1"})
    )
    assert wire.filter(harness.pod("q"), ["n1", "n2"])["NodeNames"] == ["n2"]
    assert wire.bind(harness.pod("q"), "n2") == ""
    excluded = harness.shown(
        make_pod("r", cores=10, annotations={"vgpu.io/gpu-type-exclude": "A100"})
    )
    assert wire.filter(excluded, ["n1", "n2"])["NodeNames"] == []


def test_invalid_resource_values_are_an_in_band_error(harness: Harness) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start()
    wire = harness.wire(daemon)
    cases: list[tuple[int | str, int | None, str]] = [
        (150, None, "vgpu.io/cores"),
        ("abc", None, "vgpu.io/cores"),
        (0, 4, "vgpu.io/memory"),
        (200, 4, "vgpu.io/memory"),
    ]
    for i, (cores, memory, field) in enumerate(cases):
        out = wire.filter(harness.shown(make_pod(f"bad{i}", cores=cores, memory=memory)), ["n1"])
        assert field in out["Error"], out
        assert out["NodeNames"] is not None
    assert daemon.cache.ledger.holdings() == []


def test_pods_without_gpu_pass_every_node(harness: Harness) -> None:
    harness.put(make_node("n1", inventory=False))
    harness.put(make_node("n2"))
    wire = harness.wire(harness.start())
    pod = harness.shown(make_pod("web"))
    assert wire.filter(pod, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]
    assert wire.prioritize(pod, ["n1", "n2"]) == {"n1": 0, "n2": 0}


def test_prioritize_prefers_packing_under_binpack_policy(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=2))
    harness.put(make_node("n2", gpus=2))
    daemon = harness.start(pod_policies=("binpack", "spread"))
    wire = harness.wire(daemon)
    harness.put(make_pod("first", cores=50))
    assert wire.bind(harness.pod("first"), "n1") == ""
    wait_until(lambda: daemon.cache.ledger.holding("default/first"))  # type: ignore[arg-type]
    packed = harness.shown(make_pod("p", cores=30, annotations={"vgpu.io/policy": "binpack"}))
    scores = wire.prioritize(packed, ["n1", "n2"])
    assert scores["n1"] == 10 and scores["n2"] < 10
    spread = harness.shown(make_pod("q", cores=30, annotations={"vgpu.io/policy": "spread"}))
    scores = wire.prioritize(spread, ["n1", "n2"])
    assert scores["n2"] == 10 and scores["n1"] < 10
    unknown = harness.shown(make_pod("r", cores=30, annotations={"vgpu.io/policy": "nope"}))
    assert "not allowed for pods" in wire.filter(unknown, ["n1"])["Error"]


def test_the_default_policy_learns_the_workload_from_filtered_pods(harness: Harness) -> None:
    """The extender has no trace: the pods it is asked to place are what the default policy
    learns its target workload from (its generation moves once the shapes differ enough from
    the prior)."""
    harness.put(make_node("n1", gpus=8))
    daemon = harness.start()
    wire = harness.wire(daemon)
    policy = daemon.extender.policies.default
    before = policy.generation
    for i in range(150):  # rebuilt after 16 and 16 + 128 pods, adopted once far from the prior
        harness.put(make_pod(f"p{i}", cores=35, memory=7))
    wait_until(lambda: len(daemon.cache.pods) == 150)
    for i in range(150):  # only pods the watch shows teach it (a request may be forged)
        wire.filter(harness.pod(f"p{i}"), ["n1"])
    assert policy.generation > before
    again = policy.generation
    for _ in range(20):  # the same pod again and again (retries) teaches nothing new
        wire.filter(harness.pod("p0"), ["n1"])
    assert policy.generation == again


def test_a_pod_version_is_parsed_once_and_a_new_version_again(harness: Harness) -> None:
    daemon = harness.start()
    pod = make_pod("p", cores=30)
    pod["metadata"] |= {"uid": "u1", "resourceVersion": "7"}
    first = daemon.cache.parse(pod)
    assert daemon.cache.parse(pod) is first
    pod["metadata"]["resourceVersion"] = "8"
    pod["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled"}]}
    assert daemon.cache.parse(pod) is first  # nothing that is read changed: not parsed again
    pod["metadata"]["resourceVersion"] = "9"
    pod["spec"]["containers"][0]["resources"]["limits"]["vgpu.io/cores"] = "40"
    assert daemon.cache.parse(pod).request.containers[0].cores == 40
    unversioned = make_pod("q", cores=30)
    assert daemon.cache.parse(unversioned) is not daemon.cache.parse(unversioned)


def test_forged_requests_teach_the_policy_nothing(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=8))
    daemon = harness.start()
    wire = harness.wire(daemon)
    policy = daemon.extender.policies.default
    before = policy.generation
    for i in range(150):
        wire.filter(make_pod(f"p{i}", cores=35, memory=7), ["n1"])
    assert policy.generation == before


def test_pods_choose_only_allowed_policies_and_memory_stays_bounded(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=2))
    daemon = harness.start(pod_policies=("binpack",))
    wire = harness.wire(daemon)
    book = daemon.extender.policies
    for i in range(300):  # a flood of distinct specs, each a policy object before
        spec = f"default:cpu_weight={i}"
        pod = harness.shown(make_pod(f"p{i}", cores=30, annotations={"vgpu.io/policy": spec}))
        out = wire.filter(pod, ["n1"])
        assert "is not allowed for pods" in out["Error"] and "binpack" in out["Error"], out
    assert book.names == ["default", "binpack"]
    allowed = harness.shown(make_pod("ok", cores=30, annotations={"vgpu.io/policy": "binpack"}))
    assert wire.filter(allowed, ["n1"])["NodeNames"] == ["n1"]


def test_a_pod_with_more_vgpu_containers_than_the_cap_is_refused_naming_the_fix(
    harness: Harness,
) -> None:
    """A pod of 600 look-alike init containers stalled every filter. Past
    `MAX_VGPU_CONTAINERS` the pod is an in-band error (the admission policy refuses it first
    where it is installed); at the cap it is placed as any other."""
    from tests.pods import container
    from vgpu.api.podasks import MAX_VGPU_CONTAINERS

    harness.put(make_node("n1", gpus=8))
    daemon = harness.start()
    wire = harness.wire(daemon)
    for name, count in (("at-cap", MAX_VGPU_CONTAINERS), ("past-cap", MAX_VGPU_CONTAINERS + 1)):
        pod = make_pod(name, cores=1)
        pod["spec"]["initContainers"] = [container(f"i{k}", cores=1) for k in range(count - 1)]
        out = wire.filter(harness.shown(pod), ["n1"])
        if count <= MAX_VGPU_CONTAINERS:
            assert out["Error"] == "" and out["NodeNames"] == ["n1"], out
        else:
            assert f"{count} containers ask vgpu.io/ devices" in out["Error"], out
            assert f"pods of at most {MAX_VGPU_CONTAINERS} vGPU containers" in out["Error"]
