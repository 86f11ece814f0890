"""The extender leader's queue release loop against the fake API server: held pods
are released in fair order only where they fit whole, gangs whole or not at all, through a JSON
patch that tests the gate list; a second leader releases nothing twice; reclaim evicts through
the Eviction API so a PodDisruptionBudget holds; bad configuration releases nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import KEY, Harness
from tests.extender.lease_stub import Lease
from tests.waiting import wait_until
from vgpu.adapters.kube.calls import KubeApi
from vgpu.core.ids import PodKey
from vgpu.core.model import Phase
from vgpu.core.policy.specs import PolicySpec
from vgpu.daemons.extender.daemon import DaemonConfig, ExtenderDaemon
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.gangs.record import GANGS_ANNOTATION, encode
from vgpu.extender.queues.release_loop import REFUSED_S, QueueReleaser
from vgpu.extender.queues.release_pass import QueueIndex
from vgpu.extender.queues.strict_holds import LeaseNotes
from vgpu.extender.resolve import DEFAULT_POLICY

Obj = dict[str, Any]
GATE = [{"name": "vgpu.io/queue"}]


def _daemon(
    harness: Harness, *, queues: bool = False, policy: PolicySpec = DEFAULT_POLICY
) -> ExtenderDaemon:
    client = harness.server.api_client()
    harness.clients.append(client)
    config = DaemonConfig(
        key=KEY,
        extender=ExtenderConfig(gang_timeout=60.0, bind_wait=0.5, policy=policy),
        host="127.0.0.1",
        port=0,
        watch_timeout=30,
        sweep_interval=3600,
        retry_delay=0.05,
        queues=("vgpu", "vgpu-queues") if queues else None,
    )
    daemon = ExtenderDaemon(KubeApi(client), config, clock=harness.clock)
    daemon.start()
    harness.daemons.append(daemon)
    assert daemon.wait_ready(10), daemon.why_not_ready()
    return daemon


def _releaser(
    daemon: ExtenderDaemon,
    wall: float = 2_000_000_000.0,
    notes: LeaseNotes | None = None,
    may_act: Callable[[], str | None] = lambda: None,
) -> QueueReleaser:
    """A release loop driven pass by pass: its index is rebuilt from a listing each pass."""
    index = QueueIndex(daemon.extender.queue_parts())
    return QueueReleaser(
        daemon.api,
        index,
        namespace="vgpu",
        config_map="vgpu-queues",
        may_act=may_act,
        wall=lambda: wall,
        notes=notes,
    )


def _pass(releaser: QueueReleaser) -> list[str]:
    releaser.index.replace_all(releaser.api.list_pods().items)
    return [q.pod.key.split("/")[1] for q in releaser.pass_once().release]


def _config(harness: Harness, text: str) -> None:
    harness.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "vgpu-queues", "namespace": "vgpu"},
            "data": {"queues.json": text},
        }
    )


def ns_of(queue: str) -> str:
    """The namespace the tests bind a queue to: `default` for queue `a`, else the queue's name."""
    return "default" if queue == "a" else queue


def _queues(harness: Harness, *queues: Obj, **top: Any) -> None:
    """Configure `queues`; one bound to no namespace is bound to `ns_of` its name."""
    bound = [
        q
        if "namespaces" in q or "namespaceSelector" in q
        else {**q, "namespaces": [ns_of(q["name"])]}
        for q in queues
    ]
    _config(harness, json.dumps({"queues": bound, **top}))


def _held(harness: Harness, name: str, queue: str, cores: int, **kw: Any) -> Obj:
    """A pod of `queue` (in its namespace, `ns_of`) held by the gate, as the chart makes it."""
    labels = {"vgpu.io/queue": queue, **kw.pop("labels", {})}
    kw.setdefault("namespace", ns_of(queue))
    pod = make_pod(name, cores=cores, labels=labels, **kw)
    pod["spec"]["schedulingGates"] = list(GATE)
    return harness.put(pod)


def _pod(harness: Harness, name: str) -> Obj:
    """The pod named `name`, in whichever namespace (names are unique in these tests)."""
    (found,) = [p for p in harness.store.objects("Pod") if p["metadata"]["name"] == name]
    return found


