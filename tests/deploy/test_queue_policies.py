"""The chart's queue admission, evaluated: its CEL runs here (cel-python) as the
API server runs it. Queues are bound to namespaces: the MutatingAdmissionPolicy gates the pods of
the extender's scheduler in a bound namespace that ask vGPU or name a gang (a gang's CPU-only
members too), never pods Kueue manages, and sets their queue label from the namespace; the
ValidatingAdmissionPolicy lets only the extender remove the gate and refuses, on every pod, a
queue label other than the namespace's (or none, for a pod that had its namespace's). The
ConfigMap the chart renders is what the extender's reader accepts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.deploy.cel import activation, cel, run
from tests.deploy.cel import refusals as cel_refusals
from tests.deploy.test_chart import _helm_or_skip, find, render
from vgpu.api.queues.config import UNLIMITED, read_config
from vgpu.api.queues.namespaces import Binding, bound_queue
from vgpu.core.queues.proportion import QueueSpec

celtypes = pytest.importorskip("celpy.celtypes")

Obj = dict[str, Any]
EXTENDER = "system:serviceaccount:gpu:vgpu-extender"


@pytest.fixture(scope="module")
def objs() -> list[Obj]:
    _helm_or_skip()
    return render(
        kube_version="v1.37.2",
        queues__enabled="true",
        **{
            "queues__list[0]__name": "a",
            "queues__list[0]__namespaces[0]": "team-a",
            "queues__list[1]__name": "b",
            "queues__list[1]__weight": "3",
            "queues__list[1]__reclaim": "true",
            "queues__list[1]__cap__cores": "400",
            "queues__list[1]__namespaceSelector__matchLabels__team": "b",
        },
    )


def _namespace(name: str, labels: Obj | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}}}


NS = _namespace("ns")  # bound to no queue
TEAM_A = _namespace("team-a")
TEAM_B = _namespace("lab", {"team": "b"})


def gated(objs: list[Obj], pod: Obj, namespace: Obj = TEAM_A) -> str | None:
    """The queue the mutating policy labels and gates `pod` with on CREATE (None: untouched)."""
    policy = find(objs, "MutatingAdmissionPolicy", "vgpu-queue-gate")["spec"]
    base = {"object": cel(pod), "oldObject": None, "namespaceObject": cel(namespace)}
    if not all(bool(run(c["expression"], base)) for c in policy["matchConditions"]):
        return None
    queue = str(activation(policy, base)["variables"][celtypes.StringType("queue")])
    return queue or None


def refusals(
    objs: list[Obj], old: Obj | None, new: Obj, user: str, namespace: Obj = TEAM_A
) -> list[str]:
    """The validating policy's messages for a CREATE (`old` None) or an UPDATE by `user`."""
    spec = find(objs, "ValidatingAdmissionPolicy", "vgpu-protect-queue-gate")["spec"]
    base = {
        "object": cel(new),
        "oldObject": None if old is None else cel(old),
        "request": cel(
            {"operation": "CREATE" if old is None else "UPDATE", "userInfo": {"username": user}}
        ),
        "namespaceObject": cel(namespace),
    }
    return cel_refusals(spec, base)


