"""A pod's priority and whether it may preempt, read as kube-scheduler reads them:
`corev1helpers.PodPriority` (spec.priority, 0 when absent) and spec.preemptionPolicy (Never, or
the default PreemptLowerPriority)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vgpu.api.podspec import pod_spec, priority_of

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


def _pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "main", "resources": {"limits": {"vgpu.io/cores": "30"}}}
    return {"metadata": {"name": "p", "uid": "u1"}, "spec": {"containers": [container], **spec}}


def test_priority_and_policy_are_read_from_the_spec() -> None:
    spec = pod_spec(_pod(priority=1000), memory_unit_mib=256)
    assert (spec.priority, spec.preempts) == (1000, True)
    spec = pod_spec(_pod(priority=-5, preemptionPolicy="Never"), memory_unit_mib=256)
    assert (spec.priority, spec.preempts) == (-5, False)
    default = pod_spec(_pod(preemptionPolicy="PreemptLowerPriority"), memory_unit_mib=256)
    assert (default.priority, default.preempts) == (0, True)


@given(JSON)
def test_any_value_reads_as_an_integer_priority_never_an_error(value: object) -> None:
    priority = priority_of({"priority": value})
    assert isinstance(priority, int) and not isinstance(priority, bool)
    exact = isinstance(value, int) and not isinstance(value, bool)
    assert priority == (value if exact else 0)
