"""End to end: extender, node agents, kubelet stand-ins and a fake API server in one process tree.

A mixed workload is scheduled through the extender's HTTP protocol the way kube-scheduler does
it and admitted through each node's device plugins the way the kubelet does it. Every container
must then see exactly the GPUs its signed assignment and the extender's ledger name, no GPU may
be over-committed in any agent's view, and a gang that cannot fit must have no member bound.
"""

from __future__ import annotations

from collections import Counter

from tests.e2e.cluster import MEMORY, Cluster
from tests.e2e.conftest import ClusterFactory
from tests.e2e.driver import Admission, Outcome, admit, gpu_asks, make_pod, run
from tests.waiting import wait_until
from vgpu.api.assignment import decode
from vgpu.core.ids import PodKey
from vgpu.core.model import Assignment, Phase
from vgpu.node.devices import UnitKind

NODES = {"node-a": "4xA100-SXM4-80GB", "node-b": "2xT4", "node-c": "4xV100-SXM2-32GB"}
MIB_PER_BLOCK = 256
LEGACY_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LEGACY_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"


def _gang(name: str, size: int) -> dict[str, str]:
    return {LEGACY_NAME: name, LEGACY_MIN: str(size)}


def _workload(cluster: Cluster) -> list[str]:
    pods = [
        make_pod("t4", containers=[("main", 50, 0)], annotations={"vgpu.io/gpu-type": "T4"}),
        make_pod("shared-30", containers=[("main", 30, 16)]),
        make_pod("whole-2", containers=[("main", 200, 0)]),
        *(make_pod(f"quarter-{i}", containers=[("main", 25, 0)]) for i in range(4)),
        make_pod(
            "multi",
            init=[("setup", 20, 0)],
            containers=[("a", 40, 8), ("b", 40, 0)],
        ),
        make_pod("cpu-only", cpu="2"),
        make_pod("tf-ps", cpu="2", labels=_gang("tf", 4)),
        *(
            make_pod(f"tf-worker-{i}", containers=[("main", 100, 0)], labels=_gang("tf", 4))
            for i in range(3)
        ),
        *(
            make_pod(f"huge-{i}", containers=[("main", 400, 0)], labels=_gang("huge", 3))
            for i in range(3)
        ),
    ]
    for pod in pods:
        cluster.put(pod)
    return [p["metadata"]["name"] for p in pods]


def _assignment(cluster: Cluster, name: str) -> Assignment:
    text = cluster.assignment_text(name)
    assert text is not None, f"{name} has no vgpu.io/assignment"
    return decode(text)


def _check_container_sees_its_gpus(cluster: Cluster, adm: Admission) -> None:
    assignment = _assignment(cluster, adm.pod)
    assert assignment.node == adm.node == cluster.pod(adm.pod)["spec"]["nodeName"]
    by_name = {c.name: c for c in assignment.containers}
    assert set(adm.envs) == set(by_name), adm.pod
    for container, envs in adm.envs.items():
        shares = by_name[container].shares
        uuids = {str(s.uuid) for s in shares}
        visible = envs["CUDA_VISIBLE_DEVICES"].split(",")
        assert "NVIDIA_VISIBLE_DEVICES" not in envs, (adm.pod, container)
        assert set(visible) == uuids, (adm.pod, container, envs, uuids)
        cores_by_gpu = dict(zip(visible, envs["VGPU_CORES"].split(","), strict=True))
        assert cores_by_gpu == {str(s.uuid): str(s.cores) for s in shares}
        for resource, ids in adm.ids[container].items():
            assert {i.split("::")[0] for i in ids} == uuids, (adm.pod, container, resource)
            if resource == MEMORY:
                assert envs["VGPU_MEMORY_GPUS"].split(",") == sorted(uuids, key=visible.index)


def _check_invariant_i(cluster: Cluster, outcome: Outcome) -> None:
    """Pods bound in one round were pending together: on one node, no two containers of
    different pods with an equal ask may have been assigned different GPUs."""
    asks: dict[tuple[str, int, str, int], list[tuple[str, frozenset[str]]]] = {}
    for name, round_no in outcome.bound_in.items():
        if cluster.assignment_text(name) is None:
            continue
        assignment = _assignment(cluster, name)
        blocks = {c: size for c, r, size in gpu_asks(cluster.pod(name)) if r == MEMORY}
        for c in assignment.containers:
            gpus = frozenset(str(s.uuid) for s in c.shares)
            cores = sum(s.cores for s in c.shares)
            for kind, size in (("cores", cores), ("memory", blocks.get(c.name, 0))):
                if size:
                    key = (assignment.node, round_no, kind, size)
                    asks.setdefault(key, []).append((name, gpus))
    for where, entries in asks.items():
        for pod, gpus in entries:
            rivals = [p for p, g in entries if p != pod and g != gpus]
            assert not rivals, f"{pod} confusable with {rivals} ({where})"


def _check_ledger_matches_pods(cluster: Cluster, bound: list[str]) -> None:
    assert cluster.extender is not None
    with cluster.extender.cache.atomic():
        ledger = cluster.extender.cache.ledger
        for name in bound:
            held = ledger.holding(PodKey(f"default/{name}"))
            assert held is not None and held.phase is Phase.BOUND, name
            if cluster.assignment_text(name) is None:  # CPU-only: CPU and memory, no GPU
                assert held.assignment.shares == (), name
            else:
                assert held.assignment == _assignment(cluster, name), name


