"""`kubectl inspect vgpu` / `vgpu inspect`: argument parsing and the one place errors become exits.

`add_parser(subparsers)` registers the `inspect` subcommand of `vgpu`; `main()` is the
`kubectl-inspect-vgpu` console script (kubectl runs it for `kubectl inspect vgpu`). Exit status:
0 report shown, 1 the report could not be made (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vgpu.api.resources import DEFAULT_DOMAIN, resource_names
from vgpu.core.errors import VgpuError
from vgpu.inspect.build import build_report
from vgpu.inspect.details import render_details
from vgpu.inspect.export import render_json, render_yaml
from vgpu.inspect.model import Report
from vgpu.inspect.snapshot import Snapshot, dumps, loads
from vgpu.inspect.table import render_table

DESCRIPTION = (
    "Show how the cluster's GPUs are shared: per node and GPU index the cores (100 per GPU) and "
    "memory in use, what is bound but not yet admitted (PENDING), unhealthy GPUs, and with -d "
    "which pods hold which share and the state of each gang. Reads nodes and pods from the API "
    "server (read-only), or a saved snapshot with --fake-cluster."
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
    parser.add_argument(
        "--resource-domain",
        default=DEFAULT_DOMAIN,
        help="domain of the vgpu resources and inventory annotation, as the node agents' "
        "--resource-domain (default vgpu.io)",
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
    parser.set_defaults(run=run)
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `inspect` on the `vgpu` command's subparsers."""
    parser = subparsers.add_parser(
        "inspect", help="show GPU sharing per node and GPU", description=DESCRIPTION
    )
    return configure(parser)


def run(args: argparse.Namespace) -> int:
    try:
        names = resource_names(args.resource_domain)
        snapshot, live = _snapshot(args)
        if args.save_snapshot:
            as_json = args.save_snapshot.suffix.lower() == ".json"
            text = dumps(snapshot, as_json=as_json, names=names)
            args.save_snapshot.write_text(text, encoding="utf-8")
        if live:  # the "snapshot taken at" header is for saved files only
            snapshot = dataclasses.replace(snapshot, taken_at="")
        report = build_report(snapshot, args.nodes, names)
    except VgpuError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 1
    sys.stdout.write(render(report, output=args.output, details=args.details))
    return 0


def render(report: Report, *, output: str = "table", details: bool = False) -> str:
    if output == "json":
        return render_json(report)
    if output == "yaml":
        return render_yaml(report)
    return render_details(report) if details else render_table(report)


def _snapshot(args: argparse.Namespace) -> tuple[Snapshot, bool]:
    """The snapshot to report on, and whether it was read live."""
    if args.fake_cluster:
        path: Path = args.fake_cluster
        return loads(path.read_text(encoding="utf-8"), source=str(path)), False
    from vgpu.inspect.reader import connect, read_snapshot  # needs the kubernetes client

    api = connect(args.kubeconfig)
    try:
        return read_snapshot(api), True
    finally:
        api.close()


def main(argv: Sequence[str] | None = None) -> int:
    """The `kubectl-inspect-vgpu` console script."""
    parser = configure(
        argparse.ArgumentParser(prog="kubectl inspect vgpu", description=DESCRIPTION)
    )
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
