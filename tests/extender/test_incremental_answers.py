"""The incremental filter and prioritize answer exactly what a from-scratch evaluation answers.

A random run of watch events (nodes come and go, pods are bound with or without a signed
assignment, admitted, finished, deleted), ledger assumptions and releases as the binder makes
them, and filter/prioritize requests that mostly repeat the last node list (the patched reply)
and sometimes name another subset or order. After every request the reply is compared with the
slow path over the same cache, and with a fresh extender over a cache rebuilt from the same
objects (`replace_all`, plus the assumptions in flight): the answer sets must never be stale.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from tests.extender.builders import ledger_of, make_node
from tests.pods import container
from tests.pods import pod_obj as build_pod
from vgpu.api.assignment import binding_annotations
from vgpu.core.ids import NodeName
from vgpu.core.model import Assignment
from vgpu.core.policy.specs import parse_policy
from vgpu.core.scheduler import MAX_EXTENDER_SCORE
from vgpu.extender.cache.cluster import ClusterCache, canonical
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.service import Extender
from vgpu.extender.wire import ExtenderArgs, FilterResult, encode_priorities

Obj = dict[str, Any]
KEY = b"views-key"
UNIT = 256
H100 = "NVIDIA H100 80GB HBM3"
GPU_NODES = ("n0", "n1", "n2", "n3", "n4", "n5")
NODE_POOL = (*GPU_NODES, "bare")
"""`bare` has no GPUs and a problem that flips between a missing and a broken inventory."""

SHAPES: tuple[tuple[tuple[int, ...], int | None, str], ...] = (
    ((25,), None, "1"),
    ((25,), None, "1"),
    ((50,), None, "1"),
    ((50,), 24, "2"),
    ((100,), None, "3"),
    ((200,), None, "4"),
    ((30, 30), 8, "1"),
    ((0,), None, "2"),
)
"""(cores per container, memory blocks per GPU container, CPU) of the pods the run binds."""

PROBES: tuple[tuple[tuple[int, ...], int | None, str, dict[str, str]], ...] = (
    ((25,), None, "1", {}),
    ((50,), 24, "2", {}),
    ((30, 30), 8, "1", {}),
    ((100,), None, "1", {}),
    ((50,), None, "1", {"vgpu.io/gpu-type": "H100"}),
    ((25,), None, "1", {"vgpu.io/policy": "binpack"}),
    ((200,), None, "2", {"vgpu.io/policy": "spread"}),
    ((0,), None, "4", {}),
)
"""The pods the requests are about (never bound: their replies depend on the cluster only)."""


def pod_obj(
    name: str, cores: tuple[int, ...], blocks: int | None, cpu: str, annotations: dict[str, str]
) -> Obj:
    containers = [
        container(
            f"c{i}",
            cores=c,
            memory=blocks if c else None,
            requests={"cpu": cpu, "memory": "1Gi"},
        )
        for i, c in enumerate(cores)
    ]
    return build_pod(
        name,
        containers,
        uid=f"uid-{name}",
        labels={},
        annotations=dict(annotations),
        scheduler="default-scheduler",
        phase="Pending",
    )


def node_obj(name: str, broken: bool = False) -> Obj:
    if name == "bare":
        return make_node(name, cpu="32", inventory="{oops" if broken else False)
    i = GPU_NODES.index(name)
    return make_node(
        name,
        gpus=1 + i % 4,
        model=H100 if i % 3 == 2 else "NVIDIA A100-SXM4-80GB",
        memory_mib=16384,
        cpu=("8", "16", "64")[i % 3],
    )


class World:
    """The extender under test, the objects the watch has shown it, and its assumptions."""

    def __init__(self, feed_limit: int | None) -> None:
        self.cache = ClusterCache(key=KEY, memory_unit_mib=UNIT)
        if feed_limit is not None:  # a short feed: answer sets fall behind its trims and rebuild
            self.cache = ClusterCache(key=KEY, memory_unit_mib=UNIT, feed_limit=feed_limit)
        allowed = (parse_policy("binpack"), parse_policy("spread"))
        every = ExtenderConfig(pod_policies=allowed, filter_best=0)  # passes every node that fits
        self.ext = Extender(self.cache, config=every)
        self.narrow = {  # --filter-best N over the same cache, the policies shared
            n: Extender(self.cache, config=ExtenderConfig(pod_policies=allowed, filter_best=n))
            for n in (1, 3)
        }
        for other in self.narrow.values():
            other.policies = self.ext.policies
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[str, Obj] = {}
        self.assumed: dict[str, Assignment] = {}
        self.serial = 0
        self.last: list[str] = []
        self.probe = 0
        self.probes = [pod_obj(f"probe-{i}", *shape) for i, shape in enumerate(PROBES)]
        """The pods the requests name, shown by the watch (a request only names its pod)."""
        for obj in self.probes:
            self.cache.apply_pod("ADDED", obj)

    # -- watch events and binder steps -----------------------------------------------------
    def put_node(self, name: str, broken: bool = False) -> None:
        kind = "MODIFIED" if name in self.nodes else "ADDED"
        self.nodes[name] = node_obj(name, broken)
        self.cache.apply_node(kind, self.nodes[name])

    def delete_node(self, name: str) -> None:
        for pod, a in list(self.assumed.items()):
            if a.node == name:  # the binder's sweep gives such assumptions up
                self.release(pod)
        self.cache.apply_node("DELETED", self.nodes.pop(name))

    def new_pod(self, shape: int) -> Obj:
        self.serial += 1
        cores, blocks, cpu = SHAPES[shape]
        obj = pod_obj(f"pod-{self.serial}", cores, blocks, cpu, {})
        self.pods[obj["metadata"]["name"]] = obj
        self.cache.apply_pod("ADDED", obj)
        return obj

    def placed(self, obj: Obj, node: str) -> Assignment | None:
        spec = self.cache.parse(obj)
        if not spec.request.wants_gpu:
            return None
        a = self.ext.cache.place(spec, node, self.ext.policies.default, self.ext.scheduler)
        return canonical(a) if isinstance(a, Assignment) else None

    def bind(self, obj: Obj, node: str, a: Assignment | None, admitted: str | None) -> None:
        """The watch shows the pod bound (signed when `a` is given, admitted as said)."""
        bound = copy.deepcopy(obj)
        bound["spec"]["nodeName"] = node
        notes = bound["metadata"]["annotations"]
        if a is not None:
            notes.update(binding_annotations(a, KEY))
        if admitted is not None:
            notes["vgpu.io/admitted"] = admitted
        self.pods[bound["metadata"]["name"]] = bound
        self.cache.apply_pod("MODIFIED", bound)

    def assume(self, obj: Obj, node: str) -> None:
        a = self.placed(obj, node)
        if a is not None and ledger_of(self.cache).assume(a):
            self.assumed[obj["metadata"]["name"]] = a

    def release(self, name: str) -> None:
        a = self.assumed.pop(name)
        ledger_of(self.cache).release(a.pod)

    def admit(self, name: str, which: str) -> None:
        obj = copy.deepcopy(self.pods[name])
        obj["metadata"]["annotations"]["vgpu.io/admitted"] = which
        self.pods[name] = obj
        self.cache.apply_pod("MODIFIED", obj)

    def drop_pod(self, name: str, finished: bool) -> None:
        obj = self.pods.pop(name)
        self.assumed.pop(name, None)
        if finished:
            done = copy.deepcopy(obj)
            done["status"]["phase"] = "Succeeded"
            self.cache.apply_pod("MODIFIED", done)
        else:
            self.cache.apply_pod("DELETED", obj)

    # -- the reference ---------------------------------------------------------------------
    def rebuilt(self) -> Extender:
        """A fresh extender over a cache rebuilt from the same objects and assumptions, sharing
        the policies (their learned state is part of the question, not of the cache)."""
        cache = ClusterCache(key=KEY, memory_unit_mib=UNIT)
        cache.replace_all(list(self.nodes.values()), [*self.pods.values(), *self.probes])
        for a in self.assumed.values():
            assert ledger_of(cache).assume(a), a
        fresh = Extender(cache)
        fresh.policies = self.ext.policies
        return fresh


def reference_raw(ext: Extender, pod: Obj, names: list[str]) -> list[float | None]:
    """The policy's raw score of each named node (None: the pod cannot go there now)."""
    spec, policy, _ = ext.pods.read(pod)
    raw: list[float | None] = []
    for name in names:
        ns = ext.cache.node_states.get(name)
        ev = None if ns is None else policy.evaluate(ns, spec.request, ext.scheduler.rng)
        # where the pod would wait for another pod's admission (invariant I) it scores None
        waits = ev is not None and ext.outcome(spec, name, policy).code != "fits"
        raw.append(None if ev is None or waits else ev.score)
    return raw