def _check_no_overcommit(cluster: Cluster) -> None:
    """In every agent's view and in the extender's, no GPU holds more than it has, and the
    two views agree GPU by GPU."""
    assert cluster.extender is not None
    for box in cluster.nodes.values():
        handoff = box.agent.handoff
        with cluster.extender.cache.atomic():
            state = cluster.extender.cache.node_state(box.name)
            assert state is not None
            free = {str(g.uuid): state.free_cores[pos] for pos, g in enumerate(state.gpus)}
        inventory = {g.uuid: g for g in box.agent.inventory.gpus}  # type: ignore[union-attr]
        for uuid in box.gpus:
            cores = handoff.reserved(uuid, UnitKind.CORES, MIB_PER_BLOCK)
            blocks = handoff.reserved(uuid, UnitKind.MEMORY, MIB_PER_BLOCK)
            assert 0 <= cores <= 100, (box.name, uuid, cores)
            assert blocks <= inventory[uuid].memory_mib // MIB_PER_BLOCK, (box.name, uuid)
            assert free[uuid] == 100 - cores, (box.name, uuid, free[uuid], cores)
        held = Counter(i for ids in box.kubelet.allocated.values() for i in ids)
        assert not [i for i, n in held.items() if n > 1]
        assert box.agent.mismatches == []


def test_mixed_workload_lands_on_exactly_the_assigned_gpus(make_cluster: ClusterFactory) -> None:
    cluster, driver = make_cluster(NODES)
    names = _workload(cluster)
    outcome: Outcome = run(cluster, driver, names)

    huge = [n for n in names if n.startswith("huge-")]
    assert set(outcome.unplaced) == set(huge), {n: a for n, a in outcome.unplaced.items()}
    for name in huge:
        assert "nodeName" not in cluster.pod(name)["spec"]
        reasons = outcome.unplaced[name].reasons
        assert reasons and all("only" in r and "of 3 members fit" in r for r in reasons.values())
    refused = {n: a.refusal for n, a in outcome.admissions.items() if a.refusal}
    assert refused == {}

    bound = [n for n in names if n not in huge]
    assert sorted(outcome.admissions) == sorted(bound)
    for name in bound:
        if cluster.assignment_text(name) is None:
            assert name in ("cpu-only", "tf-ps") and outcome.admissions[name].envs == {}
            continue
        _check_container_sees_its_gpus(cluster, outcome.admissions[name])
        assert cluster.admitted(name) == sorted(outcome.admissions[name].envs), name
    assert outcome.admissions["t4"].node == "node-b"
    assert outcome.admissions["multi"].envs["setup"]["VGPU_CORES"] == "20"
    memory = outcome.admissions["shared-30"].envs["main"]
    assert memory["VGPU_MEMORY_LIMIT_MIB"] == str(16 * MIB_PER_BLOCK)
    assert memory["VGPU_MEMORY_BLOCKS"] == "16"
    gang_nodes = {outcome.admissions[f"tf-worker-{i}"].node for i in range(3)}
    assert gang_nodes <= set(NODES)

    _check_invariant_i(cluster, outcome)
    _check_ledger_matches_pods(cluster, bound)
    _check_no_overcommit(cluster)
    assert cluster.extender is not None
    with cluster.extender.cache.atomic():
        held = {h.assignment.pod for h in cluster.extender.cache.ledger.holdings()}
    assert not any(PodKey(f"default/{n}") in held for n in huge)


def test_kubelet_ignoring_the_preference_is_refused_never_swapped(
    make_cluster: ClusterFactory,
) -> None:
    cluster, driver = make_cluster({"node-a": "4xA100-SXM4-80GB"})
    gpus = cluster.nodes["node-a"].gpus
    low, high = min(gpus), max(gpus)  # the kubelet's own choice takes the lowest device IDs
    cluster.put(make_pod("other", containers=[("main", 40, 0)], annotations=_pin(low)))
    cluster.put(make_pod("victim", containers=[("main", 30, 0)], annotations=_pin(high)))
    attempts = driver.round(["other", "victim"])
    assert {n: a.node for n, a in attempts.items()} == {"other": "node-a", "victim": "node-a"}

    ignored = admit(cluster, "victim", use_preferred=False)
    assert low in ignored.refusal and "no pending container asks 30 cores" in ignored.refusal
    assert "default/other/main (pending, 40 cores)" in ignored.refusal
    assert ignored.envs == {} and cluster.admitted("victim") is None

    good = admit(cluster, "other")  # the other pod is untouched: its own GPU, its own grant
    assert not good.refusal and good.envs["main"]["CUDA_VISIBLE_DEVICES"] == low
    assert wait_until(lambda: cluster.admitted("other") == ["main"], 10.0, what="other admitted")

    # The kubelet failed the victim; its controller recreates it, and this time it works.
    wait_until(lambda: _released(cluster, "victim"), 10.0, what="victim released by the extender")
    cluster.delete("victim")
    cluster.put(make_pod("victim", containers=[("main", 30, 0)], annotations=_pin(high)))
    assert driver.round(["victim"])["victim"].node == "node-a"
    again = admit(cluster, "victim")
    assert not again.refusal and again.envs["main"]["CUDA_VISIBLE_DEVICES"] == high
    _check_container_sees_its_gpus(cluster, again)
    _check_no_overcommit(cluster)


def _pin(uuid: str) -> dict[str, str]:
    return {"vgpu.io/gpu-uuid": uuid}


def _released(cluster: Cluster, name: str) -> bool:
    assert cluster.extender is not None
    with cluster.extender.cache.atomic():
        return cluster.extender.cache.ledger.holding(PodKey(f"default/{name}")) is None
