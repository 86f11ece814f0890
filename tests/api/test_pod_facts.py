"""The facts every pod reader needs are read one way (`vgpu.api.podread`): the extender, the node
agent and the report agree on a pod's namespace and on whether it is terminal or being deleted.

They once disagreed: a missing namespace was "" on the node and "default" elsewhere, and the node
counted a pod being deleted as terminal where the extender looked at the phase only."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vgpu.api.podread import is_deleting, is_terminal
from vgpu.api.podspec import key_of, pod_spec
from vgpu.inspect.pods import pod_facts
from vgpu.node.podspec import pod_info

phases = st.sampled_from([None, "Pending", "Running", "Succeeded", "Failed", "Unknown"])


def _pod(namespace: str | None, phase: str | None, deleting: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "uid": "u1"}
    if namespace is not None:
        meta["namespace"] = namespace
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    container = {"name": "main", "resources": {"limits": {"vgpu.io/cores": "30"}}}
    pod: dict[str, Any] = {"metadata": meta, "spec": {"containers": [container]}}
    if phase is not None:
        pod["status"] = {"phase": phase}
    return pod


@given(st.sampled_from([None, "", "team-a"]), phases, st.booleans())
def test_the_three_readers_agree(namespace: str | None, phase: str | None, deleting: bool) -> None:
    pod = _pod(namespace, phase, deleting)
    expected_ns = namespace or "default"
    spec = pod_spec(pod, memory_unit_mib=256)
    info, facts = pod_info(pod), pod_facts(pod)
    assert key_of(pod) == spec.request.key == info.key == f"{expected_ns}/p"
    assert facts.namespace == expected_ns
    assert spec.terminal == facts.terminal == is_terminal(pod) == (phase in ("Succeeded", "Failed"))
    # The agent admits nothing for a pod being deleted; the extender keeps charging it until
    # its phase is terminal or it is gone (its containers may still run in their grace period).
    assert info.terminal == (is_terminal(pod) or is_deleting(pod))