def reference_scores(ext: Extender, pod: Obj, names: list[str]) -> list[int]:
    """Scores as the core scales them, from the policy's evaluation of each named node."""
    spec, _, _ = ext.pods.read(pod)
    if not spec.request.wants_gpu:
        return [0] * len(names)
    raw = reference_raw(ext, pod, names)
    known = [s for s in raw if s is not None]
    if not known:
        return [0] * len(names)
    lo, hi = min(known), max(known)
    return [
        0
        if s is None
        else MAX_EXTENDER_SCORE
        if hi == lo
        else round(MAX_EXTENDER_SCORE * (s - lo) / (hi - lo))
        for s in raw
    ]


def check_requests(world: World, probe: int, names: list[str]) -> None:
    pod = world.probes[probe]
    note(f"ask about probe {probe} {PROBES[probe]}: {names}")
    got = world.ext.filter(ExtenderArgs(pod, names))
    assert got.error == ""
    spec, policy, _ = world.ext.pods.read(pod)
    fresh = world.rebuilt()
    if spec.request.wants_gpu:
        slow = world.ext._filter_slow(spec, names, policy)
        assert got.passed == slow.passed
        assert got.failed == slow.failed
        assert got.unresolvable == slow.unresolvable
        ref = fresh._filter_slow(fresh.pods.read(pod)[0], names, policy)
        assert got.passed == ref.passed
        assert set(got.failed) == set(ref.failed)
        assert set(got.unresolvable) == set(ref.unresolvable)
    else:
        assert got.passed == names and not got.failed and not got.unresolvable
    check_narrowed(world, pod, names, got, fresh)
    for asked in (names, got.passed):  # kube-scheduler asks about the filter's survivors
        scores = world.ext.prioritize(ExtenderArgs(pod, list(asked)))
        expected = dict(zip(asked, reference_scores(fresh, pod, list(asked)), strict=True))
        assert scores.as_dict() == expected
        entries = json.loads(encode_priorities(scores))
        assert {e["Host"]: e["Score"] for e in entries} == {h: s for h, s in expected.items() if s}


