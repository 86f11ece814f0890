"""`vgpu inspect --serve`: the flags, the reading of the cluster (a saved snapshot re-read from
its file, or the API server through the report's own reader) and the serving loop.

Binds 127.0.0.1 unless `--address` says otherwise: the view shows every pod's name and share,
which is for whoever may read the cluster, so exposing it is a choice (the chart's Service).
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from vgpu.api.resources import resource_names
from vgpu.core.errors import VgpuError
from vgpu.flags import MAX_WAIT_S, add_policy_flags, count
from vgpu.inspect.real_use import RealUse
from vgpu.inspect.real_use_read import read_real_use
from vgpu.inspect.snapshot import Snapshot, loads
from vgpu.inspect.web.refresh import Read, Refresher
from vgpu.inspect.web.server import make_server
from vgpu.inspect.web.shares import PrometheusShares, Shares
from vgpu.inspect.web.where import Policies

DEFAULT_PORT = 8080


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--serve",
        action="store_true",
        help="serve a live, read-only web view of the report instead of printing it",
    )
    parser.add_argument(
        "--port", type=port, default=DEFAULT_PORT, help=f"with --serve (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--address",
        default="127.0.0.1",
        help="with --serve: the address to listen on (default 127.0.0.1; 0.0.0.0 for all)",
    )
    parser.add_argument(
        "--refresh",
        type=refresh_seconds,
        default=5,
        metavar="SECONDS",
        help="with --serve: how often the cluster is read again (default 5)",
    )
    add_policy_flags(
        parser,
        policy='with --serve: the extender\'s --policy, which "where it could go" places with',
        allow="with --serve: each of the extender's --allow-pod-policy (repeatable), so a pod's "
        "vgpu.io/policy is placed or refused as the extender does (default: none)",
    )


def port(text: str) -> int:
    """A TCP port, 0 (any free one, printed at start) to 65535."""
    value = count(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535)")
    return value


def refresh_seconds(text: str) -> int:
    """`--refresh`: whole seconds, 0 (every second) to a day; the refresh thread's wait raised
    OverflowError past the platform's time_t (`--refresh 100000000000000000000`): a traceback,
    then a view that never read the cluster again."""
    try:
        value = count(text)
    except argparse.ArgumentTypeError:
        value = -1
    if not 0 <= value <= MAX_WAIT_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a refresh interval: use 0 to {MAX_WAIT_S:.0f} whole seconds, e.g. 5"
        )
    return value


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; 1 when the address cannot be bound."""
    names = resource_names(args.resource_domain)
    refresher = Refresher(
        _reader(args),
        names,
        float(args.refresh or 1),
        lease=args.extender_lease,
        live=args.fake_cluster is None,
        real_use=_real_use(args),
        policies=Policies(args.policy, tuple(args.allow_pod_policy)),
    )
    refresher.refresh()
    try:
        server = make_server(refresher, args.address, args.port, _shares(args, refresher))
    except OSError as e:
        print(f"error: --address/--port: cannot listen on {args.address}:{args.port}: {e.strerror}",
              file=sys.stderr)  # fmt: skip
        return 1
    host, port = server.server_address[:2]
    print(f"Serving the vgpu view on http://{host!s}:{port}/ (Ctrl-C stops)", flush=True)
    threading.Thread(target=refresher.run, name="refresh", daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        refresher.stop()
        server.server_close()
    return 0


def _shares(args: argparse.Namespace, refresher: Refresher) -> Shares | None:
    """The chart's source: Prometheus when named (its URL checked here, once)."""
    url = _prometheus(args)
    return None if url is None else PrometheusShares(url, refresher.samples)


def _prometheus(args: argparse.Namespace) -> str | None:
    """`--prometheus`, checked to be an http(s) URL; None when not given."""
    text: str | None = args.prometheus
    if not text:
        return None
    url = urlsplit(text)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ServeUsageError(f"--prometheus: {text!r} is not an http(s) URL")
    return text


def _real_use(args: argparse.Namespace) -> Callable[[], RealUse] | None:
    """The GPUs' real use from the same Prometheus as the chart (`--prometheus`)."""
    url = _prometheus(args)
    if url is None:
        return None
    return lambda: read_real_use(url)


class ServeUsageError(VgpuError):
    """A --serve flag's value cannot work; the message names the flag."""


def _reader(args: argparse.Namespace) -> Read:
    """A function reading the cluster afresh on each call."""
    queues_file: Path | None = args.queues_file
    if args.fake_cluster is not None:
        path: Path = args.fake_cluster

        def read_file() -> tuple[Snapshot, str | None]:
            snapshot = loads(path.read_text(encoding="utf-8"), source=str(path))
            return snapshot, queues_file.read_text(encoding="utf-8") if queues_file else None

        return read_file
    from vgpu.inspect import queues_cmd
    from vgpu.inspect.reader import connect, read_snapshot  # needs the kubernetes client

    api = connect(args.kubeconfig, args.context)

    def read_live() -> tuple[Snapshot, str | None]:
        snapshot = read_snapshot(api, selector=args.selector, lease=args.extender_lease)
        if queues_file:
            return snapshot, queues_file.read_text(encoding="utf-8")
        return snapshot, queues_cmd.read_config_map(api, args.queues_config)

    return read_live
