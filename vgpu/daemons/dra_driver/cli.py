"""`vgpu dra-driver`: flags → `DraConfig`, GPU backend and API client → `DraDriver`.

The sibling of `vgpu node-agent` for DRA mode (docs/dra.md): the same GPU backends and
enforcement flags (`--mode` defaults to plain here; vgpu-core and auto install the interposer
into `--state-dir` as the agent does), the kubelet's plugin directories instead of the
device-plugin directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.daemons.flags.driver import add_driver_flags, driver_settings
from vgpu.daemons.flags.gpu import add_gpu_flags, gpu_backend
from vgpu.daemons.flags.mode import add_mode_flags, dir_bounds, grant_settings
from vgpu.daemons.flags.node import (
    add_health_flags,
    add_node_flags,
    health_policy,
    memory_unit_mib,
)
from vgpu.flags import HelpFormatter, add_path_flag, seconds

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
    add_node_flags(p, memory_unit_help="MiB per step of the memory capacity")
    add_path_flag(
        p,
        "--plugins-dir",
        "/var/lib/kubelet/plugins",
        "the kubelet's plugin directory; the driver's socket and checkpoint go in "
        "PLUGINS_DIR/vgpu.io/",
    )
    add_path_flag(
        p,
        "--registry-dir",
        "/var/lib/kubelet/plugins_registry",
        "the kubelet's plugin registration directory",
    )
    p.add_argument("--cdi-dir", type=Path, default=Path("/var/run/cdi"), help="CDI spec directory")
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
        "and, with --slice-order fullest, allocations update it at once), and, with the "
        "driver's memory limits, between passes setting prepared claims' pods' limits again",
    )
    p.add_argument(
        "--join-poll-s",
        type=float,
        default=0.05,
        help="with the driver's memory limits, how often the cgroup of a pod joining a "
        "prepared claim is looked for while one waits (the CDI hook sets its limit before "
        "each container in any case)",
    )
    add_path_flag(
        p,
        "--cdi-hook-program",
        "/opt/vgpu/bin/vgpu-cdi-hook",
        "the CDI createRuntime hook in the image; with the driver's memory limits it is "
        "installed into STATE_DIR/bin/ and each claim's containers wait for their pod's limit "
        "through it (docs/isolation.md)",
    )
    add_mode_flags(p, default="plain")
    add_driver_flags(p)
    add_health_flags(p)
    p.set_defaults(run=run)


def build(args: argparse.Namespace) -> DraDriver:
    """The `DraDriver` the flags describe (not started)."""
    from vgpu.adapters.container_dirs import claim_dirs
    from vgpu.adapters.draplugin import DraSockets
    from vgpu.adapters.kube.dra_calls import DraKubeApi
    from vgpu.api.dra import DRIVER
    from vgpu.daemons.dra_driver.driver import DraConfig, DraDriver

    unit_mib = memory_unit_mib(args)
    seconds("--resync-s", args.resync_s, positive=True, example="30")
    seconds("--join-poll-s", args.join_poll_s, positive=True, example="0.05")
    health = health_policy(args)
    dirs = claim_dirs(args.state_dir, dir_bounds(args))
    grants = grant_settings(args, dirs)  # vgpu-core is installed here, as by the node agent
    kube = DraKubeApi.from_environment(args.kubeconfig)  # a DRA driver needs the API server
    assert isinstance(kube, DraKubeApi)
    config = DraConfig(
        node_name=args.node_name,
        sockets=DraSockets(DRIVER, args.plugins_dir, args.registry_dir),
        cdi_dir=args.cdi_dir,
        memory_unit_mib=unit_mib,
        grants=grants,
        dirs=dirs,
        health=health,
        slice_order=args.slice_order,
        resync_s=args.resync_s,
        join_poll_s=args.join_poll_s,
        hook_program=args.cdi_hook_program,
        state_dir=args.state_dir,
        **driver_settings(args),
    )
    return DraDriver(config, gpu_backend(args), kube)


def run(args: argparse.Namespace) -> int:
    """Run the driver until SIGTERM/SIGINT."""
    build(args).run_until_signal()
    return 0