def check_narrowed(
    world: World, pod: Obj, names: list[str], full: FilterResult, fresh: Extender
) -> None:
    """--filter-best N passes the first N of the full filter's survivors (in request order)
    that share the best raw score among them, and fails the same nodes for the same reasons;
    pods without vGPUs pass unnarrowed."""
    spec = world.ext.pods.read(pod)[0]
    raw = dict(zip(full.passed, reference_raw(fresh, pod, full.passed), strict=True))
    known = [s for s in raw.values() if s is not None]
    for limit, ext in world.narrow.items():
        got = ext.filter(ExtenderArgs(pod, list(names)))
        assert (got.failed, got.unresolvable) == (full.failed, full.unresolvable)
        if not spec.request.wants_gpu or len(full.passed) < 2 or not known:
            assert got.passed == full.passed
            continue
        best = [n for n in full.passed if raw[n] == max(known)]
        assert got.passed == best[:limit], (limit, raw)


OPS = (
    "node",
    "node",
    "drop-node",
    "flip-bare",
    "bind-signed",
    "bind-signed",
    "bind-signed",
    "bind-plain",
    "assume",
    "assume",
    "confirm",
    "release",
    "admit",
    "admit",
    "drop-pod",
    "ask",
    "ask",
    "ask",
    "ask",
    "ask",
)


