"""Every reader of cluster data, fed hostile input (random JSON, integers past Python's 4,300-digit
limit, deep nesting, oversized strings), returns a value or raises its own error, nothing else
(a bare `ValueError` or `RecursionError` once escaped them)."""

from __future__ import annotations

import bisect
import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.extender.builders import make_node, make_pod
from vgpu.adapters.dra_checkpoint import Checkpoint
from vgpu.api.admitted import ADMITTED, read_admitted
from vgpu.api.assignment import ASSIGNMENT, SIGNATURE, decode, verify
from vgpu.api.gang import GANG_NAME, GANG_SIZE, gang_ref
from vgpu.api.inventory import InventoryError, parse_inventory
from vgpu.api.nodespec import node_spec
from vgpu.api.podasks import pod_asks
from vgpu.api.podread import CORES_LIMIT, cores_limit
from vgpu.api.podspec import pod_spec
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.core.errors import InvalidRequest
from vgpu.node.checkpoint import CheckpointError, parse_checkpoint, stale_devices
from vgpu.node.devices import DeviceIdError, parse_unit_id
from vgpu.node.podspec import pod_info

HUGE_DIGITS = "9" * 5000
"""An integer past `sys.get_int_max_str_digits()` (4,300): `int()` and `json.loads` raise."""
TOKENS = (
    HUGE_DIGITS,
    "-" + "9" * 4301,
    "1e400",
    "NaN",
    "[" * 100_000,
    '{"a":' * 50_000,
    '"' + "x" * 300_000 + '"',
    '"\\ud800"',
    "[[[[1]]]]",
    "null",
    "{}",
)
INVENTORY = make_node("n1", gpus=2)["metadata"]["annotations"]["vgpu.io/gpu-inventory"]
ASSIGNED = make_pod("p", cores=10)
CHECKPOINT = json.dumps(
    {
        "Data": {
            "PodDeviceEntries": [
                {"PodUID": "u", "ResourceName": "vgpu.io/cores", "DeviceIDs": {"0": ["G::c1"]}}
            ]
        }
    },
    separators=(",", ":"),
)


def _spliced(template: str) -> st.SearchStrategy[str]:
    """The template with one scalar value replaced by a hostile token."""
    slots = [m.span() for m in re.finditer(r'(?<=[:\[])(-?\d+|"[^"]*"|true|false|null)', template)]
    return st.builds(
        lambda slot, token: template[: slot[0]] + token + template[slot[1] :],
        st.sampled_from(slots),
        st.sampled_from(TOKENS),
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def _texts(template: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(TOKENS), _spliced(template), JSON.map(json.dumps), st.text(max_size=50)
    )


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


HOSTILE_VALUES = st.one_of(  # what a JSON decoder can produce: ints of at most 4,300 digits
    JSON,
    st.sampled_from([10**4299, -(10**4299), "x" * 300_000, float("inf"), float("nan")]),
    st.sampled_from(["<deep 100>", "<deep 5000>"]),  # built in the test: unprintable
)


def _raises_only(error: type[Exception], read: Callable[[], Any]) -> None:
    """Run a reader: its own error is an answer; anything else fails the test."""
    with contextlib.suppress(error):
        read()


FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(_texts(INVENTORY))
def test_inventory_reader_raises_only_inventory_error(text: str) -> None:
    _raises_only(InventoryError, lambda: parse_inventory(text))


@FAST
@given(_texts(INVENTORY))
def test_node_reader_never_raises_and_names_the_unreadable_inventory(text: str) -> None:
    node = make_node("n1", inventory=text)
    spec = node_spec(node)
    if spec.node.gpus:
        assert spec.problem is None
    else:
        assert spec.problem


@FAST
@given(_texts('{"a":true,"b":["main","x"],"c":1}'))
def test_admitted_reader_never_raises(text: str) -> None:
    admitted = read_admitted(text)
    if admitted.problem:
        assert not admitted.names and not admitted.everyone
        assert len(admitted.problem) < 400


@FAST
@given(_texts('{"v":1,"pod":"default/p","uid":"u","node":"n","cpuMilli":1,"memoryMiB":2}'))
def test_assignment_reader_raises_only_invalid_request(text: str) -> None:
    _raises_only(InvalidRequest, lambda: decode(text))
    assert verify({ASSIGNMENT: text, SIGNATURE: "0" * 64}, b"k") is None


@FAST
@given(_texts(CHECKPOINT))
def test_checkpoint_reader_raises_only_checkpoint_error(text: str) -> None:
    try:
        entries = parse_checkpoint(text)
    except CheckpointError:
        return
    stale_devices(entries, set(), DEFAULT_NAMES, 256)


@FAST
@given(st.text(max_size=30) | st.sampled_from(["G::c" + HUGE_DIGITS, "G::m²", "G::c0"]))
def test_device_id_reader_raises_only_device_id_error(text: str) -> None:
    _raises_only(DeviceIdError, lambda: parse_unit_id(text))


def test_a_checkpoint_entry_with_a_huge_unit_index_is_not_ours() -> None:
    entries = parse_checkpoint(CHECKPOINT.replace("G::c1", "G::c" + HUGE_DIGITS))
    assert stale_devices(entries, set(), DEFAULT_NAMES, 256) == {}


@FAST
@given(_texts('{"v":1,"claims":{"u":{"namespace":"n","name":"c","devices":[],"cdiSpec":{}}}}'))
def test_dra_checkpoint_loader_never_raises(tmp_path_factory: Any, text: str) -> None:
    path = Path(tmp_path_factory.mktemp("dra")) / "checkpoint.json"
    path.write_text(text, errors="surrogatepass")
    Checkpoint(path)  # an unreadable file is set aside, never raised


_PLACES = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("metadata", "annotations", GANG_NAME),
    ("metadata", "annotations", GANG_SIZE),
    ("metadata", "annotations", CORES_LIMIT),
    ("metadata", "annotations", ADMITTED),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "uid"),
    ("spec",),
    ("spec", "containers"),
    ("spec", "containers", 0, "resources"),
    ("spec", "containers", 0, "resources", "limits", "vgpu.io/cores"),
    ("spec", "overhead"),
    ("status",),
)


