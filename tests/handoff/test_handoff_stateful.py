"""Random cluster lives through the extender's decisions, the kubelet model and the node agents.

Hypothesis drives: pods (shares with different memory asks and cores limits, whole GPUs,
two-container pods, init containers with and without sidecars), gangs, scheduling rounds,
admissions by any node's kubelet in any order, deletions and agent restarts; the kubelet model
also allocates resources in random order, ignores some GetPreferredAllocation answers and
restarts between containers; the agent's pod watch may lag behind the kubelet's. After
every step:

* every admitted container's grant equals the extender's assignment for that very pod;
* no GPU holds more than its cores or memory;
* no refusal the extender or agent could have avoided;
* no gang holds places for only part of its members.

Bounded here; `pytest -m soak` runs the long version (docs/performance.md).
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.kubelet_model.pods import container, gang, pod
from tests.kubelet_model.world import World

QUIET_LOGS = True  # the model refuses on purpose: keep its warnings out (tests/handoff/conftest.py)

# Few distinct asks, so that pods with equal asks and different grants often wait together.
cores = st.sampled_from([25, 30, 50])
blocks = st.integers(min_value=0, max_value=4)
limit = st.sampled_from([None, None, "100"])


class HandoffMachine(RuleBasedStateMachine):
    world: World
    checks: ClassVar[int] = 0
    """Invariant checks passed, over every life (the soak asserts it ran them)."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    @initialize(
        seed=st.integers(0, 2**16),
        ignore=st.sampled_from([0.0, 0.1]),
        lag=st.sampled_from([0.0, 0.3]),
    )
    def start(self, seed: int, ignore: float, lag: float) -> None:
        self.world = World(
            nodes=2,
            gpus=4,
            seed=seed,
            ignore_preferred=ignore,
            restart_p=0.2,
            agent_restart_between=0.1,
            watch_lag=lag,
        )

    def _name(self) -> str:
        self.n += 1
        return f"p{self.n}"

    def _submit(self, raw: dict[str, Any], cores_limit: str | None = None) -> None:
        if cores_limit:
            raw["metadata"]["annotations"]["vgpu.io/cores-limit"] = cores_limit
        self.world.submit(raw)
        self._schedule()

    def _schedule(self) -> None:
        """kube-scheduler retries every waiting pod (gang members, invariant-I waits)."""
        for key in list(self.world.waiting):
            self.world.schedule(key)

    @rule(c=cores, b=blocks, lim=limit)
    def share(self, c: int, b: int, lim: str | None) -> None:
        self._submit(pod(self._name(), [container("main", c, b)]), lim)

    @rule(c=cores, b=blocks, lim=limit)
    def another_share(self, c: int, b: int, lim: str | None) -> None:
        self.share(c, b, lim)  # shares are the common case: twice as likely

    @rule(n=st.sampled_from([100, 200]))
    def whole(self, n: int) -> None:
        self._submit(pod(self._name(), [container("main", n)]))

    @rule(c1=cores, b1=blocks, c2=cores, b2=blocks, lim=limit)
    def two(self, c1: int, b1: int, c2: int, b2: int, lim: str | None) -> None:
        self._submit(pod(self._name(), [container("a", c1, b1), container("b", c2, b2)]), lim)

    @rule(ci=cores, bi=blocks, c=cores, b=blocks, side=st.booleans(), lim=limit)
    def with_init(self, ci: int, bi: int, c: int, b: int, side: bool, lim: str | None) -> None:
        init = [container("init", ci, bi)]
        if side:
            init.append(container("side", 10, sidecar=True))
        self._submit(pod(self._name(), [container("main", c, b)], init=init), lim)

    @rule(size=st.integers(2, 4), seed=st.integers(0, 100))
    def gang_of(self, size: int, seed: int) -> None:
        for raw in gang(random.Random(seed), f"g{self._name()}", size):
            self.world.submit(raw)
        self._schedule()

    @rule(node=st.integers(0, 1), count=st.integers(1, 3))
    def admit(self, node: int, count: int) -> None:
        target = list(self.world.nodes.values())[node]
        for _ in range(count):
            self.world.admit_next(target)
        self._schedule()

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        if self.world.pods:
            key = data.draw(st.sampled_from(sorted(self.world.pods)))
            self.world.delete(key)
            self._schedule()

    @rule(node=st.integers(0, 1))
    def restart_agent(self, node: int) -> None:
        self.world.restart_agent(list(self.world.nodes.values())[node])

    @invariant()
    def holds(self) -> None:
        if not hasattr(self, "world"):
            return
        w = self.world
        assert w.tally["swapped"] == 0, w.swaps
        assert w.tally["refused-avoidably"] == 0, w.refusals
        assert not w.over_capacity()
        assert not w.partial_gangs()
        HandoffMachine.checks += 1


SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
}
TestHandoff = HandoffMachine.TestCase
TestHandoff.settings = settings(max_examples=30, stateful_step_count=50, **SETTINGS)  # type: ignore[arg-type]

SOAK_EXAMPLES = 500


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_handoff_soak() -> None:
    """The long run: SOAK_EXAMPLES random lives of up to 80 steps."""
    from hypothesis.stateful import run_state_machine_as_test

    before = HandoffMachine.checks
    run_state_machine_as_test(
        HandoffMachine,
        settings=settings(max_examples=SOAK_EXAMPLES, stateful_step_count=80, **SETTINGS),  # type: ignore[arg-type]
    )
    # Every life checks the invariants at least once after it starts (they raise on a breach).
    assert HandoffMachine.checks - before >= SOAK_EXAMPLES
