"""Reading the kubelet's device checkpoint: the devices it would reload on a restart that belong
to pods no longer bound here (docs/handshake.md, "Devices the kubelet still counts after its
restart")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.adapters.kubelet.checkpoint import read_checkpoint
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.core.ids import PodKey
from vgpu.node.checkpoint import (
    CheckpointError,
    CheckpointRead,
    StaleDevices,
    checkpointed_holdings,
    parse_checkpoint,
    stale_devices,
)
from vgpu.node.devices import UnitKind

UNIT = 256


def _entry(uid: str, resource: str, ids: list[str], *, numa: bool = True) -> dict[str, Any]:
    return {
        "PodUID": uid,
        "ContainerName": "main",
        "ResourceName": resource,
        "DeviceIDs": {"-1": ids} if numa else ids,
        "AllocResp": "",
    }


def _text(*entries: dict[str, Any]) -> str:
    doc = {"Data": {"PodDeviceEntries": list(entries), "RegisteredDevices": {}}, "Checksum": 1}
    return json.dumps(doc)


CORES = [f"GPU-a::c{i}" for i in range(30)]
MEMORY = [f"GPU-a::m{i}" for i in range(10)]
TEXT = _text(
    _entry("dead", DEFAULT_NAMES.cores, CORES),
    _entry("dead", DEFAULT_NAMES.memory, MEMORY, numa=False),
    _entry("live", DEFAULT_NAMES.cores, ["GPU-b::c0"]),
    _entry("other", "nvidia.com/gpu", ["GPU-x"]),
)


def test_stale_devices_are_those_of_pods_no_longer_bound_here() -> None:
    stale = stale_devices(parse_checkpoint(TEXT), {"live"}, DEFAULT_NAMES, UNIT)
    assert stale == {"GPU-a": StaleDevices(cores=30, memory_mib=10 * UNIT, pods=("dead",))}
    assert stale_devices(parse_checkpoint(TEXT), {"live", "dead"}, DEFAULT_NAMES, UNIT) == {}


def test_devices_an_app_container_reuses_from_an_init_container_count_once() -> None:
    """The kubelet checkpoints one entry per container; an app container that drew its devices
    from the pod's reuse pool (manager.go `devicesToReuse`) lists the init container's IDs."""
    init = _entry("dead", DEFAULT_NAMES.cores, CORES[:20]) | {"ContainerName": "setup"}
    app = _entry("dead", DEFAULT_NAMES.cores, CORES) | {"ContainerName": "main"}
    memory = _entry("dead", DEFAULT_NAMES.memory, MEMORY) | {"ContainerName": "setup"}
    reused = _entry("dead", DEFAULT_NAMES.memory, MEMORY[:4]) | {"ContainerName": "main"}
    stale = stale_devices(
        parse_checkpoint(_text(init, app, memory, reused)), set(), DEFAULT_NAMES, UNIT
    )
    assert stale == {"GPU-a": StaleDevices(cores=30, memory_mib=10 * UNIT, pods=("dead",))}


def test_a_missing_checkpoint_is_not_read_and_no_problem(tmp_path: Path) -> None:
    """The kubelet writes it at its first device-plugin update; until then nothing is judged
    from it (the agent follows deletions by pod-resources List alone)."""
    got = read_checkpoint(tmp_path / "kubelet_internal_checkpoint")
    assert got.entries is None and got.problem is None


def test_a_broken_checkpoint_is_a_named_problem(tmp_path: Path) -> None:
    path = tmp_path / "kubelet_internal_checkpoint"
    for text, word in [
        ("{not json", "JSON"),
        ("[]", "object"),
        ('{"Data": {"PodDeviceEntries": 3}}', "PodDeviceEntries"),
        ('{"Data": {"PodDeviceEntries": [{"PodUID": 1}]}}', "PodUID"),
        (_text(_entry("u", DEFAULT_NAMES.cores, [])).replace("[]", "7", 1), "DeviceIDs"),
    ]:
        path.write_text(text)
        got = read_checkpoint(path)
        problem = got.problem
        assert got.entries is None and problem is not None and word in problem, (text, problem)
        assert str(path.name) in problem


def test_a_readable_checkpoint_gives_its_entries_and_a_directory_is_a_problem(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kubelet_internal_checkpoint"
    path.write_text(TEXT)
    assert read_checkpoint(path) == CheckpointRead(parse_checkpoint(TEXT))
    path.unlink()
    path.mkdir()  # an OSError other than a missing file, as a permission error would be
    got = read_checkpoint(path)
    assert got.entries is None and "cannot read the kubelet's device checkpoint" in str(got.problem)


def test_foreign_device_ids_of_our_resources_are_skipped() -> None:
    text = _text(_entry("dead", DEFAULT_NAMES.cores, ["not-ours", "GPU-a::c1"]))
    stale = stale_devices(parse_checkpoint(text), set(), DEFAULT_NAMES, UNIT)
    assert stale == {"GPU-a": StaleDevices(cores=1, memory_mib=0, pods=("dead",))}


@given(st.text(max_size=200))
def test_any_text_parses_or_names_its_problem(text: str) -> None:
    try:
        parse_checkpoint(text)
    except ValueError as err:
        assert "kubelet_internal_checkpoint" in str(err)


def test_each_container_of_a_known_pod_is_one_holding_per_kind() -> None:
    """Regular init containers are known only from the checkpoint (the List leaves them out):
    each entry keeps its `ContainerName`, and the entries of pods the ledger knows by UID become
    one holding per container and kind, each ID once (a NUMA map may name one twice)."""
    init = _entry("u1", DEFAULT_NAMES.cores, CORES[:3]) | {"ContainerName": "setup"}
    init["DeviceIDs"] = {"0": CORES[:3], "1": CORES[2:3]}
    entries = parse_checkpoint(
        _text(
            init,
            _entry("u1", DEFAULT_NAMES.memory, MEMORY[:2]) | {"ContainerName": "setup"},
            _entry("u2", DEFAULT_NAMES.cores, CORES[3:5]),
            _entry("u1", "nvidia.com/gpu", ["GPU-x"]) | {"ContainerName": "setup"},
        )
    )
    assert [e.container for e in entries] == ["setup", "setup", "main", "setup"]
    held = checkpointed_holdings(entries, {"u1": PodKey("ns/p")}, DEFAULT_NAMES)
    assert [(h.pod, h.container, h.kind, h.ids) for h in held] == [
        ("ns/p", "setup", UnitKind.CORES, tuple(CORES[:3])),
        ("ns/p", "setup", UnitKind.MEMORY, tuple(MEMORY[:2])),
    ]


def test_a_container_name_that_is_not_a_string_is_named() -> None:
    bad = _entry("u1", DEFAULT_NAMES.cores, CORES[:1]) | {"ContainerName": 7}
    with pytest.raises(CheckpointError, match=r"PodDeviceEntries\[0\]\.ContainerName"):
        parse_checkpoint(_text(bad))