def _planted(place: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    pod = make_pod("p", cores=10, annotations={GANG_NAME: "g", GANG_SIZE: "2"})
    target: Any = pod
    for step in place[:-1]:
        target = target[step]
    target[place[-1]] = value
    return pod


@FAST
@given(st.sampled_from(_PLACES), HOSTILE_VALUES)
def test_pod_readers_raise_only_their_own_errors(place: tuple[str, ...], value: Any) -> None:
    if value in ("<deep 100>", "<deep 5000>"):
        value = _deep(int(value[6:-1]))
    pod = _planted(place, value)
    meta = pod["metadata"]
    _raises_only(InvalidRequest, lambda: gang_ref(meta))
    _raises_only(InvalidRequest, lambda: pod_spec(pod, memory_unit_mib=256))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        cores_limit(annotations)
        read_admitted(annotations.get(ADMITTED))
    pod_asks(pod)
    if isinstance(meta, dict) and isinstance(pod.get("spec"), dict | None):
        pod_info(pod)


@pytest.mark.parametrize("token", TOKENS)
def test_the_guard_error_is_a_value_error_with_a_short_message(token: str) -> None:
    with pytest.raises(InventoryError) as caught:
        parse_inventory(token)
    assert isinstance(caught.value, ValueError)
    assert len(str(caught.value)) < 400


def test_the_extender_writes_no_assignment_the_agent_would_not_read() -> None:
    """One bound, `MAX_ASSIGNMENT_CHARS`, on both sides: what `binding_annotations`
    refuses is exactly what `verify` would call unreadable, however well signed."""
    from vgpu.api.assignment import binding_annotations, encode, sign, verify
    from vgpu.api.decode import MAX_ASSIGNMENT_CHARS
    from vgpu.core.errors import InvalidRequest
    from vgpu.core.ids import GpuUUID, NodeName, PodKey
    from vgpu.core.model import Assignment, ContainerAssignment, GpuShare

    def of(containers: int) -> Assignment:
        share = (GpuShare(GpuUUID("GPU-" + "0" * 36), 1, 0),)
        named = (ContainerAssignment(f"c{i:03d}-" + "x" * 50, share) for i in range(containers))
        return Assignment(PodKey("ns/p"), NodeName("n"), containers=tuple(named), uid="u")

    fits = bisect.bisect_right(
        range(1, 2000), MAX_ASSIGNMENT_CHARS, key=lambda n: len(encode(of(n)))
    )  # the most containers whose text is within the bound
    written = binding_annotations(of(fits), b"k")
    assert verify(written, b"k") == of(fits)
    text = encode(of(fits + 1))
    with pytest.raises(InvalidRequest, match="a node agent reads"):
        binding_annotations(of(fits + 1), b"k")
    assert (
        verify({"vgpu.io/assignment": text, "vgpu.io/assignment-signature": sign(text, b"k")}, b"k")
        is None
    )
