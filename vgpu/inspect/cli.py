"""`kubectl inspect vgpu` / `vgpu inspect`: argument parsing and the one place errors become exits.

`add_parser(subparsers)` registers the `inspect` subcommand of `vgpu`; `main()` is the
`kubectl-inspect-vgpu` console script (kubectl runs it for `kubectl inspect vgpu`). Exit status:
0 report shown, 1 the report could not be made or a NODE named does not exist (message on
stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import os
import re
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from vgpu.api.resources import DEFAULT_DOMAIN, ResourceNames, resource_names
from vgpu.core.errors import VgpuError
from vgpu.extras import install_hint
from vgpu.flags import HelpFormatter, count
from vgpu.inspect import queues_cmd
from vgpu.inspect.build import build_report
from vgpu.inspect.details import render_details
from vgpu.inspect.export import render_json, render_yaml
from vgpu.inspect.lease import DEFAULT_LEASE, parse_time
from vgpu.inspect.model import Report
from vgpu.inspect.namespace import only_namespace
from vgpu.inspect.selector import Test, parse_selector
from vgpu.inspect.snapshot import Snapshot, dumps, loads
from vgpu.inspect.table import render_table
from vgpu.inspect.web import serve_cmd

DESCRIPTION = (
    "Show how the cluster's GPUs are shared: per node and GPU index the cores (100 per GPU) and "
    "memory in use, what is bound but not yet admitted (PENDING), unhealthy GPUs, and with -d "
    "which pods hold which share and the state of each gang. Reads nodes and pods from the API "
    "server (read-only), or a saved snapshot with --fake-cluster. With --serve, the same as a "
    "live web page (docs/web-view.md)."
)


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="only these nodes")
    parser.add_argument(
        "-d", "--details", action="store_true", help="per GPU: pods, containers, gangs"
    )
    parser.add_argument(
        "-o", "--output", choices=("table", "json", "yaml"), default="table", help="format"
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster or KUBECONFIG)")
    parser.add_argument("--context", help="kubeconfig context to use (default: its current one)")
    parser.add_argument(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="only nodes with these labels, as kubectl takes them (e.g. 'pool=a100,!spot')",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        metavar="NAMESPACE",
        help="name only this namespace's pods (holders, waiting pods, gangs, problems); the GPU "
        "totals still count every pod, the others' folded into one line per GPU",
    )
    parser.add_argument(
        "--width",
        type=count,
        metavar="COLUMNS",
        help="condense the table to fit (default: the terminal's width, $COLUMNS; 0: never)",
    )
    parser.add_argument(
        "--resource-domain",
        default=DEFAULT_DOMAIN,
        help="domain of the vgpu resources and inventory annotation, as the node agents' "
        "--resource-domain (default vgpu.io)",
    )
    parser.add_argument(
        "--extender-lease",
        metavar="NAMESPACE/NAME",
        type=lease_name,
        default=DEFAULT_LEASE,
        help="the extender's leader Lease, whose holder and age say whether it is up (as its "
        "--lease-namespace and --lease-name)",
    )
    parser.add_argument(
        "--fake-cluster",
        metavar="FILE",
        type=Path,
        help="render from a saved snapshot (YAML/JSON: a ClusterSnapshot or a kubectl List)",
    )
    parser.add_argument(
        "--save-snapshot",
        metavar="FILE",
        type=Path,
        help="also write the cluster as read to FILE (trimmed; .json for JSON, else YAML)",
    )
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="a Prometheus that scrapes vgpu (e.g. http://prometheus.monitoring:9090): the "
        "report adds REAL USE per GPU (memory in use, busy %%) from the node agents' series; "
        "with --serve, the queues' share-over-time chart shows the extender's last hour",
    )
    queues_cmd.add_flags(parser)
    serve_cmd.add_flags(parser)
    parser.set_defaults(run=run)
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `inspect` on the `vgpu` command's subparsers."""
    parser = subparsers.add_parser(
        "inspect",
        help="show GPU sharing per node and GPU",
        description=DESCRIPTION,
        formatter_class=HelpFormatter,
    )
    return configure(parser)


