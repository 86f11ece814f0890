"""The agent recognises a kubelet that lists vGPU device IDs in a pod's allocatedResourcesStatus.

The shape is the kubelet's own: `UpdateAllocatedResourcesStatus` in
pkg/kubelet/cm/devicemanager/manager.go writes one `{name, resources: [{resourceID, health}]}`
per device-plugin resource of a container (core/v1 `ResourceStatus`, `ResourceHealth`).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vgpu.api.resources import ResourceNames
from vgpu.node.health_listing import lists_unit_ids

NAMES = ResourceNames()
UUID = "GPU-11111111-2222-3333-4444-555555555555"


def _pod(*entries: dict[str, Any], init: bool = False) -> dict[str, Any]:
    statuses = [{"name": "main", "allocatedResourcesStatus": list(entries)}]
    key = "initContainerStatuses" if init else "containerStatuses"
    return {"status": {key: statuses}}


def _entry(name: str, count: int) -> dict[str, Any]:
    kind = "c" if name.endswith("cores") else "m"
    ids = [{"resourceID": f"{UUID}::{kind}{k}", "health": "Healthy"} for k in range(count)]
    return {"name": name, "resources": ids}


def test_a_container_listing_its_core_units_is_recognised() -> None:
    assert lists_unit_ids(_pod(_entry(NAMES.cores, 30)), NAMES)


def test_memory_blocks_of_an_init_container_are_recognised() -> None:
    assert lists_unit_ids(_pod(_entry(NAMES.memory, 2), init=True), NAMES)


def test_a_pod_without_the_field_is_quiet() -> None:
    assert not lists_unit_ids({"status": {"containerStatuses": [{"name": "main"}]}}, NAMES)
    assert not lists_unit_ids({}, NAMES)


def test_another_domain_or_plugin_is_not_ours() -> None:
    other = ResourceNames("example.com")
    assert not lists_unit_ids(_pod(_entry(other.cores, 30)), NAMES)
    assert not lists_unit_ids(_pod(_entry("nvidia.com/gpu", 2)), NAMES)


def test_one_id_cannot_reorder_so_it_is_not_reported() -> None:
    """A container's list is built afresh at each sync in map order: one ID has one order."""
    assert not lists_unit_ids(_pod(_entry(NAMES.cores, 1)), NAMES)


def test_one_core_and_one_block_can_swap_places_so_they_are_reported() -> None:
    assert lists_unit_ids(_pod(_entry(NAMES.cores, 1), _entry(NAMES.memory, 1)), NAMES)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_any_malformed_status_is_quiet_and_never_raises(junk: Any) -> None:
    """Quiet: no junk reads as a listing (its names are at most 5 characters, so none is one
    of ours), so no warning is logged for it."""
    assert not lists_unit_ids({"status": junk}, NAMES)
    assert not lists_unit_ids({"status": {"containerStatuses": junk}}, NAMES)
    in_a_container = {"containerStatuses": [{"allocatedResourcesStatus": junk}]}
    assert not lists_unit_ids({"status": in_a_container}, NAMES)
