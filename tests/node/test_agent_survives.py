"""The node agent's maintenance loop survives any exception in one duty, and a loop that ended
or stopped turning turns `/healthz` red (the kubelet then restarts it): it once died on one
exception while `/healthz` stayed 200."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node.agent_harness import NODE, Box, make_box
from tests.waiting import holds_within
from vgpu.adapters.liveness import Liveness
from vgpu.agent.maintenance import LOOP
from vgpu.api.inventory import InventoryError, parse_inventory

INVENTORY = "vgpu.io/gpu-inventory"
HUGE = "9" * 4301


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def _inventory(box: Box) -> str:
    node = box.api.store.get("Node", None, NODE)
    assert node is not None
    return str(node["metadata"]["annotations"][INVENTORY])


def _readable(text: str) -> bool:
    try:
        parse_inventory(text)
    except InventoryError:
        return False
    return True


def _healthz(port: int | None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "value", [f'{{"version":1,"memoryUnitMiB":{HUGE},"gpus":[]}}', "[" * 50_000]
)
def test_the_agent_repairs_its_own_unreadable_inventory_annotation(box: Box, value: str) -> None:
    agent = box.start_agent(metrics_port=0)
    node = box.api.store.get("Node", None, NODE)
    assert node is not None
    node["metadata"]["annotations"][INVENTORY] = value  # NodeRestriction lets a node do this
    box.api.store.put(node)
    agent.publisher.dirty = True
    assert holds_within(lambda: _readable(_inventory(box)))
    assert _healthz(agent.metrics.port)[0] == 200


@pytest.mark.timeout(30)
def test_a_duty_that_raises_is_logged_and_retried_and_the_loop_goes_on(box: Box) -> None:
    agent = box.start_agent(metrics_port=0)
    calls: list[int] = []
    real = agent.publisher.patch_admitted

    def flaky() -> bool:
        calls.append(1)
        if len(calls) <= 2:
            raise RuntimeError("a bug in one duty")
        return real()

    agent.publisher.patch_admitted = flaky  # type: ignore[method-assign]
    agent._wake.set()
    assert holds_within(lambda: len(calls) >= 3)
    assert agent.liveness.failures == {"writing vgpu.io/admitted": 2}
    assert _healthz(agent.metrics.port)[0] == 200
    assert agent.liveness.why_not_live() is None


@pytest.mark.timeout(30)
def test_healthz_turns_red_when_the_maintenance_loop_has_ended(box: Box) -> None:
    agent = box.start_agent(metrics_port=0)
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    agent.liveness.register(LOOP, ended, 60.0)  # as if the loop's thread had died
    status, body = _healthz(agent.metrics.port)
    assert status == 503
    assert "maintenance loop has ended" in body


def test_a_loop_that_stops_beating_is_reported_stuck() -> None:
    now = [0.0]
    liveness = Liveness(lambda: now[0])
    liveness.register("sweeper", None, 10.0)
    now[0] = 9.0
    assert liveness.why_not_live() is None
    liveness.beat("sweeper")
    now[0] = 18.0
    assert liveness.why_not_live() is None
    now[0] = 19.5
    assert liveness.why_not_live() == "the sweeper loop has not turned for 10s"


def test_run_duty_answers_an_exception_as_a_failure(caplog: Any) -> None:
    liveness = Liveness()

    def boom() -> bool:
        raise ValueError("x" * 10)

    assert liveness.run_duty("duty", boom) is False
    assert liveness.run_duty("duty", lambda: True) is True
    assert liveness.failures == {"duty": 1}
    assert "duty failed" in caplog.text
