"""The device-plugin manager says what it does at INFO, one line per event (not per poll):
waiting for the kubelet, registered with the kubelet (naming the resources), re-registered
after the kubelet restarts; a failing registration warns once per streak."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from tests.kubelet_standin.kubelet import FakeKubelet
from tests.node.conftest import CORES, MEMORY, start_plugins
from tests.waiting import holds_within
from vgpu.adapters.fakegpu import parse_spec
from vgpu.adapters.kubelet.device_plugin import PluginOptions

LOGGER = "vgpu.adapters.kubelet.registration"


def lines(caplog: pytest.LogCaptureFixture, fragment: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER and r.levelno >= logging.INFO and fragment in r.getMessage()
    ]


def test_waits_once_then_registers_then_reregisters(
    sockdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    options = PluginOptions(
        plugin_dir=sockdir, register_timeout_s=2.0, stop_grace_s=0.2, poll_interval_s=0.02
    )
    plugins = start_plugins(parse_spec("1xT4"), options)
    kubelet = FakeKubelet(sockdir)
    try:
        time.sleep(0.3)  # some 15 polls without kubelet.sock
        assert lines(caplog, "waiting for the kubelet") == [
            f"waiting for the kubelet: {sockdir / 'kubelet.sock'} does not exist yet"
        ]
        kubelet.start()
        assert holds_within(lambda: lines(caplog, "registered with the kubelet"))
        assert lines(caplog, "registered with the kubelet") == [
            f"registered with the kubelet ({sockdir / 'kubelet.sock'}): {CORES}, {MEMORY}"
        ]
        kubelet.restart()
        assert holds_within(lambda: lines(caplog, "re-registered"))
        time.sleep(0.2)
        assert len(lines(caplog, "re-registered with the kubelet")) == 1
        # The restart may be seen mid-way (socket gone): that is a second wait, said once too.
        assert len(lines(caplog, "waiting for the kubelet")) in (1, 2)
    finally:
        plugins.manager.stop(0.2)
        kubelet.stop()


def test_failed_registrations_warn_once_per_streak(
    sockdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    kubelet = FakeKubelet(sockdir, fail_registrations=4)
    kubelet.start()
    options = PluginOptions(plugin_dir=sockdir, register_timeout_s=2.0, stop_grace_s=0.2)
    plugins = start_plugins(parse_spec("1xT4"), options)
    try:
        # Registration succeeds after the refusals' backoff (0.5 s doubling, per resource): wait
        # well past it; a wait of 8 s ran out once on a loaded machine.
        assert holds_within(plugins.manager.registered, timeout=30.0)
        # the line follows the last registration (a loaded machine ran the check in between)
        assert holds_within(lambda: lines(caplog, "registered with the kubelet"))
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) <= 2, [r.getMessage() for r in warnings]  # one per resource
        assert len(lines(caplog, "registered with the kubelet")) == 1
    finally:
        plugins.manager.stop(0.2)
        kubelet.stop()
