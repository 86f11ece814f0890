"""Hand-off regressions, each failing before its fix: a pod part way through its
admission never absorbs another pod's Allocate; the extender never binds what the agent would
refuse; init and app containers share the devices the kubelet reuses; a bound gang member keeps
the rest of its gang reserved; and what the hand-off's state machine and soak found (pods whose
next containers differ, attributions that are settled rather than trusted, refusals that fail
only a pod that could have made the call).

The agent daemon's own guards are in `test_agent_daemon_guards.py`.
"""

from __future__ import annotations

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.handoff.pods import agent, ids, pod, share
from vgpu.api.podspec import pod_spec
from vgpu.core.handoff_rule import conflicts
from vgpu.core.ids import NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, Phase
from vgpu.node.devices import UnitKind
from vgpu.node.grants import Refusal
from vgpu.node.handoff.admissions import HeldDevices
from vgpu.node.podspec import pod_info

CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"


def test_a_pod_part_way_through_admission_never_absorbs_another_pods_allocate() -> None:
    """A's memory is allocated first (Go map order), its cores Allocate then carries IDs on
    another GPU and is refused, so the kubelet fails A. B (same cores ask, same GPU, other
    memory ask) must not receive A's grant."""
    a = pod("a", [("main", 30, 10, "G0")])
    b = pod("b", [("main", 30, 2, "G0")])
    handoff, policy, admitted = agent(a)
    assert not isinstance(policy.allocate(MEMORY, [ids("G0", "m", 10)]), Refusal)
    assert isinstance(policy.allocate(CORES, [ids("G1", "c", 30)]), Refusal)
    handoff.observe(pod_info(b))
    result = policy.allocate(CORES, [ids("G0", "c", 30)])
    if not isinstance(result, Refusal):
        (grant,) = result
        assert grant.envs["VGPU_MEMORY_LIMIT_MIB"] == str(2 * 1024), "B received A's grant"
        assert "ns/b" in admitted and handoff.admitted_containers("ns/a") == []  # type: ignore[arg-type]