def pod(
    labels: Obj | None = None,
    cores: str | None = "30",
    gates: list[str] = (),  # type: ignore[assignment]
    scheduler: str = "vgpu-scheduler",
    annotations: Obj | None = None,
) -> Obj:
    limits = {"vgpu.io/cores": cores} if cores else {"cpu": "1"}
    spec: Obj = {
        "schedulerName": scheduler,
        "containers": [{"name": "m", "image": "x", "resources": {"limits": limits}}],
    }
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    meta = {"name": "p", "namespace": "ns", "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec}


def test_vgpu_pods_of_a_bound_namespace_are_gated_in_its_queue_never_kueues(
    objs: list[Obj],
) -> None:
    assert gated(objs, pod()) == "a"
    assert gated(objs, pod(gates=["other.example/gate"])) == "a"
    assert gated(objs, pod(), TEAM_B) == "b"  # bound by label
    assert gated(objs, pod(), NS) is None  # a namespace bound to no queue: as without queues
    assert gated(objs, pod(cores=None)) is None  # no vGPU asked, no gang
    assert gated(objs, pod({"kueue.x-k8s.io/queue-name": "q"})) is None
    assert gated(objs, pod({"kueue.x-k8s.io/pod-group-name": "g"})) is None
    assert gated(objs, pod(gates=["kueue.x-k8s.io/admission"])) is None


KUEUE = "system:serviceaccount:kueue-system:kueue-controller-manager"


@pytest.mark.parametrize(
    ("labels", "gates"),
    [({"kueue.x-k8s.io/anything": "x"}, []), ({}, ["kueue.x-k8s.io/mine"])],
    ids=["made-up-label", "self-made-gate"],
)
def test_a_kueue_mark_kueue_does_not_act_on_leaves_the_pod_in_its_queue(
    objs: list[Obj], labels: Obj, gates: list[str]
) -> None:
    """Found by a tenant-side review: any kueue.x-k8s.io/ label or gate took a vGPU pod out of
    its queue (no gate, no label; uncapped, outside fair order), with or without Kueue."""
    assert gated(objs, pod(labels, gates=gates)) == "a"


def test_a_pod_naming_a_kueue_queue_must_be_held_by_kueue_when_created(objs: list[Obj]) -> None:
    """Kueue's webhook adds its gate to the pods it manages; a pod naming a Kueue queue without
    it is held by no one (Kueue does not run, or does not manage the namespace)."""
    named = pod({"kueue.x-k8s.io/queue-name": "q"})
    (message,) = refusals(objs, None, named, "alice")
    assert "names a Kueue queue but Kueue does not hold it" in message
    assert "bound to vgpu queue a" in message
    held = pod({"kueue.x-k8s.io/queue-name": "q"}, gates=["kueue.x-k8s.io/admission"])
    assert refusals(objs, None, held, "alice") == []
    assert refusals(objs, None, named, "alice", NS) == []  # no vgpu queue: Kueue's business
    assert refusals(objs, None, pod({"kueue.x-k8s.io/queue-name": "q"}, cores=None), "a") == []


def test_only_kueue_may_remove_its_gate_in_a_namespace_bound_to_a_queue(objs: list[Obj]) -> None:
    """Else a tenant created its pod with Kueue's gate itself, which kept vgpu's gate off,
    then removed it: a pod in no queue at all."""
    held = pod(gates=["kueue.x-k8s.io/admission"])
    (message,) = refusals(objs, held, pod(), "alice")
    assert message.startswith("only Kueue (" + KUEUE)
    assert "alice tried to" in message
    assert refusals(objs, held, pod(), KUEUE) == []
    assert refusals(objs, held, pod(), "alice", NS) == []  # no vgpu queue: Kueue's business
    assert refusals(objs, held, held, "alice") == []


def test_the_namespace_not_the_pod_names_the_queue(objs: list[Obj]) -> None:
    """A pod labelled into another team's queue, or with no label, is put in its
    namespace's queue all the same."""
    assert gated(objs, pod({"vgpu.io/queue": "b"})) == "a"
    assert gated(objs, pod({"vgpu.io/queue": ""})) == "a"
    (mutation,) = find(objs, "MutatingAdmissionPolicy", "vgpu-queue-gate")["spec"]["mutations"]
    assert '{"vgpu.io/queue": variables.queue}' in mutation["applyConfiguration"]["expression"]


def test_a_gangs_cpu_only_member_is_gated_with_the_others(objs: list[Obj]) -> None:
    """A TFJob's parameter server asks no vGPU; ungated, its gang was never queued."""
    assert gated(objs, pod(cores=None, annotations={"vgpu.io/gang-name": "g"})) == "a"
    assert gated(objs, pod({"scheduling.x-k8s.io/pod-group": "g"}, cores=None)) == "a"


def test_another_schedulers_pod_is_never_gated(objs: list[Obj]) -> None:
    """`schedulerName: nobody` pods were released, never bound, and counted for good."""
    assert gated(objs, pod({"vgpu.io/queue": "a"}, scheduler="nobody")) is None
    # a CPU-only pod of the default scheduler: vgpu-scheduler-name leaves it to that scheduler
    plain = pod({"vgpu.io/queue": "a"}, scheduler="default-scheduler", cores=None)
    assert gated(objs, plain) is None


def test_the_mutation_adds_the_gate_beside_others(objs: list[Obj]) -> None:
    policy = find(objs, "MutatingAdmissionPolicy", "vgpu-queue-gate")
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    (mutation,) = policy["spec"]["mutations"]
    assert mutation["patchType"] == "ApplyConfiguration"  # merges the list-map keyed by name
    assert 'schedulingGates{name: "vgpu.io/queue"}' in mutation["applyConfiguration"]["expression"]
    binding = find(objs, "MutatingAdmissionPolicyBinding", "vgpu-queue-gate")
    assert binding["spec"]["policyName"] == "vgpu-queue-gate"


def test_only_the_extender_may_remove_the_gate(objs: list[Obj]) -> None:
    held = pod({"vgpu.io/queue": "a"}, gates=["vgpu.io/queue", "x.example/g"])
    freed = pod({"vgpu.io/queue": "a"}, gates=["x.example/g"])
    assert refusals(objs, held, freed, EXTENDER) == []
    (message,) = refusals(objs, held, freed, "alice")
    assert message.startswith("only the vgpu extender may remove the scheduling gate")
    assert "alice" in message
    assert refusals(objs, held, held, "alice") == []  # other edits of a held pod pass
    assert refusals(objs, freed, pod({"vgpu.io/queue": "a"}), "alice") == []  # others' gates


def test_no_pod_may_name_a_queue_other_than_its_namespaces(objs: list[Obj]) -> None:
    """Relabelling a running pod into another queue filled that queue's cap (or let
    reclaim act for the tenant); the label was guarded only while the pod was held."""
    running, moved = pod({"vgpu.io/queue": "a"}), pod({"vgpu.io/queue": "b"})
    (message,) = refusals(objs, running, moved, "alice")
    assert "must be a (the queue the operator bound the namespace to)" in message
    assert "alice set b" in message
    held = pod({"vgpu.io/queue": "a"}, gates=["vgpu.io/queue"])
    assert refusals(objs, held, pod({"vgpu.io/queue": "b"}, gates=["vgpu.io/queue"]), "alice")
    assert refusals(objs, None, moved, "alice")  # nor created so (another scheduler's pod)
    (unbound,) = refusals(objs, None, moved, "alice", NS)
    assert "must be absent (the namespace is bound to no queue)" in unbound
    assert refusals(objs, None, moved, EXTENDER)  # nobody is exempt
    assert refusals(objs, running, running, "alice") == []
    assert refusals(objs, None, pod({"vgpu.io/queue": "b"}), "alice", TEAM_B) == []


def test_an_update_leaving_a_stale_label_as_it_was_passes(objs: list[Obj]) -> None:
    """A pod labelled b before its namespace was bound to a: a controller must still be able to
    remove its finalizers (the extender counts it in no queue)."""
    stale = pod({"vgpu.io/queue": "b"})
    finalized = pod({"vgpu.io/queue": "b"})
    finalized["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    assert (
        refusals(objs, finalized, stale, "system:serviceaccount:kube-system:job-controller") == []
    )


def test_a_pod_of_a_bound_namespace_cannot_leave_its_queue(objs: list[Obj]) -> None:
    (message,) = refusals(objs, pod({"vgpu.io/queue": "a"}), pod(), "alice")
    assert "alice set none" in message
    assert refusals(objs, pod(cores=None), pod(cores=None), "alice") == []  # never queued
    assert refusals(objs, None, pod(scheduler="nobody"), "alice") == []


def test_the_rendered_configmap_is_what_the_extender_reads(objs: list[Obj]) -> None:
    config = read_config(find(objs, "ConfigMap", "vgpu-queues")["data"]["queues.json"])
    assert config.queues == (
        QueueSpec("a", 1),
        QueueSpec("b", 3, (400, UNLIMITED), reclaim=True),
    )
    assert config.bindings == (
        Binding("a", frozenset({"team-a"})),
        Binding("b", labels=(("team", "b"),)),
    )
    extender = find(objs, "Deployment", "vgpu-extender")
    args = extender["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--queues-config=gpu/vgpu-queues" in args


def test_queues_are_off_by_default() -> None:
    _helm_or_skip()
    objs = render(kube_version="v1.37.2")
    assert not [o for o in objs if "queue" in o["metadata"]["name"]]


def test_a_queue_bound_to_no_namespace_is_refused_at_render() -> None:
    _helm_or_skip()
    with pytest.raises(Exception, match=r"namespaces|namespaceSelector"):
        render(kube_version="v1.37.2", queues__enabled="true", **{"queues__list[0]__name": "a"})


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(["team-a", "lab", "ns", "other"]),
    st.dictionaries(st.sampled_from(["team", "tier"]), st.sampled_from(["a", "b"]), max_size=2),
)
def test_the_policies_and_the_extender_bind_a_namespace_to_the_same_queue(
    objs: list[Obj], name: str, labels: dict[str, str]
) -> None:
    """One mapping: the CEL the chart renders and the extender's reading of the ConfigMap."""
    config = read_config(find(objs, "ConfigMap", "vgpu-queues")["data"]["queues.json"])
    expected = bound_queue(config.bindings, name, labels)
    assert gated(objs, pod(), _namespace(name, labels)) == expected
    assert (refusals(objs, None, pod({"vgpu.io/queue": expected or "x"}), "alice",
                     _namespace(name, labels)) == []) == (expected is not None)  # fmt: skip


def test_queues_on_a_kubernetes_without_mutating_admission_policy_are_refused_at_render() -> None:
    """Without the policy no pod is gated, so queues would silently hold nothing: 1.35 is
    refused in one line naming the value and the fix, unless it serves the beta API."""
    import chart  # hack/chart.py, on sys.path through tests.deploy.test_chart
    import yaml

    _helm_or_skip()
    sets = {"queues__enabled": "true", "queues__list[0]__name": "a",
            "queues__list[0]__namespaces[0]": "a"}  # fmt: skip
    with pytest.raises(Exception, match=r"queues.enabled: Kubernetes v1.35.0 serves no Mutating"):
        render(kube_version="v1.35.0", **sets)
    args = ["template", "vgpu", str(chart.CHART), "-n", "gpu", "--kube-version", "v1.35.0",
            "--api-versions", "admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy"]  # fmt: skip
    args += [f"--set={k.replace('__', '.')}={v}" for k, v in sets.items()]
    policies = [d for d in yaml.safe_load_all(chart.run_helm(*args)) if d]
    kinds = {o["apiVersion"] for o in policies if o["kind"] == "MutatingAdmissionPolicy"}
    assert kinds == {"admissionregistration.k8s.io/v1beta1"}


@pytest.mark.parametrize("scheduler", ["", "default-scheduler"])
def test_a_pod_the_scheduler_name_policy_takes_is_gated_whichever_policy_runs_first(
    objs: list[Obj], scheduler: str
) -> None:
    """The API server defaults an unnamed scheduler to default-scheduler before admission, and
    runs the policies in an order of its own: the gate takes the pods vgpu-scheduler-name hands
    to the extender's scheduler without waiting to be reinvoked (on the test cluster a
    reinvocation alone left such pods ungated and unqueued)."""
    unnamed = pod(scheduler=scheduler)
    if not scheduler:
        del unnamed["spec"]["schedulerName"]
    assert gated(objs, unnamed) == "a"
    assert gated(objs, pod(scheduler=scheduler or "default-scheduler", cores=None)) is None
    assert gated(objs, pod(scheduler="other")) is None


def test_without_the_scheduler_name_policy_only_pods_of_the_extenders_scheduler_are_gated() -> None:
    _helm_or_skip()
    sets = {"queues__enabled": "true", "queues__list[0]__name": "a",
            "queues__list[0]__namespaces[0]": "team-a",
            "admissionPolicy__setSchedulerName": "false"}  # fmt: skip
    objs = render(kube_version="v1.37.2", **sets)
    assert gated(objs, pod(scheduler="default-scheduler")) is None
    assert gated(objs, pod()) == "a"


def _claim(cls: str = "vgpu.io", *, first: bool = False, kind: str = "ResourceClaim") -> Obj:
    request: Obj = {"name": "gpu"}
    if first:
        request["firstAvailable"] = [{"name": "share", "deviceClassName": cls}]
    else:
        request["exactly"] = {"deviceClassName": cls, "capacity": {"requests": {"cores": "30"}}}
    spec: Obj = {"devices": {"requests": [request]}}
    return {"kind": kind, "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def test_a_namespace_bound_to_a_queue_creates_no_vgpu_claim() -> None:
    """Found by a tenant-side review: queues count `vgpu.io/cores` asks, so a DRA claim of the
    vgpu.io class took GPUs outside the team's cap and fair order."""
    _helm_or_skip()
    objs = render(
        kube_version="v1.37.2",
        queues__enabled="true",
        dra__enabled="true",
        **{"queues__list[0]__name": "a", "queues__list[0]__namespaces[0]": "team-a"},
    )
    spec = find(objs, "ValidatingAdmissionPolicy", "vgpu-dra-claims")["spec"]

    def refused(claim: Obj, namespace: Obj = TEAM_A, operation: str = "CREATE") -> list[str]:
        """The queue check as the API server runs it; `requests` (optional-field syntax,
        which cel-python does not parse) is read here as its expression reads it."""
        body = claim["spec"]["spec"] if claim["kind"] == "ResourceClaimTemplate" else claim["spec"]
        base = {
            "object": cel(claim),
            "request": cel({"operation": operation}),
            "namespaceObject": cel(namespace),
        }
        return cel_refusals(
            spec,
            base,
            preset={"requests": cel(body["devices"]["requests"])},
            only=lambda v: "outsideQueue" in v["expression"],  # the rest use quantity()
        )

    for claim in (_claim(), _claim(first=True), _claim(kind="ResourceClaimTemplate")):
        (message,) = refused(claim)
        assert message.startswith("namespace team-a is bound to vgpu queue a")
        assert refused(claim, NS) == []  # a namespace bound to no queue
    assert refused(_claim("gpu.nvidia.com")) == []  # another driver's class
    assert refused(_claim(), operation="UPDATE") == []  # claims made before the binding
    off = render(kube_version="v1.37.2", dra__enabled="true")
    off_spec = find(off, "ValidatingAdmissionPolicy", "vgpu-dra-claims")["spec"]
    assert len(off_spec["validations"]) == 1  # without queues, no namespace is bound
