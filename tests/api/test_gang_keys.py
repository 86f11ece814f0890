"""The extender (which plans gangs) and the report (which shows them) read gang membership the
same way, through `vgpu.api.gang.gang_ref`: same gang name and minimum for every convention."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.api.podspec import gang_of, pod_group_min_member
from vgpu.core.errors import InvalidRequest
from vgpu.inspect.gangs import membership

Obj = dict[str, Any]


def _pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": "w0", "namespace": "ml", "labels": labels or {}}
    meta["annotations"] = annotations or {}
    return {"metadata": meta}


CASES = [
    (_pod({"scheduling.x-k8s.io/pod-group": "tf"}), "tf", None),
    (
        _pod(
            {
                "pod-group.scheduling.sigs.k8s.io/name": "tf",
                "pod-group.scheduling.sigs.k8s.io/min-available": "5",
            }
        ),
        "tf",
        5,
    ),
    (  # the older bare form of the lightweight label
        _pod(
            {
                "pod-group.scheduling.sigs.k8s.io": "tf",
                "pod-group.scheduling.sigs.k8s.io/min-available": "3",
            }
        ),
        "tf",
        3,
    ),
    (_pod(annotations={"vgpu.io/gang-name": "tf", "vgpu.io/gang-size": "4"}), "tf", 4),
    (  # Kueue's plain-pod group: a label names it, an annotation counts it
        _pod(
            {"kueue.x-k8s.io/pod-group-name": "tf"},
            {"kueue.x-k8s.io/pod-group-total-count": "3"},
        ),
        "tf",
        3,
    ),
    (_pod(), None, None),
]


@pytest.mark.parametrize(("pod", "name", "size"), CASES)
def test_extender_and_report_agree_on_membership(pod: Obj, name: str | None, size: int) -> None:
    planned = gang_of(pod)
    shown = membership(pod, {"ml/tf": 7})
    if name is None:
        assert planned is None and shown is None
        return
    assert planned is not None and shown is not None
    assert (planned.name, planned.namespace, str(planned.key)) == (name, "ml", f"ml/{name}")
    assert shown.name == name
    assert planned.min_member == size
    assert shown.min_member == (7 if size is None else size)  # a PodGroup's minMember


def test_a_bad_size_is_an_error_for_the_extender_and_unknown_in_the_report() -> None:
    pod = _pod(annotations={"vgpu.io/gang-name": "tf", "vgpu.io/gang-size": "lots"})
    with pytest.raises(InvalidRequest, match=r"metadata.annotations\[vgpu.io/gang-size\]"):
        gang_of(pod)
    shown = membership(pod, {})
    assert shown is not None and shown.name == "tf" and shown.min_member is None


def test_a_pod_groups_min_member_that_is_no_gang_size_is_an_error_naming_it() -> None:
    """minMember was read with `int(...)`: "x" raised a ValueError out of the verb, -3 made a
    gang that needs no member."""
    for bad in ("x", -3, 10**9, True):
        with pytest.raises(InvalidRequest, match=r"PodGroup t/g: spec\.minMember"):
            pod_group_min_member({"spec": {"minMember": bad}}, "PodGroup t/g")
    assert pod_group_min_member({"spec": {}}, "PodGroup t/g") == 1
    assert pod_group_min_member({"spec": {"minMember": 3}}, "PodGroup t/g") == 3
