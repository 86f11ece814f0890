"""`vgpu node-agent` watchdog flags: parsed into the policy, bad combinations named."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from vgpu.core.errors import ConfigError
from vgpu.daemons.node_agent.cli import add_parser, watchdog_policy
from vgpu.node.watchdog import WatchdogPolicy


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vgpu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["node-agent", *argv])


def test_defaults_report_only() -> None:
    args = _args()
    assert watchdog_policy(args) == WatchdogPolicy(kill=False, tolerance_bytes=0)
    assert args.watchdog_s == 10.0 and args.proc_root == Path("/proc")


def test_kill_and_tolerance() -> None:
    policy = watchdog_policy(_args("--watchdog-kill", "--watchdog-tolerance-mib", "512"))
    assert policy == WatchdogPolicy(kill=True, tolerance_bytes=512 * 1024 * 1024)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--watchdog-kill", "--proc-root", "/host/proc"], "--watchdog-kill: signals go to"),
        (["--watchdog-tolerance-mib", "-1"], "--watchdog-tolerance-mib: must be >= 0"),
        (["--watchdog-event-interval-s", "-5"], "--watchdog-event-interval-s: must be a number"),
        # nan let every finding through (an Event per check), inf kept every key for ever
        (["--watchdog-event-interval-s", "nan"], "--watchdog-event-interval-s: must be a number"),
        (["--watchdog-event-interval-s", "inf"], "--watchdog-event-interval-s: must be a number"),
    ],
)
def test_bad_flags_are_named(argv: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        watchdog_policy(_args(*argv))