def names_for(data: st.DataObject, world: World) -> list[str]:
    how = data.draw(st.sampled_from(("same", "same", "same", "all", "subset", "shuffled")))
    if how == "same" and world.last:
        return list(world.last)  # equal, not the same object: as decoded from a new request
    if how == "subset":
        return data.draw(st.lists(st.sampled_from((*NODE_POOL, "ghost")), unique=True))
    names = list(world.last) if how == "shuffled" else [*NODE_POOL, "ghost"]
    return data.draw(st.permutations(names))


def step(data: st.DataObject, world: World) -> None:
    op = data.draw(st.sampled_from(OPS))
    note(
        f"{op}: nodes {sorted(world.nodes)}, pods {len(world.pods)}, assumed {sorted(world.assumed)}"
    )
    present = [n for n in GPU_NODES if n in world.nodes]
    pick = st.sampled_from
    if op == "node":
        world.put_node(data.draw(pick(GPU_NODES)))
    elif op == "drop-node" and present:
        world.delete_node(data.draw(pick(present)))
    elif op == "flip-bare":
        if "bare" in world.nodes and data.draw(st.booleans()):
            world.delete_node("bare")
        else:
            world.put_node("bare", broken=data.draw(st.booleans()))
    elif op in ("bind-signed", "bind-plain") and present:
        obj = world.new_pod(data.draw(st.integers(0, len(SHAPES) - 1)))
        node = data.draw(pick(present))
        a = world.placed(obj, node) if op == "bind-signed" else None
        if op == "bind-signed" and a is None:
            return
        if a is None:  # unsigned: the pod holds CPU and memory only, when they fit
            req = world.cache.parse(obj).request
            plain = Assignment(req.key, NodeName(node), req.cpu_milli, req.memory_mib, (), req.uid)
            if world.ext.scheduler.state.can_charge(plain) is not None:
                return
        admitted = data.draw(pick((None, None, None, "true", '["c0"]', "c1")))
        world.bind(obj, node, a, admitted)
    elif op == "assume" and present:
        world.assume(world.new_pod(data.draw(st.integers(0, 4))), data.draw(pick(present)))
    elif op in ("confirm", "release") and world.assumed:
        name = data.draw(pick(sorted(world.assumed)))
        if op == "release":
            world.release(name)
        else:
            a = world.assumed.pop(name)
            admitted = data.draw(pick((None, "true", "c0")))
            world.bind(world.pods[name], a.node, a, admitted)
    elif op == "admit":
        bound = sorted(n for n, o in world.pods.items() if o["spec"].get("nodeName"))
        if bound:
            world.admit(data.draw(pick(bound)), data.draw(pick(("true", "c0", "c0,c1"))))
    elif op == "drop-pod" and world.pods:
        world.drop_pod(data.draw(pick(sorted(world.pods))), data.draw(st.booleans()))
    elif op == "ask":
        names = names_for(data, world)
        world.last = names
        if data.draw(st.integers(0, 3)) == 0:  # mostly pod after pod of one shape
            world.probe = data.draw(st.integers(0, len(PROBES) - 1))
        check_requests(world, world.probe, names)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # Shrinking a run of many steps takes minutes: the notes show the failing run instead.
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
@given(st.data(), st.sampled_from((None, None, 4, 16)))
def test_incremental_replies_equal_from_scratch_replies(
    data: st.DataObject, feed_limit: int | None
) -> None:
    world = World(feed_limit)
    for name in GPU_NODES[:4]:
        world.put_node(name)
    for _ in range(data.draw(st.integers(20, 80))):
        step(data, world)
    # Always end with a repeated request after whatever the run did last.
    if world.last:
        check_requests(world, world.probe, list(world.last))