def run(args: argparse.Namespace) -> int:
    """Print the report; 1 when it cannot be made or a NODE named does not exist."""
    if args.serve:
        return _serve(args)
    try:
        names = resource_names(args.resource_domain)
        matches = parse_selector(args.selector) if args.selector else None
        if args.save_snapshot and not args.save_snapshot.parent.is_dir():  # before the reading
            raise InspectUsageError(
                f"--save-snapshot: {args.save_snapshot.parent} is not an existing directory"
            )
        with _no_gc():  # ~60,000 dicts per 1,000 nodes and no cycles: collection is waste
            snapshot, live = _snapshot(args)
            if args.save_snapshot:
                as_json = args.save_snapshot.suffix.lower() == ".json"
                text = dumps(snapshot, as_json=as_json, names=names)
                args.save_snapshot.write_text(text, encoding="utf-8")
            now = parse_time(snapshot.taken_at)  # dates the extender's Lease
            if live:  # the "snapshot taken at" header is for saved files only
                snapshot = dataclasses.replace(snapshot, taken_at="")
            if args.queues:
                sys.stdout.write(_queues(args, snapshot, names))
                return 0
            wanted = _wanted(snapshot, args.nodes, matches)
            if not wanted and matches is not None:
                print(f"No node matches the selector {args.selector!r}.", file=sys.stderr)
                return 0
            report = build_report(snapshot, wanted, names, now=now, lease=args.extender_lease)
            if args.prometheus:
                from vgpu.inspect.real_use_read import read_real_use

                report = dataclasses.replace(report, real_use=read_real_use(args.prometheus))
            if args.namespace:
                report = only_namespace(report, args.namespace)
            text = render(report, output=args.output, details=args.details, width=_width(args))
    except VgpuError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:  # a plain install: the extra's packages are missing
        print(
            f"error: this needs the Python package {e.name!r}, not installed: "
            f"{install_hint('cli')}",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write(text)
    missing = sorted(set(args.nodes) - {n for n in _names(snapshot)})
    if missing:  # as kubectl does: what exists is shown, the exit status tells a script
        print(f"error: no such node: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


def _serve(args: argparse.Namespace) -> int:
    """`--serve`: the web view, with the report's errors reported as the report's are."""
    try:
        return serve_cmd.run(args)
    except VgpuError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        print(f"error: this needs the Python package {e.name!r}, not installed: "
              f"{install_hint('cli')}", file=sys.stderr)  # fmt: skip
        return 1


class InspectUsageError(VgpuError):
    """A flag's value cannot work; the message names the flag."""


def lease_name(text: str) -> str:
    """`namespace/name` of a Lease, both parts DNS labels as the API server wants them."""
    namespace, slash, name = text.partition("/")
    if not slash or not _LABEL.fullmatch(namespace) or not _SUBDOMAIN.fullmatch(name):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not NAMESPACE/NAME of a Lease (e.g. {DEFAULT_LEASE})"
        )
    return text


_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def render(
    report: Report, *, output: str = "table", details: bool = False, width: int | None = None
) -> str:
    if output == "json":
        return render_json(report)
    if output == "yaml":
        return render_yaml(report)
    return render_details(report) if details else render_table(report, width=width)


def _width(args: argparse.Namespace) -> int | None:
    """Columns to fit the table into: --width, else $COLUMNS, else the terminal's (None: a pipe
    or a file, where nothing is condensed)."""
    if args.width is not None:
        return args.width or None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        return int(columns) or None
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def _names(snapshot: Snapshot) -> list[str]:
    return [str((n.get("metadata") or {}).get("name") or "") for n in snapshot.nodes]


def _wanted(snapshot: Snapshot, nodes: Sequence[str], matches: Test | None) -> list[str]:
    """The NODE arguments, narrowed to (or, without any, all of) the nodes the selector takes."""
    if matches is None:
        return list(nodes)
    chosen = [
        str(meta.get("name") or "")
        for n in snapshot.nodes
        if matches((meta := n.get("metadata") or {}).get("labels") or {})
    ]
    return [n for n in chosen if n in nodes] if nodes else chosen


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _snapshot(args: argparse.Namespace) -> tuple[Snapshot, bool]:
    """The snapshot to report on, and whether it was read live."""
    if args.fake_cluster:
        path: Path = args.fake_cluster
        return loads(path.read_text(encoding="utf-8"), source=str(path)), False
    from vgpu.inspect.reader import connect, read_snapshot  # needs the kubernetes client

    api = connect(args.kubeconfig, args.context)
    try:
        return read_snapshot(api, selector=args.selector, lease=args.extender_lease), True
    finally:
        api.close()


def _queues(args: argparse.Namespace, snapshot: Snapshot, names: ResourceNames) -> str:
    """The `--queues` report: the queues from --queues-file, else the live ConfigMap."""
    if args.queues_file:
        text: str | None = args.queues_file.read_text(encoding="utf-8")
    elif args.fake_cluster:
        text = None
    else:
        from vgpu.inspect.reader import connect

        api = connect(args.kubeconfig, args.context)
        try:
            text = queues_cmd.read_config_map(api, args.queues_config)
        finally:
            api.close()
    return queues_cmd.render(snapshot, text, names, args.output)


def main(argv: Sequence[str] | None = None) -> int:
    """The `kubectl-inspect-vgpu` console script."""
    parser = configure(
        argparse.ArgumentParser(
            prog="kubectl inspect vgpu", description=DESCRIPTION, formatter_class=HelpFormatter
        )
    )
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
