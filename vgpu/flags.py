"""Shared pieces of the command-line parsers: the help layout and value types argparse checks.

Every subcommand's parser uses `HelpFormatter`, so each flag's help ends with its default (an
operator should not have to read the source to learn that the metrics port is 9400). Value types
reject bad input at parse time, with argparse's usual one-line usage error and exit status 2.
"""

from __future__ import annotations

import argparse
import re

MAX_PORT = 65535
STATES_DEFAULT = re.compile(r"\(default[: ]|default: ")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to a flag's help unless the default is unset (None/False) or the
    help text already states it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or STATES_DEFAULT.search(text):
            return text
        return super()._get_help_string(action)


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (0: disabled or any free port, as the flag's help says)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-{MAX_PORT})") from None
    if not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{value} is not a port number: use 0-{MAX_PORT}")
    return value
