"""The node agent says what it does at INFO by default, one line per event with names: its GPUs,
registration with the kubelet, the pod watch's first sync; nothing more while it idles."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from tests.node.agent_harness import NODE, Box, make_box


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def test_start_up_says_each_event_once(box: Box, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="vgpu")
    box.start_agent()
    time.sleep(1.0)  # five reconcile periods, many manager polls
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert f"{NODE}: 2 GPU(s): ['Tesla T4', 'Tesla T4']" in said
    assert f"{NODE}: pod watch synced, 0 vgpu pod(s) bound here" in said
    registered = [m for m in said if m.startswith("registered with the kubelet")]
    assert registered == [
        f"registered with the kubelet ({box.dir / 'kubelet.sock'}): vgpu.io/cores, vgpu.io/memory"
    ]
    assert len(said) == len(set(said)), said  # nothing repeats while idle
