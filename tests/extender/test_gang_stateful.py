"""Gangs over a random run of filters, binds, admissions, deletions, rival pods, rebuilds and the
passing of time, through the extender's own filter and bind verbs (in process, over one cache):

- a gang no member of which is bound holds nothing past its deadline;
- a started gang holds past its deadline only the reservations it needs to reach min-member (a
  gang of one with a member kube-scheduler never sends once kept that member's GPU for good);
- a gang whose failing plan was held back is not planned again, and reserves nothing new, until
  its time is up;
- no GPU is ever promised more than its cores, whatever mix came before;
- a member whose filter waits for members gets no preemption either: the filter and preemption
  count a gang's members one way (`vgpu.core.gang.present`), members bound to a node nothing
  can hold them on (made with `spec.nodeName` of an unknown node) included.
- every place held is on a node the pod's nodeSelector and tolerations allow (n1 is tainted and
  only gang b tolerates it; gang c selects n3's pool): kube-scheduler asks about a pod only the
  nodes its own filters pass, so a member planned elsewhere could never bind.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tests.extender.builders import FakeClock, make_node, make_pod
from vgpu.api.nodefit import node_facts, pod_terms
from vgpu.core.model import Phase
from vgpu.core.queues import whole_gpus
from vgpu.extender.binder import Binder
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.gangs import coordinator
from vgpu.extender.service import Extender
from vgpu.extender.wire import BindingArgs, ExtenderArgs

Obj = dict[str, Any]
KEY = b"gang-stateful-key"
NODES = ["n1", "n2", "n3"]
TIMEOUT = 60.0
GANGS: dict[str, tuple[int, int, int]] = {"a": (2, 3, 100), "b": (1, 2, 100), "c": (3, 3, 50)}
"""Gang name: (min-member, members, cores each); 300 cores of 600 with every member placed."""
MEMBERS = [f"{g}-{i}" for g, (_, count, _) in GANGS.items() for i in range(count)]
RIVALS = ["r-0", "r-1", "r-2"]
TAINT = {"key": "gpu", "value": "t4", "effect": "NoSchedule"}
"""n1's taint: only gang b's members tolerate it."""
SPEC: dict[str, Obj] = {
    "b": {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
    "c": {"nodeSelector": {"pool": "x"}},
}
"""The gangs whose members' specs constrain their node (n3 alone is in pool x)."""
PLANS: list[str] = []
"""The gangs the core was asked to plan, in order (filled while the test runs)."""


def _gang_of(pod: str) -> str | None:
    gang = pod.split("-")[0]
    return gang if gang in GANGS else None


def _pod_obj(pod: str) -> Obj:
    gang = _gang_of(pod)
    if gang is None:
        return make_pod(pod, cores=100)
    size, _, cores = GANGS[gang]
    annotations = {"vgpu.io/gang-name": gang, "vgpu.io/gang-size": str(size)}
    obj = make_pod(pod, cores=cores, annotations=annotations)
    obj["spec"].update(copy.deepcopy(SPEC.get(gang, {})))
    return obj


def _node_obj(name: str) -> Obj:
    obj = make_node(name, gpus=2)
    obj["metadata"]["labels"] = {"pool": "x" if name == "n3" else "y"}
    if name == "n1":
        obj["spec"] = {"taints": [TAINT]}
    return obj


class RecordingApi:
    """The API server's side of a bind: the Binding is accepted and remembered; the test plays
    the watch that shows the bound pod afterwards."""

    def __init__(self) -> None:
        self.bound: dict[str, tuple[str, dict[str, str]]] = {}

    def get_pod(self, namespace: str, name: str) -> Obj:
        raise AssertionError(f"the binder read {namespace}/{name}: every pod here is watched")

    def bind_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        *,
        annotations: Mapping[str, str] | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        self.bound[name] = (node, dict(annotations or {}))


