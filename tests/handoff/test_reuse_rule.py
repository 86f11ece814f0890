"""vgpu's charge for init containers (`vgpu.core.kubelet_reuse.new_devices`) equals what the
kubelet model, written from the device manager's source, really holds for any mix of regular
init containers, sidecars and app containers."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kubelet_model.kubelet import KubeletModel
from tests.kubelet_model.pods import container, pod
from vgpu.core.kubelet_reuse import Role, new_devices

CORES = "vgpu.io/cores"
ROLES = {"init": Role.INIT, "sidecar": Role.SIDECAR, "app": Role.APP}


class Lowest:
    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        return [*must_include, *sorted(set(available) - set(must_include))][:size]

    def allocate(self, resource: str, ids: Sequence[Sequence[str]]) -> Any:
        return [type("Grant", (), {"envs": {}})()]


containers = st.lists(
    st.tuples(st.sampled_from(["init", "sidecar", "app"]), st.integers(1, 100)),
    min_size=1,
    max_size=6,
).filter(lambda cs: any(role == "app" for role, _ in cs))


@settings(max_examples=200, deadline=None)
@given(cs=containers, seed=st.integers(0, 1000))
def test_the_charge_is_what_the_kubelet_holds(cs: list[tuple[str, int]], seed: int) -> None:
    inits = [c for c in cs if c[0] != "app"]
    apps = [c for c in cs if c[0] == "app"]
    raw = pod(
        "p",
        [container(f"a{i}", n) for i, (_, n) in enumerate(apps)],
        init=[container(f"i{i}", n, sidecar=r == "sidecar") for i, (r, n) in enumerate(inits)],
    )
    raw["metadata"]["uid"] = "u"
    devices = {CORES: {f"G0::c{k}": None for k in range(600)}}
    model = KubeletModel(devices, Lowest, rng=random.Random(seed))
    assert model.admit(raw).admitted
    order = [(ROLES[r], n) for r, n in inits] + [(Role.APP, n) for _, n in apps]
    assert len(model.in_use[CORES]) == sum(new_devices(order))


def test_one_init_and_one_app_container_hold_the_larger_of_the_two() -> None:
    assert sum(new_devices([(Role.INIT, 30), (Role.APP, 50)])) == 50
    assert sum(new_devices([(Role.INIT, 50), (Role.APP, 30)])) == 50
    assert sum(new_devices([(Role.SIDECAR, 20), (Role.APP, 30)])) == 50
    assert sum(new_devices([(Role.INIT, 30), (Role.SIDECAR, 20), (Role.APP, 30)])) == 50
