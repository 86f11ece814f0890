"""The queue leader tells the cluster what it acts on: each pass carries its identity and the
configuration in force on its Lease (the last good one while the ConfigMap is refused), and a
refused ConfigMap fixed again is logged."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tests.extender.builders import make_node
from tests.extender.conftest import Harness
from tests.extender.lease_stub import Lease
from tests.extender.test_queue_release import _config, _daemon
from vgpu.api.queues.in_force import (
    IN_FORCE_ANNOTATION,
    MAX_RECORD_CHARS,
    InForce,
    decode_in_force,
    encode_in_force,
)
from vgpu.extender.queues.release_loop import QueueReleaser
from vgpu.extender.queues.release_pass import QueueIndex

GOOD = json.dumps({"queues": [{"name": "a", "namespaces": ["default"]}]})
BAD = json.dumps({"queues": [{"name": "a", "weight": 0, "namespaces": ["default"]}]})


def _releaser(harness: Harness, lease: Lease) -> QueueReleaser:
    daemon = _daemon(harness)
    return QueueReleaser(
        daemon.api,
        QueueIndex(daemon.extender.queue_parts()),
        namespace="vgpu",
        config_map="vgpu-queues",
        may_act=lambda: None,
        notes=lease,
        holder="extender-0",
    )


def test_the_lease_carries_the_configuration_in_force_and_keeps_the_good_one_when_refused(
    harness: Harness, caplog: Any
) -> None:
    harness.put(make_node("n1", gpus=1))
    lease = Lease()
    releaser = _releaser(harness, lease)
    _config(harness, GOOD)
    releaser.pass_once()
    good = InForce("extender-0", GOOD)
    assert decode_in_force(lease.annotation(IN_FORCE_ANNOTATION)) == good
    _config(harness, BAD)
    releaser.pass_once()
    assert decode_in_force(lease.annotation(IN_FORCE_ANNOTATION)) == good
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="vgpu.extender.queues.release_loop"):
        fixed = json.dumps({"queues": [{"name": "a", "weight": 2, "namespaces": ["default"]}]})
        _config(harness, fixed)
        releaser.pass_once()
    assert decode_in_force(lease.annotation(IN_FORCE_ANNOTATION)) == InForce("extender-0", fixed)
    assert "vgpu/vgpu-queues is readable again" in caplog.text


def test_without_a_configmap_the_lease_says_queues_run_with_none(harness: Harness) -> None:
    lease = Lease()
    _releaser(harness, lease).pass_once()
    assert decode_in_force(lease.annotation(IN_FORCE_ANNOTATION)) == InForce("extender-0", "{}")


@pytest.mark.parametrize(
    "value",
    ["[" * 100_000, json.dumps({"holder": "x", "queuesJson": "a" * (MAX_RECORD_CHARS + 1)})],
)
def test_a_hostile_in_force_record_reads_as_none_through_the_bounded_decoder(value: str) -> None:
    """Nested past the parser's depth, or longer than any record the leader writes: unreadable,
    never an exception out of the report."""
    assert decode_in_force(value) is None


def test_a_record_too_long_to_carry_keeps_its_holder_and_leaves_the_text_off() -> None:
    """Escapes lengthen the text (non-ASCII, quotes): the encoded record is what is bounded."""
    text = json.dumps({"queues": [{"name": "é" * 20_000}]}, ensure_ascii=False)  # 20 KiB
    value = encode_in_force("extender-0", text)
    assert len(value) <= MAX_RECORD_CHARS
    assert decode_in_force(value) == InForce("extender-0", None)
    short = encode_in_force("extender-0", "{}")
    assert decode_in_force(short) == InForce("extender-0", "{}")
