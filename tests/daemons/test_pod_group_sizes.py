"""PodGroup sizes for gangs labelled `scheduling.x-k8s.io/pod-group`: read from the API on
demand, kept a while, and never read on the serving loop's thread (a gang's filter there moves
to a worker instead of holding every other connection while the API server answers)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from vgpu.adapters.kube.calls import KubeApi, KubeError, KubeNotFound
from vgpu.core.errors import InvalidRequest
from vgpu.daemons.extender.daemon import PodGroupSizes
from vgpu.extender.offloop import LeaveLoop, on_loop


class Groups:
    """`get_pod_group` as KubeApi answers it: the object, or KubeNotFound / KubeError."""

    def __init__(self, **sizes: int | None) -> None:
        self.sizes, self.calls = sizes, 0
        self.failing = False

    def get_pod_group(self, namespace: str, name: str) -> dict[str, Any]:
        self.calls += 1
        if self.failing:
            raise KubeError("GET podgroups: 503 Service Unavailable")
        if name not in self.sizes:
            raise KubeNotFound(f"podgroups {namespace}/{name} not found")
        return {"spec": {"minMember": self.sizes[name]}}


def _sizes(groups: Groups) -> PodGroupSizes:
    return PodGroupSizes(cast(KubeApi, groups), ttl=30.0)


def test_a_size_not_kept_is_never_read_on_the_serving_loop() -> None:
    groups = Groups(g=3)
    sizes = _sizes(groups)
    with on_loop(), pytest.raises(LeaveLoop):
        sizes("ns", "g")
    assert groups.calls == 0
    assert sizes("ns", "g") == 3  # on a worker
    with on_loop():
        assert sizes("ns", "g") == 3  # kept: answered on the loop, no call
    assert groups.calls == 1


def test_a_missing_group_is_kept_as_none_and_an_unreadable_one_is_an_error() -> None:
    groups = Groups()
    sizes = _sizes(groups)
    assert sizes("ns", "gone") is None
    assert sizes("ns", "gone") is None and groups.calls == 1
    groups.failing = True
    with pytest.raises(InvalidRequest, match="PodGroup ns/other"):
        sizes("ns", "other")
