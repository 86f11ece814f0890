"""The kubelet model behaves as the kubelet's source says (not as vgpu would like): checked with a
plugin that records every call and prefers the lowest IDs."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from tests.kubelet_model.kubelet import KubeletModel
from tests.kubelet_model.pods import container, pod
from tests.kubelet_model.topology import POLICIES, Hint, best_hint, device_hints

CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"


class Recorder:
    def __init__(self, refuse: str = "") -> None:
        self.calls: list[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = []
        self.refuse = refuse

    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        self.calls.append(("preferred", resource, tuple(sorted(available)), tuple(must_include)))
        rest = sorted(set(available) - set(must_include), key=lambda d: (d[:2], int(d[5:])))
        return [*must_include, *rest][:size]

    def allocate(self, resource: str, ids: Sequence[Sequence[str]]) -> Any:
        self.calls.append(("allocate", resource, tuple(sorted(ids[0])), ()))
        if self.refuse == resource:
            return type("Refusal", (), {"reason": "no"})()
        return [type("Grant", (), {"envs": {resource: ",".join(sorted(ids[0]))}})()]


def devices(gpus: int = 2, numa: bool = False) -> dict[str, dict[str, int | None]]:
    return {
        CORES: {f"G{g}::c{k}": (g if numa else None) for g in range(gpus) for k in range(100)},
        MEMORY: {f"G{g}::m{k}": (g if numa else None) for g in range(gpus) for k in range(8)},
    }


def kubelet(plugin: Recorder, seed: int = 3, **kw: Any) -> KubeletModel:
    return KubeletModel(
        devices(numa=kw.pop("numa", False)), lambda: plugin, rng=random.Random(seed), **kw
    )


def with_uid(raw: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    raw["metadata"]["uid"] = uid
    return raw


def test_init_devices_are_reused_without_asking_the_plugin() -> None:
    plugin = Recorder()
    model = kubelet(plugin)
    raw = with_uid(pod("p", [container("main", 30)], init=[container("init", 30)]))
    result = model.admit(raw)
    assert result.admitted
    assert result.ids["main"][CORES] and set(result.ids["main"][CORES]) == set(
        result.ids["init"][CORES]
    )
    assert [c[0] for c in plugin.calls] == ["preferred", "allocate", "allocate"]


def test_a_bigger_app_container_gets_the_init_ids_as_must_include() -> None:
    plugin = Recorder()
    model = kubelet(plugin)
    raw = with_uid(pod("p", [container("main", 50)], init=[container("init", 30)]))
    assert model.admit(raw).admitted
    preferred = [c for c in plugin.calls if c[0] == "preferred"]
    assert len(preferred) == 2 and len(preferred[1][3]) == 30
    init_ids = next(c[2] for c in plugin.calls if c[0] == "allocate")
    assert set(preferred[1][3]) == set(init_ids)


def test_a_sidecar_keeps_its_devices_and_the_app_takes_fresh_ones() -> None:
    plugin = Recorder()
    model = kubelet(plugin)
    raw = with_uid(pod("p", [container("main", 20)], init=[container("side", 20, sidecar=True)]))
    result = model.admit(raw)
    assert result.admitted
    assert not set(result.ids["main"][CORES]) & set(result.ids["side"][CORES])


def test_resources_of_one_container_come_in_random_order() -> None:
    orders = set()
    for seed in range(20):
        plugin = Recorder()
        model = kubelet(plugin, seed=seed)
        model.admit(with_uid(pod("p", [container("main", 30, 2)])))
        orders.add(tuple(c[1] for c in plugin.calls if c[0] == "allocate"))
    assert orders == {(CORES, MEMORY), (MEMORY, CORES)}


def test_a_refusal_fails_the_pod_and_frees_its_devices() -> None:
    plugin = Recorder(refuse=MEMORY)
    model = kubelet(plugin)
    result = model.admit(with_uid(pod("p", [container("main", 30, 2)])))
    assert not result.admitted and "UnexpectedAdmissionError" in result.error
    assert not any(model.in_use.values())


def test_a_restart_between_containers_keeps_allocations_and_rebuilds_the_pool() -> None:
    plugin = Recorder()
    model = kubelet(plugin, restart_p=1.0)
    raw = with_uid(pod("p", [container("main", 30)], init=[container("init", 30)]))
    result = model.admit(raw)
    assert result.admitted and model.restarts == 1
    assert set(result.ids["main"][CORES]) == set(result.ids["init"][CORES])


def test_ignored_preferences_are_flagged() -> None:
    plugin = Recorder()
    model = kubelet(plugin, ignore_preferred=1.0)
    result = model.admit(with_uid(pod("p", [container("main", 30)])))
    assert result.admitted and result.preference_ignored
    assert not [c for c in plugin.calls if c[0] == "preferred"]


def test_device_hints_prefer_the_narrowest_numa_masks() -> None:
    numa = {f"G{g}::c{k}": g for g in range(2) for k in range(100)}
    hints = device_hints(numa, [f"G1::c{k}" for k in range(100)], 30)
    assert hints == [Hint(frozenset({1}), True), Hint(frozenset({0, 1}), False)]
    assert device_hints({"x": None}, ["x"], 1) is None


@pytest.mark.parametrize("policy", POLICIES)
def test_topology_policies_narrow_or_reject_as_the_kubelet_does(policy: str) -> None:
    both = frozenset({0, 1})
    one = [Hint(frozenset({0}), True), Hint(frozenset({1}), True), Hint(both, False)]
    hint, admitted = best_hint(policy, [one], both)
    if policy == "none":
        assert hint is None and admitted
    else:
        assert hint == Hint(frozenset({0}), True) and admitted  # NUMA 0 wins the tie
    wide = [Hint(both, False)]
    hint, admitted = best_hint(policy, [wide], both)
    assert admitted == (policy in ("none", "best-effort"))


def test_numa_reporting_devices_are_narrowed_to_the_hinted_node() -> None:
    plugin = Recorder()
    model = kubelet(plugin, numa=True, topology="single-numa-node")
    for k in range(50):  # NUMA 0 has 50 free cores: still enough, so it is hinted first
        model.in_use[CORES].add(f"G0::c{k}")
    result = model.admit(with_uid(pod("p", [container("main", 30)])))
    assert result.admitted and result.narrowed
    assert all(i.startswith("G0::") for i in result.ids["main"][CORES])
    offered = next(c[2] for c in plugin.calls if c[0] == "preferred")
    assert all(i.startswith("G0::") for i in offered)