def test_the_extender_never_binds_what_the_agent_would_refuse(harness: Harness) -> None:
    """30 cores + 10 blocks pending on the only GPU: a pod asking 30 cores + 2 blocks would be
    confusable (same cores ask, different grant), so the node must fail resolvably."""
    harness.put(make_node("n1", gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    harness.put(make_pod("a", cores=30, memory=10))
    assert wire.bind(harness.pod("a"), "n1") == ""
    harness.seen(daemon, lambda: daemon.cache.pending.get(NodeName("n1")))
    harness.put(make_pod("b", cores=30, memory=2))
    out = wire.filter(harness.pod("b"), ["n1"])
    assert out["NodeNames"] == [], out
    assert "waiting for admission" in out["FailedNodes"]["n1"]


def test_init_and_app_containers_share_the_devices_the_kubelet_reuses(
    harness: Harness,
) -> None:
    """The kubelet hands the init container's IDs to the app container (devicesToReuse): both
    must be placed on one GPU and charged once."""
    harness.put(make_node("n1", gpus=2))
    daemon = harness.start()
    wire = harness.wire(daemon)
    raw = make_pod("p", cores=30)
    raw["spec"]["initContainers"] = [
        {"name": "init", "resources": {"limits": {CORES: "30"}}, "image": "x"}
    ]
    harness.put(raw)
    assert wire.bind(harness.pod("p"), "n1") == ""
    held = daemon.cache.ledger.holding("default/p")  # type: ignore[arg-type]
    assert held is not None
    gpus = {c.name: {s.uuid for s in c.shares} for c in held.assignment.containers}
    assert gpus["init"] == gpus["main"], gpus
    node = daemon.cache.node_states["n1"]
    used = sum(100 - free for free in node.free_cores)
    assert used == 30, f"init and app charged {used} cores; the kubelet holds 30"


def test_a_bound_member_keeps_the_rest_of_its_gang_reserved(harness: Harness) -> None:
    annotations = {"vgpu.io/gang-name": "job", "vgpu.io/gang-size": "2"}
    for i in range(2):
        harness.put(make_pod(f"job-{i}", cores=100, annotations=annotations))
    harness.put(make_node("n1", gpus=2))
    daemon = harness.start(gang_timeout=10)
    wire = harness.wire(daemon)
    for i in range(2):
        assert wire.filter(harness.pod(f"job-{i}"), ["n1"])["NodeNames"] == ["n1"]
    assert wire.bind(harness.pod("job-0"), "n1") == ""
    harness.clock.advance(11)
    daemon.extender.sweep()
    held = daemon.cache.ledger.holding("default/job-1")  # type: ignore[arg-type]
    assert held is not None and held.phase is Phase.RESERVED, "gang split: 1 of 2 bound"
    (event,) = daemon.cache.gangs.events
    assert event[0] == "default/job-1" and event[1] == "VgpuGangIncomplete"
    assert "stays reserved until it binds" in event[2]
    daemon._gang_events()  # what the sweeper thread does after each sweep
    posted = [r for r in harness.server.requests if r.method == "POST" and "/events" in r.path]
    assert posted and "VgpuGangIncomplete" in str(posted[0].body)


def test_pods_whose_next_containers_differ_are_confusable() -> None:
    """p3 (25 cores) and p4's init container (25 cores, then a 10-core sidecar) on one GPU with
    equal grants: the agent could take p4's init call for p3, and p4's next call (10 cores) would
    then find p4 still waiting for its init container and be refused. The rule counts the
    containers that follow, so the extender keeps p4 waiting until p3 is admitted."""

    def assigned(name: str, containers: list[tuple[str, int]]) -> Assignment:
        return Assignment(
            PodKey(f"default/{name}"),
            NodeName("n1"),
            containers=tuple(ContainerAssignment(c, (share(k, 0, "G0"),)) for c, k in containers),
        )

    p3 = pod_spec(make_pod("p3", cores=25), memory_unit_mib=1024)
    raw = make_pod("p4", cores=25)
    raw["spec"]["initContainers"] = [
        {"name": "init", "resources": {"limits": {CORES: "25"}}},
        {"name": "side", "restartPolicy": "Always", "resources": {"limits": {CORES: "10"}}},
    ]
    p4 = pod_spec(raw, memory_unit_mib=1024)
    pending = p3.pending(assigned("p3", [("main", 25)]))
    mine = p4.pending(assigned("p4", [("init", 25), ("side", 10), ("main", 25)]))
    assert [c.container for c in mine] == ["init", "side", "main"]
    problems = conflicts(mine, pending)
    assert problems and "init would be confusable with default/p3/main" in problems[0]
    assert not conflicts(mine[2:], pending), "main, the last container, is interchangeable"


def test_an_interchangeable_attribution_is_settled_not_trusted() -> None:
    """a and b ask the same 20 cores on G0 with the same grant. The kubelet admits b first; the
    agent may attribute that call to a (same devices, same limits), but must neither report a
    admitted (the extender would lift invariant I for a pod still waiting) nor refuse a's own
    call after b is deleted: a's call then takes the attribution back (`Handoff.attribution`)."""
    a = pod("a", [("main", 20, 0, "G0")])
    b = pod("b", [("main", 20, 0, "G0")])
    handoff, policy, _ = agent(a, b)
    first = policy.preferred(CORES, ids("G0", "c", 100) + ids("G1", "c", 100), [], 20)
    assert {i.split("::")[0] for i in first} == {"G0"}
    assert not isinstance(policy.allocate(CORES, [first]), Refusal)  # b's call, in truth
    assert handoff.annotation_updates() == []  # nobody reported admitted while unsure
    handoff.forget(PodKey("ns/b"), "uid-b")  # b finishes and is deleted
    rest = [i for i in ids("G0", "c", 100) if i not in first]
    second = policy.preferred(CORES, rest + ids("G1", "c", 100), [], 20)
    assert {i.split("::")[0] for i in second} == {"G0"}, "steered to a's GPU"
    result = policy.allocate(CORES, [second])
    assert not isinstance(result, Refusal), result
    assert handoff.annotation_updates() == []  # still unsure: which call was whose
    handoff.reconcile([HeldDevices(PodKey("ns/a"), "main", UnitKind.CORES, tuple(second))])
    assert handoff.annotation_updates() == [(PodKey("ns/a"), '["main"]')]  # the kubelet says


def test_gang_members_with_init_containers_are_planned_as_the_kubelet_reuses(
    harness: Harness,
) -> None:
    """Two members, each an init and an app container of 40 cores, on one GPU: charged 40 each
    (the app container reuses the init container's devices) they fit; charged 80 they would
    not."""
    annotations = {"vgpu.io/gang-name": "job", "vgpu.io/gang-size": "2"}
    for i in range(2):
        raw = make_pod(f"job-{i}", cores=40, annotations=dict(annotations))
        raw["spec"]["initContainers"] = [{"name": "init", "resources": {"limits": {CORES: "40"}}}]
        harness.put(raw)
    harness.put(make_node("n1", gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    out = wire.filter(harness.pod("job-0"), ["n1"])
    assert out["NodeNames"] == ["n1"], out
    for i in range(2):
        held = daemon.cache.ledger.holding(PodKey(f"default/job-{i}"))
        assert held is not None and held.phase is Phase.RESERVED
        gpus = {c.name: {s.uuid for s in c.shares} for c in held.assignment.containers}
        assert gpus["init"] == gpus["main"]
    assert daemon.cache.node_states["n1"].free_cores == [20]


def test_a_refusal_fails_only_a_pod_that_could_have_made_the_call() -> None:
    """After a kubelet restart the kubelet admits pods again in creation order, so another
    pod's call can be refused while A is part-way through. A's next container asks 20 cores,
    the refused call 30: A was not the caller and is still admitted afterwards."""
    a = pod("a", [("one", 10, 0, "G0"), ("two", 20, 0, "G0")])
    handoff, policy, _ = agent(a)
    assert not isinstance(policy.allocate(CORES, [ids("G0", "c", 10)]), Refusal)
    assert isinstance(policy.allocate(CORES, [ids("G3", "c", 30)]), Refusal)  # someone else's
    result = policy.allocate(CORES, [ids("G0", "c", 20, start=10)])
    assert not isinstance(result, Refusal), result
    assert handoff.admitted_containers(PodKey("ns/a")) == ["one", "two"]


def test_calls_matched_through_an_unsure_attribution_are_unsure() -> None:
    """Identical gang members a and b (init 10 cores, then 30) on one GPU. a's init call may be
    taken for b's; a's next call (30) then matches only b's main container, because of that
    guess. b must not be reported admitted: the extender would lift invariant I for it and bind
    a confusable pod whose grant b's real call would then receive."""
    a = pod("a", [("main", 30, 0, "G0")], [("init", 10, 0, "G0")])
    b = pod("b", [("main", 30, 0, "G0")], [("init", 10, 0, "G0")])
    handoff, policy, _ = agent(a, b)
    assert not isinstance(policy.allocate(CORES, [ids("G0", "c", 10)]), Refusal)
    assert not isinstance(policy.allocate(CORES, [ids("G0", "c", 30)]), Refusal)
    reported = dict(handoff.annotation_updates())
    assert all(value == "[]" for value in reported.values()), reported
    # The other member's calls come; the kubelet's record (reconcile) settles who holds what.
    assert not isinstance(policy.allocate(CORES, [ids("G0", "c", 10, start=30)]), Refusal)
    assert not isinstance(policy.allocate(CORES, [ids("G0", "c", 30, start=40)]), Refusal)
    assert dict(handoff.annotation_updates()) == {}
    held = [
        HeldDevices(PodKey("ns/a"), "init", UnitKind.CORES, tuple(ids("G0", "c", 10))),
        HeldDevices(PodKey("ns/a"), "main", UnitKind.CORES, tuple(ids("G0", "c", 30))),
        HeldDevices(PodKey("ns/b"), "init", UnitKind.CORES, tuple(ids("G0", "c", 10, start=30))),
        HeldDevices(PodKey("ns/b"), "main", UnitKind.CORES, tuple(ids("G0", "c", 30, start=40))),
    ]
    handoff.reconcile(held)
    reported = dict(handoff.annotation_updates())
    assert reported == {
        PodKey("ns/a"): '["init","main"]',
        PodKey("ns/b"): '["init","main"]',
    }, reported


def test_an_unsure_pod_is_not_failed_by_anothers_refusal() -> None:
    """a and b: 25 cores + 1 memory block on G0, the same grant. b's memory call is taken for
    a's (unsure); b's cores call carries IDs on several GPUs (the kubelet ignored the
    preference) and is refused, failing b. a's progress was b's: a must still be admitted."""
    a = pod("a", [("main", 25, 1, "G0")])
    b = pod("b", [("main", 25, 1, "G0")])
    handoff, policy, _ = agent(a, b)
    assert not isinstance(policy.allocate(MEMORY, [ids("G0", "m", 1)]), Refusal)
    spread = ids("G1", "c", 10) + ids("G2", "c", 15)
    assert isinstance(policy.allocate(CORES, [spread]), Refusal)
    handoff.forget(PodKey("ns/b"), "uid-b")  # the kubelet failed b; the watch shows it
    assert not isinstance(policy.allocate(MEMORY, [ids("G0", "m", 1, start=1)]), Refusal)
    assert not isinstance(policy.allocate(CORES, [ids("G0", "c", 25)]), Refusal)
