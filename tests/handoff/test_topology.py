"""Under every topology manager policy the kubelet offers the GPUs the extender chose, because the
agent reports no NUMA node by default (a device without topology is never narrowed). With
`--report-numa` and a policy other than `none` the kubelet narrows to the hinted NUMA node and
refuses what the extender placed elsewhere: the documented trade-off of that flag."""

from __future__ import annotations

import pytest

from tests.kubelet_model.soak import SoakConfig, soak
from tests.kubelet_model.topology import POLICIES

QUIET_LOGS = True  # the model refuses on purpose: keep its warnings out (tests/handoff/conftest.py)


def _run(policy: str, report_numa: bool) -> dict[str, int]:
    cfg = SoakConfig(
        pods=150,
        seed=7,
        topology=policy,
        report_numa=report_numa,
        ignore_preferred=0.0,
        kubelet_restart_p=0.0,
        agent_restart_p=0.0,
        gang_p=0.0,
    )
    world, _ = soak(cfg)
    return dict(world.tally)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_admits_what_the_extender_placed(policy: str) -> None:
    tally = _run(policy, report_numa=False)
    assert tally.get("admitted", 0) > 100
    assert tally.get("refused-avoidably", 0) == 0
    assert tally.get("refused-unavoidably", 0) == 0
    assert tally.get("swapped", 0) == 0


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_reporting_numa_under_a_policy_costs_refusals_never_swaps(policy: str) -> None:
    tally = _run(policy, report_numa=True)
    assert tally.get("refused-unavoidably", 0) > 0
    assert tally.get("swapped", 0) == 0
