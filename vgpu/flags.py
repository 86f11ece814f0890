"""Shared pieces of the command-line parsers: the help layout and value types argparse checks.

Every subcommand's parser uses `HelpFormatter`, so each flag's help ends with its default (an
operator should not have to read the source to learn that the metrics port is 9400). Value types
reject bad input at parse time, with argparse's usual one-line usage error and exit status 2.
"""

from __future__ import annotations

import argparse
import re

from vgpu.core.errors import ConfigError, InvalidRequest
from vgpu.core.policy.specs import PolicySpec, parse_policy

MAX_PORT = 65535
MAX_WAIT_S = 86400.0
"""The longest wait a flag of seconds takes: `threading.Event.wait` raises OverflowError past the
platform's time_t (`inf`, `1e300`), which would end a loop at its first wait, and `nan` compares
false with everything (a loop that never waits, a deadline never reached), so both are refused
with the flag named; a day is longer than any interval, timeout or wait the daemons need."""
STATES_DEFAULT = re.compile(r"\(default[: ]|default: ")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to a flag's help unless the default is unset (None/False) or the
    help text already states it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or STATES_DEFAULT.search(text):
            return text
        if "%(default)" in text or not (action.option_strings or action.nargs in ("?", "*")):
            return text
        return f"{text} (default: {shown_default(action.default).replace('%', '%%')})"


def shown_default(value: object) -> str:
    """A default as a person types it: a value with a `name` (a policy) by that name, never its
    dataclass repr (`--help` once printed `PolicySpec(name='default', ...)`)."""
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value)


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (0: disabled or any free port, as the flag's help says)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-{MAX_PORT})") from None
    if not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{value} is not a port number: use 0-{MAX_PORT}")
    return value


def count(text: str) -> int:
    """A whole number, 0 or more (a width, a number of jobs or nodes; 0 as the flag's help
    says): a negative one is a usage error, not a silent surprise (`--width -5` was once taken)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0 or more)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: use 0 or more")
    return value


def seconds(
    flag: str,
    value: float,
    *,
    example: str,
    positive: bool = False,
    high: float = MAX_WAIT_S,
    note: str = "",
) -> float:
    """`value`, a flag's number of seconds, if it lies from 0 (`positive`: above 0) to `high`;
    else `ConfigError` naming the flag and the range (`note`: what else the flag takes). Every
    comparison with nan is false, so nan is refused here as `inf` and `1e300` are."""
    low_ok = value > 0 if positive else value >= 0
    if low_ok and value <= high:
        return value
    what = "a positive number of seconds, at most" if positive else "a number of seconds from 0 to"
    raise ConfigError(f"{flag}: must be {what} {high:g}{note}, e.g. {example} (got {value:g})")


def add_path_flag(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    default: str,
    help: str,
    *,
    metavar: str | None = None,
) -> None:
    """A flag naming a file or directory on the node, with its default (the daemons have many:
    the kubelet's sockets, the host's procfs and cgroup tree, vgpu's state directory)."""
    from pathlib import Path

    p.add_argument(flag, type=Path, default=Path(default), help=help, metavar=metavar)


def policy_spec(text: str, flag: str) -> PolicySpec:
    """A policy name (or `default:key=value,...` spec) for `flag`, parsed once, at start-up; the
    extender's `--policy` and the web view's, so both accept and refuse the same names."""
    try:
        return parse_policy(text, flag)
    except InvalidRequest as err:  # argparse names the flag itself ("argument --policy: ")
        fix = f" ({err.fix})" if err.fix else ""
        raise argparse.ArgumentTypeError(f"{err.problem}{fix}") from None


def add_policy_flags(parser: argparse.ArgumentParser, *, policy: str, allow: str) -> None:
    """`--policy` and the repeatable `--allow-pod-policy`, parsed alike wherever they are
    taken (the extender places with them; the web view is told the extender's)."""
    parser.add_argument(
        "--policy",
        default=policy_spec("default", "--policy"),
        type=lambda text: policy_spec(text, "--policy"),
        help=policy,
    )
    parser.add_argument(
        "--allow-pod-policy",
        action="append",
        default=[],
        type=lambda text: policy_spec(text, "--allow-pod-policy"),
        metavar="NAME",
        help=allow,
    )
