"""The kubelet and the agent each watch the API server: the kubelet may admit a bound pod before
the agent's watch shows it (seen on the real cluster as an intermittent "no pending container
asks N cores there"). The kubelet calls GetPreferredAllocation and then Allocate for it
(pkg/kubelet/cm/devicemanager/manager.go, `devicesToAllocate`): the agent must catch up before
answering either, or its binpacking steers the devices away from the GPU the extender chose."""

from __future__ import annotations

from tests.kubelet_model.soak import SoakConfig, soak

QUIET_LOGS = True  # the model refuses on purpose: keep its warnings out (tests/handoff/conftest.py)


def test_a_lagging_pod_watch_costs_no_avoidable_refusal() -> None:
    cfg = SoakConfig(
        pods=200,
        nodes=2,
        gpus=4,
        seed=11,
        ignore_preferred=0.0,
        kubelet_restart_p=0.0,
        agent_restart_p=0.0,
        watch_lag=0.5,
    )
    world, _ = soak(cfg)
    assert world.tally["admitted"] > 100, world.tally
    assert world.tally["refused-avoidably"] == 0, world.refusals[:5]
    assert world.tally["swapped"] == 0, world.swaps[:5]