def _gated(harness: Harness, name: str) -> bool:
    return bool(_pod(harness, name)["spec"].get("schedulingGates"))


def _watched(daemon: ExtenderDaemon, *names: str) -> None:
    """Wait for the cache to show the pods `names` (`NS/NAME`, or `NAME` in `default`)."""
    keys = [PodKey(n if "/" in n else f"default/{n}") for n in names]
    wait_until(lambda: all(daemon.cache.pod(k) for k in keys))


def test_held_pods_are_released_fairly_where_they_fit_and_their_place_is_held(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a", "weight": 1}, {"name": "b", "weight": 3})
    for i in range(4):
        _held(harness, f"a{i}", "a", 50)
        _held(harness, f"b{i}", "b", 50)
    _watched(daemon, *[f"{ns_of(q)}/{q}{i}" for q in "ab" for i in range(4)])
    released = _pass(_releaser(daemon))
    assert sorted(released) == ["a0", "b0", "b1", "b2"]  # 200 cores: deserved 50 / 150
    for name in ("a0", "b0", "b1", "b2"):
        assert not _gated(harness, name)
        held = daemon.cache.holding(PodKey(f"{ns_of(name[0])}/{name}"))
        assert held is not None and held.phase is Phase.RESERVED
    assert all(_gated(harness, n) for n in ("a1", "a2", "a3", "b3"))
    events = [e for e in harness.store.objects("Event") if e["reason"] == "VgpuQueued"]
    told = {e["involvedObject"]["name"] for e in events}
    assert told == {"a1", "a2", "a3", "b3"}
    assert "does not fit whole on any GPU now" in events[0]["message"]
    assert "queue" in events[0]["message"] and "deserved" in events[0]["message"]
    wire = Wire(daemon.port)
    assert wire.filter(harness.pod("b0", "b"), ["n1"])["NodeNames"] == ["n1"]


def test_a_memory_cap_counts_the_memory_cores_only_pods_are_given(harness: Harness) -> None:
    """Half a GPU of 80 GiB is given 40 GiB (160 units of 256 MiB) though the pod asks no
    memory: a queue capped at 160 units gets one such pod, not four."""
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a", "cap": {"memory": 160}})
    for i in range(4):
        _held(harness, f"a{i}", "a", 50)
    _watched(daemon, *[f"default/a{i}" for i in range(4)])
    releaser = _releaser(daemon)
    assert _pass(releaser) == ["a0"]
    assert releaser.last.standing["a"].allocated == (50, 160)
    assert "queue a is at its cap of 160 memory units" in releaser.last.waiting["default/a1"]


def test_a_placed_pod_counts_the_memory_it_holds_on_its_own_gpu(harness: Harness) -> None:
    """On a 16 GiB and an 80 GiB GPU, a 50-core pod placed on the 16 GiB one holds 8 GiB (32
    units): once placed its queue counts those, not the 160 units it would be given on the
    largest GPU, so a second such pod (counted 160 while it waits) fits a 200-unit cap."""
    small = make_node("small", gpus=1, memory_mib=16384)
    small["metadata"]["labels"] = {"pool": "small"}
    harness.put(small)
    harness.put(make_node("big", gpus=1))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a", "cap": {"memory": 200}})
    _held(harness, "a0", "a", 50)
    pinned = _pod(harness, "a0")
    pinned["spec"]["nodeSelector"] = {"pool": "small"}
    harness.put(pinned)
    _held(harness, "a1", "a", 50)
    _watched(daemon, "a0", "a1")
    releaser = _releaser(daemon)
    assert _pass(releaser) == ["a0"]  # 160 + 160 units counted: a1 waits at the cap
    held = daemon.cache.holding(PodKey("default/a0"))
    assert held is not None and held.assignment.node == "small"
    assert _pass(releaser) == ["a1"]  # a0 now counts the 32 units it holds: 32 + 160
    assert releaser.last.standing["a"].allocated == (100, 192)


def test_a_replica_that_stopped_leading_exports_no_queue_standing(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a", "weight": 1})
    _held(harness, "a0", "a", 50)
    _watched(daemon, "default/a0")
    why_not: list[str | None] = [None]
    releaser = _releaser(daemon, may_act=lambda: why_not[0])
    assert _pass(releaser) == ["a0"]
    assert set(releaser.figures().standing) == {"a"}
    why_not[0] = "another replica leads"
    figures = releaser.figures()
    assert figures.standing == {} and figures.released == 1


def test_an_unlabelled_pod_is_never_touched_and_events_are_not_repeated(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    plain = make_pod("plain", cores=50)
    plain["spec"]["schedulingGates"] = [{"name": "someone.else/gate"}]
    harness.put(plain)
    _held(harness, "big", "a", 100)
    _held(harness, "other", "a", 100)
    _watched(daemon, "plain", "big", "other")
    releaser = _releaser(daemon)
    assert _pass(releaser) == ["big"]
    assert _pass(releaser) == []
    assert harness.pod("plain")["spec"]["schedulingGates"] == [{"name": "someone.else/gate"}]
    events = [e for e in harness.store.objects("Event") if e["reason"] == "VgpuQueued"]
    assert [e["involvedObject"]["name"] for e in events] == ["other"]  # once, not per pass


def test_a_gang_is_released_whole_in_one_pass_and_none_when_only_part_fits(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_node("n2", gpus=1))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "3"}
    for i in range(3):
        _held(harness, f"g{i}", "a", 100, annotations=dict(gang))
    _watched(daemon, "g0", "g1", "g2")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []  # two GPUs for three whole-GPU members: none released
    assert all(_gated(harness, f"g{i}") for i in range(3))
    harness.put(make_node("n3", gpus=1))
    wait_until(lambda: len(daemon.cache.node_states) == 3)
    assert sorted(_pass(releaser)) == ["g0", "g1", "g2"]
    with daemon.cache.atomic():
        holdings = [daemon.cache.ledger.holding(PodKey(f"default/g{i}")) for i in range(3)]
    assert all(h is not None and h.phase is Phase.RESERVED and h.gang for h in holdings)
    assert daemon.cache.gangs.deadline(holdings[0].gang) is not None  # type: ignore[union-attr,arg-type]


def test_a_new_leader_releases_nothing_twice_and_finishes_a_gang_cut_short(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=4))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    _held(harness, "p0", "a", 100)
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}
    for i in range(2):
        _held(harness, f"g{i}", "a", 100, annotations=dict(gang))
    # The old leader recorded the gang on its Lease, removed g0's gate and died before g1's.
    uids = frozenset(harness.pod(f"g{i}")["metadata"]["uid"] for i in range(2))
    lease = Lease()
    lease.carry(GANGS_ANNOTATION, encode({"default/g": uids}))
    g0 = harness.pod("g0")
    g0["spec"]["schedulingGates"] = []
    harness.put(g0)
    _watched(daemon, "p0", "g0", "g1")
    first = _releaser(daemon, notes=lease)
    assert sorted(_pass(first)) == ["g1", "p0"]
    patches = [r for r in harness.server.requests if r.method == "PATCH"]
    second = _releaser(daemon, notes=lease)  # the next leader, from a fresh listing
    assert _pass(second) == []
    assert [r for r in harness.server.requests if r.method == "PATCH"] == patches


