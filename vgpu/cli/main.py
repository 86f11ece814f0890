"""`vgpu`: one console script, subcommands imported only when used.

Subcommand modules expose ``add_parser(subparsers)`` (which sets ``run`` as a default) so that
`vgpu simulate` never imports gRPC, NVML or the Kubernetes client. Errors the project raises on
purpose become one line on stderr and exit status 2; nothing prints a traceback for bad input.
"""

from __future__ import annotations

import argparse
import importlib
import io
import logging
import os
import sys
from collections.abc import Sequence

from vgpu import __version__
from vgpu.core.errors import VgpuError
from vgpu.extras import ALL_DAEMONS, install_hint

COMMANDS: dict[str, tuple[str, str, str]] = {
    "simulate": ("vgpu.cli.simulate", "replay a cluster trace through the scheduling core", ""),
    "extender": ("vgpu.daemons.extender.cli", "run the kube-scheduler extender", "extender"),
    "node-agent": (
        "vgpu.daemons.node_agent.cli",
        "run the node agent (device plugin, labels, health)",
        "node",
    ),
    "dra-driver": (
        "vgpu.daemons.dra_driver.cli",
        "run the DRA driver (ResourceSlice, claim preparation, health)",
        "node",
    ),
    "inspect": ("vgpu.inspect.cli", "report GPU allocation per node and GPU", "cli"),
}
DAEMONS = frozenset({"extender", "node-agent", "dra-driver"})


def _parser() -> tuple[
    argparse.ArgumentParser, argparse._SubParsersAction[argparse.ArgumentParser]
]:
    parser = argparse.ArgumentParser(
        prog="vgpu", description="GPU sharing for Kubernetes: fractional GPUs, binpacking, gangs."
    )
    parser.add_argument("--version", action="version", version=f"vgpu {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def _load(name: str, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    module_name, _, extra = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        hint = f" (install it with: {install_hint(extra)})" if extra else ""
        raise VgpuError(f"`vgpu {name}` is unavailable: {err}{hint}") from err
    module.add_parser(sub)
    # -v after the subcommand too (`vgpu node-agent -v`); its own dest, because a subparser's
    # defaults overwrite the parent's values (argparse copies the whole sub-namespace back).
    sub.choices[name].add_argument(
        "-v", "--verbose", dest="sub_verbose", action="count", default=0, help="more logging"
    )


def _missing_extra(command: str | None, err: ModuleNotFoundError) -> VgpuError:
    """A package an optional extra provides is not installed: say which extra to install."""
    extra = COMMANDS[command][2] if command in COMMANDS else ""
    what = f"`vgpu {command}`" if command else "this command"
    hint = install_hint(extra or ALL_DAEMONS)
    return VgpuError(f"{what} needs the Python package {err.name!r}, not installed: {hint}")


def log_level(verbose: int, *, daemon: bool) -> int:
    """INFO for the daemons (they say what they do), WARNING for tools; each -v one step lower."""
    base = logging.INFO if daemon else logging.WARNING
    return max(logging.DEBUG, base - 10 * verbose)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser, sub = _parser()
    command = next((a for a in args_in if not a.startswith("-")), None)
    try:
        if command in COMMANDS:
            _load(command, sub)
        else:
            for name, (_, help_text, _) in COMMANDS.items():
                sub.add_parser(name, help=help_text, add_help=False)
        args = parser.parse_args(args_in)
        if args.command is None or not hasattr(args, "run"):
            parser.print_help()
            return 0 if args.command is None else 2
        verbose = args.verbose + getattr(args, "sub_verbose", 0)
        logging.basicConfig(
            level=log_level(verbose, daemon=command in DAEMONS),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        return int(args.run(args) or 0)
    except ModuleNotFoundError as err:
        print(f"vgpu: error: {_missing_extra(command, err)}", file=sys.stderr)
        return 2
    except VgpuError as err:
        print(f"vgpu: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 141  # 128 + SIGPIPE, as a tool killed by the closed pipe would end


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader (`| head`) has gone, and the interpreter's final
    flush would raise again on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file: nothing left to flush


if __name__ == "__main__":
    raise SystemExit(main())
