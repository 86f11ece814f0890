"""The preemption marks read any pod the watch may deliver without raising, and read the fields
kube-scheduler's preemption reads the way it reads them."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vgpu.extender.pods.preemption_marks import Mark, mark_of

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
PREEMPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}


def _pod(**parts: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {}, "status": {}} | parts


@given(
    st.dictionaries(st.sampled_from(["metadata", "spec", "status"]), JSON),
    st.dictionaries(
        st.sampled_from(["deletionTimestamp", "priority", "nominatedNodeName", "conditions"]),
        JSON,
    ),
)
def test_any_pod_content_reads_as_a_mark_or_none_never_an_exception(
    parts: dict[str, Any], fields: dict[str, Any]
) -> None:
    pod = dict(parts)
    for part in ("metadata", "spec", "status"):
        if isinstance(pod.get(part), dict):
            pod[part] = {**pod[part], **fields}
    mark = mark_of(pod)
    assert mark is None or isinstance(mark.priority, int)


def test_only_the_first_disruption_target_condition_counts_as_kube_scheduler_reads_it() -> None:
    meta = {"deletionTimestamp": "2026-12-06T10:00:00Z"}
    later = [{"type": "DisruptionTarget", "status": "False"}, PREEMPTED]
    assert mark_of(_pod(metadata=meta, status={"conditions": later})) is None
    first = [{"type": "Ready", "status": "False"}, PREEMPTED]
    assert mark_of(_pod(metadata=meta, status={"conditions": first})) == Mark(0, "", True)


def test_a_preemption_condition_without_a_deletion_timestamp_is_not_leaving() -> None:
    assert mark_of(_pod(status={"conditions": [PREEMPTED]})) is None


def test_priority_is_read_from_the_spec_and_absent_or_malformed_reads_zero() -> None:
    status = {"nominatedNodeName": "n1"}
    assert mark_of(_pod(spec={"priority": 7}, status=status)) == Mark(7, "n1", False)
    assert mark_of(_pod(spec={"priority": True}, status=status)) == Mark(0, "n1", False)
    assert mark_of(_pod(spec={"priority": "7"}, status=status)) == Mark(0, "n1", False)
