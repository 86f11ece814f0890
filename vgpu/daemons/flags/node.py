"""A GPU node daemon's identity and health flags, shared by `vgpu node-agent` and `vgpu
dra-driver`: which node it serves, how much memory one unit is, which XIDs it ignores and when
a GPU recovers. Parsed once here, so both daemons refuse a bad value with the same line."""

from __future__ import annotations

import argparse
import os
import socket
from typing import TYPE_CHECKING

from vgpu.core.errors import ConfigError
from vgpu.flags import seconds

if TYPE_CHECKING:
    from vgpu.node.health import HealthPolicy


def add_node_flags(p: argparse.ArgumentParser, *, memory_unit_help: str) -> None:
    """`--node-name`, `--memory-unit-mib`, `--kubeconfig`."""
    p.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="this node's name in the cluster ($NODE_NAME, else the host name)",
    )
    p.add_argument("--memory-unit-mib", type=int, default=256, help=memory_unit_help)
    p.add_argument("--kubeconfig", help="default: in-cluster, then $KUBECONFIG / ~/.kube/config")


def add_health_flags(p: argparse.ArgumentParser) -> None:
    """`--xid-ignore`, `--health-recovery-s` (`health_policy`)."""
    p.add_argument("--xid-ignore", help="comma-separated XIDs that do not mark a GPU unhealthy")
    p.add_argument("--health-recovery-s", type=float, default=300.0, help="negative: never recover")


def memory_unit_mib(args: argparse.Namespace) -> int:
    """`--memory-unit-mib`, refused unless positive."""
    if args.memory_unit_mib <= 0:
        raise ConfigError("--memory-unit-mib: must be a positive number of MiB, e.g. 256")
    return int(args.memory_unit_mib)


def health_policy(args: argparse.Namespace) -> HealthPolicy:
    """The XIDs ignored and the recovery time the flags give."""
    from vgpu.node.health import DEFAULT_IGNORED_XIDS, HealthPolicy, parse_xid_list

    try:
        ignored = (
            DEFAULT_IGNORED_XIDS if args.xid_ignore is None else parse_xid_list(args.xid_ignore)
        )
    except ValueError as e:
        raise ConfigError(f"--xid-ignore: {e}") from e
    recovery: float | None = None  # negative: never recover
    if not args.health_recovery_s < 0:  # nan (`now - t < nan`: no XID counted) and inf refused
        recovery = seconds(
            "--health-recovery-s", args.health_recovery_s, example="300", note=" (<0: never)"
        )
    return HealthPolicy(ignored_xids=ignored, recovery_s=recovery)
