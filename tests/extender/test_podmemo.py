"""`read_digest` covers all that `pod_spec` reads of a pod but what `ParsedPods` sets itself
(the node name and whether the phase is terminal), so a kept parse is what parsing would give."""

from __future__ import annotations

from typing import Any

import pytest

from tests.extender.builders import make_pod
from vgpu.api.podspec import READ_METADATA, READ_STATUS, PodSpec, pod_spec, read_part
from vgpu.extender.pods.memo import UNREAD_ANNOTATIONS, ParsedPods, read_digest

Obj = dict[str, Any]
READ = {
    "pod": {"metadata", "spec", "status"},
    "metadata": set(READ_METADATA),
    "status": set(READ_STATUS),
}
"""What the digest holds of the pod, its metadata and its status, or `ParsedPods` sets (the
phase): the reader's own table; labels, annotations but the unread ones, and the spec are held
whole (its node name is set by `ParsedPods`)."""


class Reads(dict[str, Any]):
    """A map that records which of its keys were read (`*`: all of them, by iterating)."""

    def __init__(self, data: Obj, where: str, log: set[str]) -> None:
        super().__init__(data)
        self.where, self.log = where, log

    def _read(self, key: object) -> None:
        self.log.add(f"{self.where}.{key}")

    def get(self, key: str, default: Any = None) -> Any:
        self._read(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._read(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._read(key)
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self._read("*")
        return super().__iter__()

    def keys(self) -> Any:
        self._read("*")
        return super().keys()

    def items(self) -> Any:
        self._read("*")
        return super().items()

    def values(self) -> Any:
        self._read("*")
        return super().values()


def _watched(pod: Obj, log: set[str]) -> Reads:
    meta = dict(pod["metadata"])
    meta["annotations"] = Reads(meta.get("annotations") or {}, "annotations", log)
    top = {**pod, "metadata": Reads(meta, "metadata", log)}
    top["status"] = Reads(pod.get("status") or {}, "status", log)
    return Reads(top, "pod", log)


def _pods() -> list[Obj]:
    notes = {
        "vgpu.io/gpu-type": "A100",
        "vgpu.io/gpu-uuid-exclude": "GPU-1",
        "vgpu.io/cores-limit": "60",
        "vgpu.io/policy": "binpack",
        "vgpu.io/gang-name": "g",
        "vgpu.io/gang-size": "2",
        "vgpu.io/assignment": "{}",
        "vgpu.io/admitted": "true",
    }
    plain, rich = make_pod("a", cores=30), make_pod("b", cores=50, memory=8, annotations=notes)
    rich["metadata"] |= {"uid": "u", "deletionTimestamp": "x", "managedFields": [{}]}
    rich["spec"] |= {"nodeName": "n1", "initContainers": [dict(rich["spec"]["containers"][0])]}
    rich["spec"]["initContainers"][0] |= {"name": "init", "restartPolicy": "Always"}
    rich["status"] = {"phase": "Running", "conditions": [], "hostIP": "10.0.0.1"}
    group = make_pod("c", cores=10, labels={"scheduling.x-k8s.io/pod-group": "pg"})
    return [plain, rich, group]


@pytest.mark.parametrize("pod", _pods(), ids=["plain", "rich", "pod-group"])
def test_pod_spec_reads_nothing_the_digest_leaves_out(pod: Obj) -> None:
    log: set[str] = set()
    assert pod_spec(_watched(pod, log), memory_unit_mib=256) == pod_spec(pod, memory_unit_mib=256)
    outside = {read for read in log if not _held(*read.split(".", 1))}
    assert not outside, f"pod_spec reads {outside}: add them to read_digest"
    assert {"pod.spec", "metadata.annotations", "status.phase"} <= log  # the recording works


def _held(where: str, key: str) -> bool:
    """Whether the digest holds what was read (`*`: every key, by iterating)."""
    if where == "annotations":
        return key != "*" and key not in UNREAD_ANNOTATIONS
    return key in READ[where]


def test_versions_differing_in_what_is_not_read_share_a_digest() -> None:
    pod = make_pod("p", cores=30, annotations={"vgpu.io/gpu-type": "A100"})
    pod["metadata"] |= {"uid": "u", "resourceVersion": "1"}
    other = {**pod, "status": {"phase": "Succeeded", "hostIP": "10.0.0.1"}}
    other["metadata"] = {**pod["metadata"], "resourceVersion": "2", "managedFields": [{}]}
    other["metadata"]["annotations"] = {**pod["metadata"]["annotations"], "vgpu.io/admitted": "1"}
    other["spec"] = {**pod["spec"], "nodeName": "n1"}
    assert read_digest(other) == read_digest(pod) is not None
    for changed in (
        {**pod, "metadata": {**pod["metadata"], "uid": "u2"}},
        {**pod, "metadata": {**pod["metadata"], "labels": {"a": "b"}}},
        {**pod, "metadata": {**pod["metadata"], "annotations": {"vgpu.io/gpu-type": "H100"}}},
        {**pod, "spec": {**pod["spec"], "priority": 1}},
        {**pod, "spec": {**pod["spec"], "containers": [{"name": "other"}]}},
    ):
        assert read_digest(changed) != read_digest(pod)


@pytest.mark.parametrize("name", READ_METADATA)
def test_every_metadata_field_the_reader_reads_is_in_the_memo_key(name: str) -> None:
    pod = make_pod("p", cores=30, labels={"a": "b"}, annotations={"vgpu.io/gpu-type": "A100"})
    pod["metadata"] |= {"uid": "u"}
    changed = {**pod, "metadata": {**pod["metadata"], name: {"x": "1"}}}
    assert read_digest(changed) != read_digest(pod) is not None


def test_the_reader_sees_only_the_fields_of_its_table() -> None:
    pod = make_pod("p", cores=30)
    pod["metadata"] |= {"uid": "u", "generation": 3, "managedFields": [{}]}
    pod["status"] = {"phase": "Running", "hostIP": "10.0.0.1"}
    part = read_part(pod)
    assert set(part["metadata"]) == {k for k in READ_METADATA if k in pod["metadata"]}
    assert "generation" not in part["metadata"] and "managedFields" not in part["metadata"]
    assert part["status"] == {"phase": "Running"} and part["spec"] is pod["spec"]
    assert pod_spec(pod, memory_unit_mib=256) == pod_spec(part, memory_unit_mib=256)


def test_a_kept_parse_gets_each_versions_node_and_phase() -> None:
    memo = ParsedPods(lambda p: pod_spec(p, memory_unit_mib=256))
    pod = make_pod("p", cores=30)
    versions = []
    for rv, node, phase in [("1", "", "Pending"), ("2", "n1", "Running"), ("3", "n1", "Failed")]:
        pod = {**pod, "spec": {**pod["spec"], "nodeName": node}, "status": {"phase": phase}}
        pod["metadata"] = {**pod["metadata"], "uid": "u", "resourceVersion": rv}
        versions.append(pod)
    for pod in versions:
        assert memo.parse(pod) == pod_spec(pod, memory_unit_mib=256)
    assert memo.parse(versions[1]).node == "n1" and memo.parse(versions[2]).terminal


@pytest.mark.parametrize(
    "meta", [None, "x", {"name": "p", "annotations": ["x"]}, {"name": "p", "uid": 2**70}]
)
def test_an_unusual_pod_has_no_digest_and_is_parsed_each_time(meta: object) -> None:
    """Metadata or annotations that are not maps have no digest; a value JSON cannot carry
    falls back to the standard library's encoder (which writes it)."""
    pod: Obj = {"metadata": meta, "spec": {}}
    expected = meta["uid"] == 2**70 if isinstance(meta, dict) and "uid" in meta else False
    assert (read_digest(pod) is not None) is expected
    parsed: list[Obj] = []

    def parse(p: Obj) -> PodSpec:
        parsed.append(p)
        return pod_spec(make_pod("p"), memory_unit_mib=256)

    memo = ParsedPods(parse)
    pod = {"metadata": {"uid": "u", "resourceVersion": "1", "annotations": ["x"]}}
    memo.parse(pod)
    memo.parse({**pod, "metadata": {**pod["metadata"], "resourceVersion": "2"}})
    assert len(parsed) == 2