def test_a_gate_list_changed_since_it_was_read_is_not_patched(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    _held(harness, "p", "a", 50)
    _watched(daemon, "p")
    releaser = _releaser(daemon)
    releaser.index.replace_all(releaser.api.list_pods().items)
    pod = harness.pod("p")
    pod["spec"]["schedulingGates"] = [*GATE, {"name": "late.example/gate"}]
    harness.put(pod)  # changed after the pass read it
    releaser.pass_once()
    assert harness.pod("p")["spec"]["schedulingGates"] == [*GATE, {"name": "late.example/gate"}]


def _running(
    harness: Harness,
    daemon: ExtenderDaemon,
    wire: Wire,
    name: str,
    queue: str,
    cores: int,
    started: str = "2030-01-01T00:00:00Z",
    *,
    on: str = "n1",
) -> None:
    """Schedule and bind a queued pod (on node `on`), then play its node agent (admitted,
    running)."""
    labels = {"vgpu.io/queue": queue, "app": name}
    harness.put(make_pod(name, cores=cores, labels=labels, namespace=ns_of(queue)))
    node, out = wire.schedule(_pod(harness, name), [on])
    assert node == on, out
    pod = _pod(harness, name)
    pod["status"] = {"phase": "Running", "startTime": started}
    pod["metadata"]["annotations"]["vgpu.io/admitted"] = json.dumps(["main"])
    harness.put(pod)
    key = PodKey(f"{ns_of(queue)}/{name}")

    def admitted() -> bool:  # the watch saw the bind (its node) and then the admission
        spec = daemon.cache.pod(key)
        bound = spec is not None and spec.node == on
        return bound and all(key not in pods for pods in daemon.cache.pending.values())

    wait_until(admitted)


def _budget(harness: Harness, app: str, allowed: int) -> None:
    harness.put(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": f"pdb-{app}", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": 0},
            "status": {"disruptionsAllowed": allowed},
        }
    )


