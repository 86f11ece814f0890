"""Which waiting pods a replay's pass offers (vgpu.sim.offers): the oldest that may fit, and the
oldest that may not, so a strict queue's hold sees every job of it that does not fit."""

from __future__ import annotations

from typing import cast

from tests.builders import make_pod
from vgpu.core.scheduler import Scheduler
from vgpu.sim.offers import Offers
from vgpu.sim.poisson import Arrival


def _arrivals(*cores: int) -> list[Arrival]:
    return [Arrival.of(float(i), "B", make_pod(f"p{i}", c), 60.0) for i, c in enumerate(cores)]


def _offers(unfit: set[object]) -> Offers:
    # No node freed since the last pass: a shape unfit then is unfit now, without asking the
    # scheduler.
    return Offers(cast(Scheduler, None), unfit, (), window=10)


def test_past_a_head_that_fits_the_oldest_pod_that_does_not_is_offered() -> None:
    queue = _arrivals(20, 20, 100, 20, 100)
    offered = _offers({queue[2].shape}).oldest(queue)
    assert [a.pod.key for a in offered] == ["default/p0", "default/p1", "default/p2", "default/p3"]


def test_a_head_that_does_not_fit_is_the_one_unfit_pod_offered() -> None:
    queue = _arrivals(100, 20, 100)
    offered = _offers({queue[0].shape}).oldest(queue)
    assert [a.pod.key for a in offered] == ["default/p0", "default/p1"]
