"""Pods joining prepared claims (`vgpu.daemons.dra_driver.joiners`), as a state machine: claims
are reserved for pods and released, pods' cgroups appear, the kubelet prepares claims (the
driver's `ClaimLimits.apply`, then `Joiners.limited`), claims are deleted, and the watch
delivers each change. After every step of the joiner:

- every pod reserved on a claim prepared here, whose cgroup exists, has had its limit set;
- a pod's limit is set at most once per reservation on a claim prepared here (prepare and the
  joiner do not both set it; a claim never prepared here gives none);
- a second step at once sets nothing (not every poll).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.dra.test_driver import NODE, share
from tests.node.test_driver_prestart import RecordingLimits
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.adapters.kube.dra_calls import DraKubeApi
from vgpu.daemons.dra_driver.joiners import Joiners
from vgpu.daemons.dra_driver.limits import ClaimLimits
from vgpu.dra.prepare import NodeGpus

CLAIMS = ("c0", "c1")
PODS = tuple(f"00000000-0000-0000-0000-00000000000{i}" for i in range(3))
Obj = dict[str, Any]


class Cluster(DraKubeApi):
    """The API server as the driver reads it: claims with their reservations, and pods."""

    def __init__(self) -> None:
        super().__init__(None)
        self.reserved: dict[str, list[str]] = {c: [] for c in CLAIMS}

    def claim(self, name: str) -> Obj:
        return {
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "status": {
                "allocation": {"devices": {"results": [share("gpu-0", "10", "1Gi")]}},
                "reservedFor": [
                    {"resource": "pods", "name": f"p{PODS.index(p)}", "uid": p}
                    for p in self.reserved[name]
                ],
            },
        }

    def get_resource_claim(self, namespace: str, name: str) -> Obj:
        return self.claim(name)

    def get_pod(self, namespace: str, name: str) -> Obj:
        uid = PODS[int(name[1:])]
        claims = [c for c in CLAIMS if uid in self.reserved[c]]
        return {
            "metadata": {"name": name, "uid": uid},
            "spec": {"resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims]},
        }


class JoiningPods(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="vgjoin"))
        (self.root / "kubepods.slice").mkdir()
        inventory = FakeGpuBackend.from_spec("2xT4", seed=NODE).inventory()
        self.node = NodeGpus(NODE, {g.index: g for g in inventory.gpus})
        self.kube = Cluster()
        self.nvml = RecordingLimits()
        self.limits = ClaimLimits(self.kube, self.nvml, self.root)
        self.prepared: set[str] = set()
        self.joins: Counter[str] = Counter()  # a pod's reservations on claims prepared here
        self.joiners = Joiners(
            self.limits, lambda: self.node, self.prepared.__contains__, threading.Event()
        )

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _cgroup(self, pod: str) -> Path:
        return self.root / "kubepods.slice" / f"kubepods-pod{pod.replace('-', '_')}.slice"

    def _limited(self, pod: str) -> bool:
        return any(call[1] == self._cgroup(pod) for call in self.nvml.calls)

    def _deliver(self, claim: str, kind: str = "MODIFIED") -> None:
        self.joiners.seen(kind, self.kube.claim(claim))

    @rule(claim=st.sampled_from(CLAIMS), pod=st.sampled_from(PODS))
    def reserve(self, claim: str, pod: str) -> None:
        """The scheduler reserves the claim for the pod before it binds it."""
        if pod not in self.kube.reserved[claim]:
            self.kube.reserved[claim].append(pod)
            self.joins[pod] += f"uid-{claim}" in self.prepared
        self._deliver(claim)

    @rule(claim=st.sampled_from(CLAIMS), pod=st.sampled_from(PODS))
    def release(self, claim: str, pod: str) -> None:
        if pod in self.kube.reserved[claim]:
            self.kube.reserved[claim].remove(pod)
        self._deliver(claim)

    @rule(pod=st.sampled_from(PODS))
    def cgroup(self, pod: str) -> None:
        """The kubelet's EnsureExists."""
        self._cgroup(pod).mkdir(exist_ok=True)

    @rule(claim=st.sampled_from(CLAIMS))
    def prepare(self, claim: str) -> None:
        """The kubelet's first NodePrepareResources of the claim: fails closed without a cgroup."""
        if claim in self.prepared:
            return
        obj = self.kube.claim(claim)
        ready = self.joiners.with_cgroups(obj)
        if self.limits.apply(obj, self.node.pool, self.node.gpus) is None:
            self.joiners.limited(obj, ready)
            self.prepared.add(f"uid-{claim}")
            self.joins.update(self.kube.reserved[claim])

    @rule(claim=st.sampled_from(CLAIMS))
    def delete(self, claim: str) -> None:
        """The claim is unprepared and deleted (its pods ended)."""
        self.prepared.discard(f"uid-{claim}")
        self.kube.reserved[claim] = []
        self._deliver(claim, "DELETED")

    @rule()
    def step(self) -> None:
        self.joiners.step()
        calls = len(self.nvml.calls)
        self.joiners.step()
        assert len(self.nvml.calls) == calls, "a second step set limits again"
        for claim in CLAIMS:
            if f"uid-{claim}" not in self.prepared:
                continue
            for pod in self.kube.reserved[claim]:
                if self._cgroup(pod).is_dir():
                    assert self._limited(pod), (claim, pod)

    @invariant()
    def a_limit_is_set_once_per_joining_and_only_for_prepared_claims(self) -> None:
        for pod in PODS:
            sets = sum(1 for call in self.nvml.calls if call[1] == self._cgroup(pod))
            assert sets <= self.joins[pod], (pod, sets, self.joins[pod])


JoiningPods.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_joining_pods = JoiningPods.TestCase


class RacingLimits(RecordingLimits):
    """NVML's setter, during whose first call the kubelet makes another pod's cgroup."""

    def __init__(self, appears: Path) -> None:
        super().__init__()
        self.appears = appears

    def set(self, uuid: str, cgroup: Path, *, hard: int, soft: int = 0) -> None:
        self.appears.mkdir(exist_ok=True)
        super().set(uuid, cgroup, hard=hard, soft=soft)


def test_a_cgroup_that_appears_while_prepare_sets_limits_is_left_to_the_joiner() -> None:
    """Prepare skips a pod without a cgroup; if that cgroup appears while prepare sets the
    others' limits, the pod is still the joiner's to limit (not marked done after the fact)."""
    machine = JoiningPods()
    try:
        first, second = machine._cgroup(PODS[0]), machine._cgroup(PODS[1])
        first.mkdir()
        machine.nvml = RacingLimits(second)
        machine.limits = ClaimLimits(machine.kube, machine.nvml, machine.root)
        machine.joiners = Joiners(
            machine.limits, lambda: machine.node, machine.prepared.__contains__, threading.Event()
        )
        machine.kube.reserved["c0"] = [PODS[0], PODS[1]]
        machine.prepare("c0")
        assert [call[1] for call in machine.nvml.calls] == [first]
        machine.joiners.seen("MODIFIED", machine.kube.claim("c0"))
        assert machine.joiners.step() == 0
        assert [call[1] for call in machine.nvml.calls] == [first, second]
    finally:
        machine.teardown()