def test_reclaim_evicts_through_the_eviction_api_and_a_budget_holds(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    wire = Wire(daemon.port)
    _queues(
        harness,
        {"name": "a", "weight": 1},
        {"name": "b", "weight": 1, "reclaim": True},
        minRuntimeSeconds=60,
    )
    _running(harness, daemon, wire, "old", "a", 100)
    _running(harness, daemon, wire, "young", "a", 100, "2033-05-18T03:00:00Z")
    _held(harness, "want", "b", 100)
    _budget(harness, "young", 0)
    _budget(harness, "old", 0)
    wait_until(lambda: daemon.cache.holding(PodKey("default/young")) is not None)
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    evictions = [r for r in harness.server.requests if r.path.endswith("/young/eviction")]
    assert evictions  # asked, and refused by the budget (429): nothing deleted
    assert harness.store.get("Pod", "default", "young") is not None
    assert harness.store.get("Pod", "default", "old") is not None
    _budget(harness, "young", 1)
    later = _releaser(daemon, wall=2_000_000_000.0 + REFUSED_S)  # a refusal is spared a while
    assert _pass(later) == []
    assert later.evicted_total == 1
    assert harness.store.get("Pod", "default", "old") is not None
    wait_until(lambda: harness.store.get("Pod", "default", "young") is None)


def test_reclaim_for_a_pod_evicts_on_the_node_needing_fewest(harness: Harness) -> None:
    """Youngest first over the cluster would evict n1's two young pods to empty its GPU; n2's
    one older pod frees a GPU alone, so only it is evicted."""
    harness.put(make_node("n1", gpus=1))
    harness.put(make_node("n2", gpus=1))
    daemon = _daemon(harness)
    wire = Wire(daemon.port)
    _queues(
        harness, {"name": "a"}, {"name": "b", "weight": 3, "reclaim": True}, minRuntimeSeconds=0
    )
    _running(harness, daemon, wire, "young0", "a", 50, "2033-05-18T03:00:00Z")
    _running(harness, daemon, wire, "young1", "a", 50, "2033-05-18T03:00:01Z")
    _running(harness, daemon, wire, "old", "a", 100, "2031-01-01T00:00:00Z", on="n2")
    _held(harness, "want", "b", 100)
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 1
    wait_until(lambda: harness.store.get("Pod", "default", "old") is None)
    assert harness.store.get("Pod", "default", "young0") is not None
    assert harness.store.get("Pod", "default", "young1") is not None


def test_a_victim_set_is_evicted_whole_or_not_at_all(harness: Harness) -> None:
    """Two pods share the GPU the waiting job needs; the budget of one refuses: evicting the other
    alone would free nothing the job can use, so neither is evicted (a dry run asks first). The
    pod on the other GPU started 20 s ago, under the minimum runtime: no victim."""
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    wire = Wire(daemon.port)
    _queues(
        harness, {"name": "a"}, {"name": "b", "weight": 3, "reclaim": True}, minRuntimeSeconds=60
    )
    _running(harness, daemon, wire, "whole", "a", 100, "2033-05-18T03:33:00Z")
    _running(harness, daemon, wire, "free", "a", 50, "2031-01-01T00:00:00Z")
    _running(harness, daemon, wire, "kept", "a", 50, "2033-05-18T03:00:00Z")
    _budget(harness, "kept", 0)
    _held(harness, "want", "b", 100)
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    evictions = [r.path.rsplit("/", 2)[1] for r in harness.server.requests if "eviction" in r.path]
    assert sorted(set(evictions)) == ["free", "kept"]  # both asked (a dry run) ...
    assert releaser.evicted_total == 0  # ... and neither evicted
    assert harness.store.get("Pod", "default", "free") is not None


def old_and_young(harness: Harness) -> ExtenderDaemon:
    """Two GPUs, held by queue a's pods `old` and `young`; queue b may reclaim at once."""
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    wire = Wire(daemon.port)
    _queues(harness, {"name": "a"}, {"name": "b", "reclaim": True}, minRuntimeSeconds=0)
    _running(harness, daemon, wire, "old", "a", 100)
    _running(harness, daemon, wire, "young", "a", 100, "2033-05-18T03:00:00Z")
    return daemon


def test_a_refused_victim_is_spared_and_reclaim_moves_on_to_others(harness: Harness) -> None:
    """The youngest pod's budget refuses: later passes pick other victims rather than asking
    for the same refused pod forever (a stall the real cluster showed)."""
    daemon = old_and_young(harness)
    _budget(harness, "young", 0)
    _held(harness, "want", "b", 100)
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 0
    assert _pass(releaser) == []
    assert releaser.evicted_total == 1
    wait_until(lambda: harness.store.get("Pod", "default", "old") is None)
    assert harness.store.get("Pod", "default", "young") is not None


def test_malformed_configuration_releases_nothing(harness: Harness, caplog: Any) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = _daemon(harness)
    _config(harness, json.dumps({"queues": [{"name": "a", "weight": 0}]}))
    _held(harness, "p", "a", 50)
    _watched(daemon, "p")
    assert _pass(_releaser(daemon)) == []
    assert _gated(harness, "p")
    assert "queues[0].weight: 0 must be a whole number" in caplog.text


def test_the_leader_loop_releases_from_its_watch(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    _queues(harness, {"name": "a"}, intervalSeconds=0.5)
    daemon = _daemon(harness, queues=True)
    _held(harness, "p", "a", 50)
    wait_until(lambda: not _gated(harness, "p"), timeout=15)
    assert daemon.queues is not None
    releaser = daemon.queues
    wait_until(lambda: releaser.released_total == 1)  # counted once the patch has returned
    metrics = daemon.metrics.exposition().decode()
    assert 'vgpu_extender_queue_allocated{queue="a",resource="cores"} 50.0' in metrics


def test_reclaim_asks_move_past_a_job_no_victims_can_help(harness: Harness) -> None:
    """The oldest waiting job asks two GPUs on one node of a cluster of one-GPU nodes: no
    eviction lets it in. With one ask per pass, the next pass asks for the job behind it instead
    of the same one again (`vgpu.core.queues.reclaim_asks`), and that one gets its victim."""
    harness.put(make_node("n1", gpus=1))
    harness.put(make_node("n2", gpus=1))
    daemon = _daemon(harness)
    wire = Wire(daemon.port)
    _queues(
        harness,
        {"name": "a"},
        {"name": "b", "weight": 3, "reclaim": True},
        minRuntimeSeconds=0,
        reclaimPerPass=1,
    )
    _running(harness, daemon, wire, "a0", "a", 100)
    _running(harness, daemon, wire, "a1", "a", 100, on="n2")
    _held(harness, "b0-huge", "b", 200)
    _held(harness, "b1-small", "b", 100)
    _watched(daemon, "b/b0-huge", "b/b1-small")
    wall = [2_000_000_000.0]
    releaser = _releaser(daemon)
    releaser._wall = lambda: wall[0]
    assert _pass(releaser) == []
    assert releaser.evicted_total == 0  # asked for b0-huge: nothing would let it in
    wall[0] += 10
    assert _pass(releaser) == []
    assert releaser.evicted_total == 1  # asked for b1-small
    wait_until(lambda: len(harness.store.objects("Pod")) == 3)
