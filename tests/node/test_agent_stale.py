"""The agent publishes devices the kubelet's checkpoint holds for pods gone from the node.

A kubelet restarting before it frees a deleted pod's devices reloads them from its checkpoint
and admits its first pods without them (docs/handshake.md, "Devices the kubelet still counts after
its restart"). The agent reads that checkpoint and publishes such devices per GPU as
`kubeletStale` in the inventory annotation until the kubelet has dropped them; meanwhile it asks
the kubelet to free them (pod-resources `List`) and to checkpoint that (device lists resent).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node.agent_harness import CORES, MEMORY, NODE, Box, make_box
from tests.waiting import holds_within
from vgpu.api.inventory import parse_inventory
from vgpu.node.checkpoint import CHECKPOINT_FILE


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def _write(box: Box, *entries: tuple[str, str, list[str]]) -> None:
    doc = {
        "Data": {
            "PodDeviceEntries": [
                {"PodUID": uid, "ContainerName": "main", "ResourceName": r, "DeviceIDs": {"0": ids}}
                for uid, r, ids in entries
            ],
            "RegisteredDevices": {},
        },
        "Checksum": 0,
    }
    (box.dir / CHECKPOINT_FILE).write_text(json.dumps(doc))


def _stale(box: Box) -> dict[str, tuple[int, int]]:
    node: dict[str, Any] = box.api.store.get("Node", None, NODE) or {}
    text = (node["metadata"].get("annotations") or {}).get("vgpu.io/gpu-inventory")
    if text is None:
        return {"?": (-1, -1)}
    inv = parse_inventory(text)
    return {g.uuid: (g.stale_cores, g.stale_memory_mib) for g in inv.gpus if g.stale_cores}


def test_a_deleted_pods_checkpointed_devices_are_published_until_the_kubelet_drops_them(
    box: Box,
) -> None:
    agent = box.start_agent(stale_sync_s=0.1, reconcile_s=60)
    pod = box.place("a", [("main", 30, 2)], {"main": [(0, 30)]})
    gpu = box.gpus[0]
    cores = [f"{gpu}::c{i}" for i in range(30)]
    memory = [f"{gpu}::m{i}" for i in range(2)]
    _write(box, (pod["metadata"]["uid"], CORES, cores), (pod["metadata"]["uid"], MEMORY, memory))
    assert not holds_within(lambda: _stale(box) != {}, 0.5), "a live pod's devices are not stale"
    before = box.kubelet.connection(CORES).updates
    box.api.store.remove("Pod", "default", "a")
    assert holds_within(lambda: _stale(box) == {gpu: (30, 2 * 1024)}), _stale(box)
    # Until the kubelet has dropped them, the agent has it free them and checkpoint again.
    assert box.kubelet.wait_for(lambda: box.kubelet.connection(CORES).updates > before + 1)
    _write(box)  # the kubelet's checkpoint after that
    assert holds_within(lambda: _stale(box) == {}), _stale(box)
    assert agent.ready()


def test_a_broken_checkpoint_is_logged_once_and_publishes_nothing(
    box: Box, caplog: pytest.LogCaptureFixture
) -> None:
    (box.dir / CHECKPOINT_FILE).write_text("{not json")
    # logger="vgpu": other test modules quiet it to ERROR when collected with this one.
    with caplog.at_level(logging.WARNING, logger="vgpu"):
        agent = box.start_agent(stale_sync_s=0.1, reconcile_s=0.2)

        def said() -> int:
            return sum("not published" in r.getMessage() for r in caplog.records)

        assert holds_within(lambda: said() >= 1, 10)
        assert CHECKPOINT_FILE in caplog.text and "not valid JSON" in caplog.text
        assert _stale(box) == {}
        assert not holds_within(lambda: said() > 1, 0.6), "logged once, not at every step"
    assert agent.ready()


def test_with_an_unreadable_checkpoint_a_deletion_is_followed_by_list_alone(
    box: Box, caplog: pytest.LogCaptureFixture
) -> None:
    """The fallback: nothing can be judged from the checkpoint, so after a deletion the agent
    calls `List` until the kubelet no longer reports the pod (its grace period), and only then
    sends its device lists again (the kubelet checkpoints what that List freed)."""
    (box.dir / CHECKPOINT_FILE).write_text('{"Data": {"PodDeviceEntries": 3}}')  # a format unknown
    with caplog.at_level(logging.INFO, logger="vgpu"):
        agent = box.start_agent(stale_sync_s=0.1, reconcile_s=60)
        box.place("a", [("main", 30, 0)], {"main": [(0, 30)]})
        box.admit("a", "main", CORES, 30)
        assert holds_within(lambda: box.admitted("a") == ["main"])
        before = box.kubelet.connection(CORES).updates
        box.api.store.remove("Pod", "default", "a")  # the kubelet still reports it: terminating
        assert holds_within(lambda: agent.stale.following == ("default/a",))
        assert not holds_within(lambda: box.kubelet.connection(CORES).updates > before, 0.6), (
            "device lists resent while the kubelet still holds the pod"
        )
        box.podres.pods.clear()  # the kubelet dropped it; the agent's next List freed it
        assert box.kubelet.wait_for(lambda: box.kubelet.connection(CORES).updates > before)
        assert holds_within(lambda: not agent.stale.following)
        assert "deleted pod(s) default/a freed by the kubelet" in caplog.text
        assert "pod-resources List alone" in caplog.text and _stale(box) == {}
