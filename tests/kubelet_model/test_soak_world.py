"""The soak's shortcuts change its speed, not what it finds: `SoakWorld`'s agent lists hand over
only unseen pod versions, and `--backoff` spaces the attempts of a pod that does not fit."""

from __future__ import annotations

import pytest

import tests.kubelet_model.soak as soak_module
from tests.kubelet_model.pods import container, pod
from tests.kubelet_model.soak import SoakConfig, Waiting, schedule_waiting, soak
from tests.kubelet_model.world import World
from vgpu.core.ids import PodKey

HARSH = SoakConfig(
    pods=120,
    seed=7,
    watch_lag=0.3,
    agent_restart_p=0.03,
    kubelet_crash_p=0.02,
    lazy_release=True,
)


def _outcome(world: World, unschedulable: int) -> tuple[object, ...]:
    return (dict(world.tally), unschedulable, world.relists, world.refusals, world.swaps)


def test_a_soak_world_runs_exactly_as_the_plain_world(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _outcome(*soak(HARSH))
    monkeypatch.setattr(soak_module, "SoakWorld", World)
    plain = _outcome(*soak(HARSH))
    assert fast == plain
    assert fast[2]  # the agents did list pods (the path the shortcut takes)


@pytest.mark.parametrize(("backoff", "tries"), [(0, 41), (10, 7), (4, 12)])
def test_a_pod_that_never_fits_is_tried_as_its_backoff_allows(
    backoff: int, tries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(nodes=1, gpus=1)
    world.submit(pod("big", [container("main", 200)]))  # two whole GPUs on a 1-GPU node
    calls: list[PodKey] = []
    schedule = world.schedule

    def counted(key: PodKey) -> bool:
        calls.append(key)
        return schedule(key)

    monkeypatch.setattr(world, "schedule", counted)
    waiting, cfg, given_up = Waiting(), SoakConfig(backoff=backoff), 0
    for step in range(1, 42):
        given_up += schedule_waiting(world, cfg, step, waiting)
    assert len(calls) == tries  # backoff 10: steps 1, 2, 4, 8, 16, 26, 36
    assert given_up == 1 and not world.waiting  # 40 steps waited, then given up
