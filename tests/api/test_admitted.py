"""`vgpu.io/admitted`: the node agent's value reads back as written, and the extender and the
report read every value the same way (they share `read_admitted`)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tests.extender.builders import make_node, make_pod
from vgpu.api.admitted import ADMITTED, Admitted, encode_admitted, read_admitted
from vgpu.api.assignment import binding_annotations
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.inspect.pods import pod_facts

NAME = st.from_regex(r"[a-z]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True)
KEY = b"k"


@given(st.frozensets(NAME, max_size=5))
def test_what_the_agent_writes_reads_back(names: frozenset[str]) -> None:
    assert read_admitted(encode_admitted(names)) == Admitted(names)


def test_hand_written_forms() -> None:
    assert read_admitted(None) == read_admitted("  ") == read_admitted("7") == Admitted()
    assert read_admitted(" ALL ").among(["a", "b"]) == {"a", "b"}
    assert read_admitted("a, b,").names == {"a", "b"}
    assert read_admitted('{"a": true, "b": false}').names == {"a"}


def _bound_pod(value: str) -> dict[str, object]:
    pod = make_pod("p", cores=10, annotations={ADMITTED: value})
    containers = pod["spec"]["containers"]
    containers.append({**containers[0], "name": "side"})
    assignment = Assignment(
        PodKey("default/p"),
        NodeName("n1"),
        1000,
        0,
        tuple(
            ContainerAssignment(c, (GpuShare(GpuUUID("GPU-n1-0"), 10, 0),))
            for c in ("main", "side")
        ),
    )
    pod["metadata"]["annotations"].update(binding_annotations(assignment, KEY))
    pod["spec"]["nodeName"] = "n1"
    return pod


@given(
    st.one_of(
        st.builds(encode_admitted, st.frozensets(st.sampled_from(["main", "side", "x"]))),
        st.dictionaries(st.sampled_from(["main", "side"]), st.booleans()).map(json.dumps),
        st.sampled_from(["true", "*", "main", "side,main", "", "[1]", "null"]),
    )
)
def test_the_extender_and_the_report_agree_on_who_is_admitted(value: str) -> None:
    pod = _bound_pod(value)
    cache = ClusterCache(key=KEY, memory_unit_mib=256)
    cache.apply_node("ADDED", make_node("n1"))
    cache.apply_pod("ADDED", pod)
    pending = {
        c.container for c in cache.pending.get(NodeName("n1"), {}).get(PodKey("default/p"), [])
    }
    facts = pod_facts({**pod, "status": {"phase": "Pending"}})
    assert {c for c in ("main", "side") if not facts.is_admitted(c)} == pending
