"""`vgpu dra-driver`: flags → `DraConfig`, GPU backend and API client → `DraDriver`.

The sibling of `vgpu node-agent` for DRA mode (docs/dra.md): the same GPU backends and
enforcement flags (`--mode` defaults to plain here; vgpu-core and auto install the interposer
into `--state-dir` as the agent does), the kubelet's plugin directories instead of the
device-plugin directory.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.core.errors import ConfigError
from vgpu.daemons.flags.gpu import add_gpu_flags, gpu_backend
from vgpu.daemons.flags.mode import add_mode_flags, grant_settings
from vgpu.flags import HelpFormatter

if TYPE_CHECKING:
    from vgpu.daemons.dra_driver.driver import DraDriver


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `vgpu dra-driver`."""
    p = sub.add_parser(
        "dra-driver",
        help="run the DRA driver (ResourceSlice, claim preparation, health)",
        formatter_class=HelpFormatter,
    )
    add_gpu_flags(p)
    p.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="this node's name in the cluster ($NODE_NAME, else the host name)",
    )
    p.add_argument(
        "--plugins-dir",
        type=Path,
        default=Path("/var/lib/kubelet/plugins"),
        help="the kubelet's plugin directory; the driver's socket and checkpoint go in "
        "PLUGINS_DIR/vgpu.io/",
    )
    p.add_argument(
        "--registry-dir",
        type=Path,
        default=Path("/var/lib/kubelet/plugins_registry"),
        help="the kubelet's plugin registration directory",
    )
    p.add_argument("--cdi-dir", type=Path, default=Path("/var/run/cdi"), help="CDI spec directory")
    p.add_argument(
        "--memory-unit-mib", type=int, default=256, help="MiB per step of the memory capacity"
    )
    p.add_argument(
        "--slice-order",
        choices=["index", "fullest"],
        default="index",
        help="device order in the ResourceSlice: GPU index, or fullest first so that the "
        "scheduler's first fit is a best fit (watches every claim; docs/dra.md)",
    )
    p.add_argument(
        "--resync-s",
        type=float,
        default=30.0,
        help="seconds between checks that the published slice is still ours (health changes "
        "and, with --slice-order fullest, allocations update it at once)",
    )
    p.add_argument("--kubeconfig", help="default: in-cluster, then $KUBECONFIG / ~/.kube/config")
    add_mode_flags(p, default="plain")
    p.add_argument("--xid-ignore", help="comma-separated XIDs that do not mark a GPU unhealthy")
    p.add_argument("--health-recovery-s", type=float, default=300.0, help="negative: never recover")
    p.set_defaults(run=run)


def build(args: argparse.Namespace) -> DraDriver:
    """The `DraDriver` the flags describe (not started)."""
    from vgpu.adapters.container_dirs import claim_dirs
    from vgpu.adapters.draplugin import DraSockets
    from vgpu.adapters.kube_dra import DraKubeApi
    from vgpu.api.dra import DRIVER
    from vgpu.daemons.dra_driver.driver import DraConfig, DraDriver
    from vgpu.node.health import DEFAULT_IGNORED_XIDS, HealthPolicy, parse_xid_list

    if args.memory_unit_mib <= 0:
        raise ConfigError("--memory-unit-mib: must be a positive number of MiB, e.g. 256")
    if args.resync_s <= 0:
        raise ConfigError("--resync-s: must be a positive number of seconds, e.g. 30")
    try:
        ignored = (
            DEFAULT_IGNORED_XIDS if args.xid_ignore is None else parse_xid_list(args.xid_ignore)
        )
    except ValueError as e:
        raise ConfigError(f"--xid-ignore: {e}") from e
    recovery = None if args.health_recovery_s < 0 else args.health_recovery_s
    dirs = claim_dirs(args.state_dir)
    grants = grant_settings(args, dirs)  # vgpu-core is installed here, as by the node agent
    kube = DraKubeApi.from_environment(args.kubeconfig)  # a DRA driver needs the API server
    assert isinstance(kube, DraKubeApi)
    config = DraConfig(
        node_name=args.node_name,
        sockets=DraSockets(DRIVER, args.plugins_dir, args.registry_dir),
        cdi_dir=args.cdi_dir,
        memory_unit_mib=args.memory_unit_mib,
        grants=grants,
        dirs=dirs,
        health=HealthPolicy(ignored_xids=ignored, recovery_s=recovery),
        slice_order=args.slice_order,
        resync_s=args.resync_s,
    )
    return DraDriver(config, gpu_backend(args), kube)


def run(args: argparse.Namespace) -> int:
    """Run the driver until SIGTERM/SIGINT."""
    build(args).run_until_signal()
    return 0