class Gangs(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.cache = ClusterCache(key=KEY, memory_unit_mib=256, gang_timeout=TIMEOUT)
        self.ext = Extender(
            self.cache, config=ExtenderConfig(gang_timeout=TIMEOUT), clock=self.clock
        )
        self.api = RecordingApi()
        self.binder = Binder(
            self.cache,
            self.ext.pods,
            self.api,
            clock=self.clock,
            bind_wait=0.0,
            key=KEY,
            may_bind=lambda: None,
        )
        self.nodes = {name: _node_obj(name) for name in NODES}
        for obj in self.nodes.values():
            self.cache.apply_node("ADDED", obj)
        self.pods: dict[str, Obj] = {}
        self.passed: dict[str, str] = {}
        """The node each pod's last filter passed alone (where kube-scheduler would bind it)."""
        self.held_back: dict[str, tuple[float, frozenset[str]]] = {}
        """Gangs whose last plan failed (every failing plan backs off here): when, and the
        members that held a reservation then."""
        self.planned_at: dict[str, float] = {}
        """When each gang was last planned (its reservations' deadline counts from then)."""
        self.swept: dict[str, bool] = {}
        """Whether a sweep past its deadline (or a rebuild) came after the gang's last plan."""
        self.serial = 0
        for pod in MEMBERS + RIVALS:
            self.create(pod)

    # -- the world ---------------------------------------------------------------------------
    def _show(self, pod: str, obj: Obj) -> None:
        self.serial += 1
        obj["metadata"]["resourceVersion"] = str(self.serial)
        kind = "MODIFIED" if pod in self.pods else "ADDED"
        self.pods[pod] = obj
        self.cache.apply_pod(kind, copy.deepcopy(obj))

    @rule(pod=st.sampled_from(MEMBERS + RIVALS))
    def create(self, pod: str) -> None:
        if pod not in self.pods:
            obj = _pod_obj(pod)
            obj["metadata"]["uid"] = f"uid-{pod}-{self.serial}"  # a pod made again is a new pod
            self._show(pod, obj)

    @rule(pod=st.sampled_from(MEMBERS))
    def create_bound_nowhere(self, pod: str) -> None:
        """A tenant's member made (again, if it exists) with `spec.nodeName` of a node the
        extender does not know: nothing can hold it there."""
        self.delete(pod)
        if pod not in self.pods:
            obj = _pod_obj(pod)
            obj["metadata"]["uid"] = f"uid-{pod}-{self.serial}"
            obj["spec"]["nodeName"] = "ghost"
            self._show(pod, obj)

    @rule(pod=st.sampled_from(MEMBERS + RIVALS))
    def delete(self, pod: str) -> None:
        obj = self.pods.pop(pod, None)
        self.passed.pop(pod, None)
        if obj is not None:
            self.cache.apply_pod("DELETED", copy.deepcopy(obj))

    @rule(pod=st.sampled_from(MEMBERS + RIVALS))
    def filter(self, pod: str) -> None:
        obj = self.pods.get(pod)
        if obj is None or obj["spec"].get("nodeName"):
            return
        gang = _gang_of(pod)
        before = len(PLANS)
        result = self.ext.filter(ExtenderArgs(copy.deepcopy(obj), self._admitting(obj)))
        planned = len(PLANS) > before
        held = self.held_back.get(gang) if gang is not None else None
        if held is not None and held[0] == self.clock.now:
            assert not planned, f"gang {gang} was planned again inside its back-off"
            if pod not in held[1]:  # a member that kept its place (min-member) still passes
                assert not result.passed, result
        if len(result.passed) == 1:
            self.passed[pod] = result.passed[0]
        else:
            self.passed.pop(pod, None)
        reasons = set(result.failed.values())
        if any("waiting for members" in why for why in reasons):
            spec, _, size = self.ext.pods.read(copy.deepcopy(obj))
            assert self.cache.gang_wait(spec, size) is not None, (
                f"{pod}'s filter waits for members, yet preemption would evict for it"
            )
        if gang is not None and planned and not result.passed and len(reasons) == 1:
            self.held_back[gang] = (self.clock.now, frozenset(self._reserved(gang)))
        elif gang is not None and planned:
            self.held_back.pop(gang, None)
        self._planned(before)

    def _admitting(self, obj: Obj) -> list[str]:
        """The nodes kube-scheduler's own filters pass the pod on: all it asks the extender."""
        terms = pod_terms(obj["spec"])
        return [n for n in NODES if terms.admits(node_facts(self.nodes[n]))]

    def _planned(self, before: int) -> None:
        """Note when each gang planned since `before` was planned: its deadline counts from it."""
        for gang in PLANS[before:]:
            self.planned_at[gang.split("/")[1]] = self.clock.now
            self.swept[gang.split("/")[1]] = False

    @rule(pod=st.sampled_from(MEMBERS + RIVALS))
    def schedule(self, pod: str) -> None:
        """kube-scheduler's cycle: filter, then bind where the filter passed one node."""
        self.filter(pod)
        self.bind(pod)

    def bind(self, pod: str) -> None:
        node = self.passed.get(pod)
        obj = self.pods.get(pod)
        if node is None or obj is None or obj["spec"].get("nodeName"):
            return
        name = obj["metadata"]["name"]
        before = len(PLANS)
        error = self.binder.bind(BindingArgs(name, "default", obj["metadata"]["uid"], node))
        self._planned(before)
        if error:
            return
        bound_node, annotations = self.api.bound[name]
        shown = copy.deepcopy(obj)
        shown["spec"]["nodeName"] = bound_node
        shown["metadata"].setdefault("annotations", {}).update(annotations)
        self._show(pod, shown)

    @rule(pod=st.sampled_from(MEMBERS + RIVALS))
    def admit(self, pod: str) -> None:
        obj = self.pods.get(pod)
        if obj is None or not obj["spec"].get("nodeName"):
            return
        shown = copy.deepcopy(obj)
        shown["metadata"]["annotations"]["vgpu.io/admitted"] = json.dumps(["main"])
        self._show(pod, shown)

    @rule(seconds=st.sampled_from([1.0, 30.0, TIMEOUT + 1, 3600.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.ext.sweep()
        for gang, when in self.planned_at.items():
            if self.clock.now >= when + TIMEOUT:
                self.swept[gang] = True

    @rule()
    def rebuild(self) -> None:
        """A restart or a new leadership term: the cache is rebuilt from the objects and gangs
        with bound members are reserved again."""
        objs = [copy.deepcopy(o) for o in self.pods.values()]
        self.cache.replace_all([copy.deepcopy(n) for n in self.nodes.values()], objs)
        before = len(PLANS)
        self.ext.restore_gangs()
        self.held_back.clear()
        self._planned(before)
        self.swept = dict.fromkeys(GANGS, True)  # a rebuild keeps only what started gangs need

    # -- what must hold ----------------------------------------------------------------------
    def _holdings(self) -> dict[str, tuple[Phase, str | None]]:
        with self.cache.atomic():
            return {
                h.assignment.pod.split("/")[1]: (h.phase, h.gang)
                for h in self.cache.ledger.holdings()
            }

    @invariant()
    def no_gpu_is_promised_more_than_its_cores(self) -> None:
        used: dict[str, int] = {}
        with self.cache.atomic():
            for held in self.cache.ledger.holdings():
                for share in held.assignment.shares:
                    used[share.uuid] = used.get(share.uuid, 0) + share.cores
        assert all(cores <= 100 for cores in used.values()), used

    @invariant()
    def past_its_deadline_a_gang_holds_only_what_it_needs(self) -> None:
        holdings = self._holdings()
        for gang, (size, _, _) in GANGS.items():
            if not self.swept.get(gang, True):
                continue
            mine = {p: phase for p, (phase, _) in holdings.items() if _gang_of(p) == gang}
            reserved = sum(1 for phase in mine.values() if phase is Phase.RESERVED)
            placed = len(mine) - reserved
            needed = max(0, size - placed) if placed else 0
            assert reserved <= needed, (gang, mine, self.clock.now)

    def _reserved(self, gang: str) -> set[str]:
        holdings = self._holdings()
        return {
            p
            for p, (phase, _) in holdings.items()
            if _gang_of(p) == gang and phase is Phase.RESERVED
        }

    @invariant()
    def a_held_back_gang_reserves_nothing_new(self) -> None:
        for gang, (when, reserved) in self.held_back.items():
            if when == self.clock.now:
                assert self._reserved(gang) <= reserved, (gang, reserved)

    @invariant()
    def every_place_is_on_a_node_the_pods_constraints_allow(self) -> None:
        with self.cache.atomic():
            held = [
                (h.assignment.pod.split("/")[1], h.assignment.node)
                for h in self.cache.ledger.holdings()
            ]
        wrong = [
            (p, n) for p, n in held if p in self.pods and n not in self._admitting(self.pods[p])
        ]
        assert not wrong, wrong

    @invariant()
    def only_pods_that_exist_hold_places(self) -> None:
        gone = {p for p in self._holdings() if p not in self.pods}
        assert not gone, gone


def test_gangs_hold_only_what_they_need_whatever_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every failing plan is held back here (not only slow ones), so the back-off is exercised
    on every run; the plans are counted to tell a held-back answer from a new plan."""
    real = whole_gpus.plan_gang

    def counting(*args: Any) -> Any:
        PLANS.append(str(args[1]))
        return real(*args)

    monkeypatch.setattr(whole_gpus, "plan_gang", counting)
    monkeypatch.setattr(coordinator, "SLOW_PLAN_S", 0.0)
    run_state_machine_as_test(
        Gangs,
        settings=settings(
            max_examples=150,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
