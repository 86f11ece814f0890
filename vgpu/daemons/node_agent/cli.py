"""`vgpu node-agent`: flags → `AgentConfig`, GPU backend and API client → `NodeAgent`.

Registered by `vgpu.cli.main` through `add_parser(subparsers)` (it lives here, not in the pure
`vgpu.node`, because it wires adapters); `python -m vgpu.daemons.node_agent.cli ARGS` runs it
standalone (benchmarks do). Bad flags raise `ConfigError` naming the flag and the fix. The flags it
shares with `vgpu dra-driver` live in `vgpu.daemons.flags.gpu` (where the GPUs come from) and
`vgpu.daemons.flags.mode` (how shares are enforced).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.api.resources import resource_names
from vgpu.core.errors import ConfigError, VgpuError
from vgpu.daemons.flags.driver import add_driver_flags, driver_settings
from vgpu.daemons.flags.gpu import add_gpu_flags, gpu_backend
from vgpu.daemons.flags.keys import KEY_ENV, add_development_key_flag, load_assignment_key
from vgpu.daemons.flags.mode import add_mode_flags, grant_settings
from vgpu.daemons.flags.node import (
    add_health_flags,
    add_node_flags,
    health_policy,
    memory_unit_mib,
)
from vgpu.flags import MAX_WAIT_S, HelpFormatter, add_path_flag, port_number, seconds
from vgpu.node.runtime_check import DEFAULT_CDI_DIRS, DEFAULT_TOOLKIT_CONFIG

if TYPE_CHECKING:
    from vgpu.agent.agent import NodeAgent
    from vgpu.node.watchdog import WatchdogPolicy

log = logging.getLogger(__name__)
MIN_RECONCILE_S = 1.0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `vgpu node-agent`."""
    p = sub.add_parser(
        "node-agent",
        help="run the node agent (device plugin, labels, health)",
        formatter_class=HelpFormatter,
    )
    add_gpu_flags(p)
    _add_kubelet_flags(p)
    _add_cluster_flags(p)
    add_mode_flags(p)
    add_driver_flags(p)
    _add_admission_flags(p)
    _add_watchdog_flags(p.add_argument_group("usage watchdog"))
    p.set_defaults(run=run)


def _add_kubelet_flags(p: argparse.ArgumentParser) -> None:
    """Where the kubelet's sockets are."""
    add_path_flag(
        p,
        "--device-plugin-dir",
        "/var/lib/kubelet/device-plugins",
        "the kubelet's device-plugin directory (holds kubelet.sock)",
    )
    add_path_flag(
        p,
        "--pod-resources-socket",
        "/var/lib/kubelet/pod-resources/kubelet.sock",
        "the kubelet's pod-resources API, to reconcile admitted containers",
    )


def _add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """Who this node is in the cluster, what it advertises and how it reaches the API."""
    add_node_flags(p, memory_unit_help="MiB per GPU memory resource unit")
    p.add_argument("--resource-domain", default="vgpu.io", help="prefix of the extended resources")
    p.add_argument("--metrics-port", type=port_number, default=9400, help="0 disables /metrics")
    p.add_argument(
        "--assignment-key-file",
        type=Path,
        help=f"HMAC key shared with the extender (else ${KEY_ENV}; one of them is required)",
    )
    add_development_key_flag(p)


def _add_admission_flags(p: argparse.ArgumentParser) -> None:
    """What the agent admits and reports, and how often it reconciles."""
    p.add_argument(
        "--allow-unassigned",
        action="store_true",
        help="admit pods without a verified assignment on capacity no assigned pod holds (and, "
        "without cluster credentials, any devices); off: such Allocates are refused",
    )
    p.add_argument(
        "--report-numa",
        action="store_true",
        help="report each GPU's NUMA node to the kubelet; only safe with the kubelet's "
        "topologyManagerPolicy none (docs/handshake.md, topology manager)",
    )
    add_health_flags(p)
    p.add_argument(
        "--reconcile-s",
        type=float,
        default=30.0,
        help=f"node metadata and pod-resources reconciliation interval (>= {MIN_RECONCILE_S:g})",
    )


def _add_watchdog_flags(w: argparse._ArgumentGroup) -> None:
    """The usage watchdog's group: interval, enforcement, tolerance, Event rate, procfs."""
    w.add_argument("--watchdog-s", type=float, default=10.0, help="check interval; 0 disables")
    w.add_argument(
        "--watchdog-kill",
        action="store_true",
        help="stop processes of containers over their GPU memory grant (needs hostPID)",
    )
    w.add_argument(
        "--watchdog-tolerance-mib", type=int, default=0, help="memory over the grant tolerated"
    )
    w.add_argument(
        "--watchdog-event-interval-s",
        type=float,
        default=300.0,
        help="at most one Event per container/GPU or unknown process in this time",
    )
    add_path_flag(
        w,
        "--proc-root",
        "/proc",
        "host procfs, to map GPU processes to containers (default /proc, with hostPID)",
    )
    w.add_argument(
        "--cdi-spec-dir",
        type=Path,
        action="append",
        metavar="DIR",
        help="a CDI spec directory (repeatable; default /etc/cdi and /var/run/cdi), read at start "
        "to check that every GPU has its CDI device",
    )
    w.add_argument(
        "--nvidia-runtime-config",
        type=Path,
        default=DEFAULT_TOOLKIT_CONFIG,
        metavar="PATH",
        help="the NVIDIA runtime's config.toml, read at start to check that it ignores "
        "NVIDIA_VISIBLE_DEVICES in unprivileged containers (docs/isolation.md, Runtime settings)",
    )


def watchdog_policy(args: argparse.Namespace) -> WatchdogPolicy:
    from vgpu.node.watchdog import WatchdogPolicy

    if args.watchdog_tolerance_mib < 0:
        raise ConfigError("--watchdog-tolerance-mib: must be >= 0 MiB, e.g. 0 or 512")
    # nan let every finding through (`now - t < nan`), inf kept every key it saw for ever
    seconds("--watchdog-event-interval-s", args.watchdog_event_interval_s, example="300")
    if args.watchdog_kill and args.proc_root != Path("/proc"):
        raise ConfigError(
            "--watchdog-kill: signals go to PIDs of the agent's own PID namespace, so it needs "
            "hostPID and --proc-root /proc; drop --proc-root or --watchdog-kill"
        )
    return WatchdogPolicy(
        kill=args.watchdog_kill, tolerance_bytes=args.watchdog_tolerance_mib * 1024 * 1024
    )


def check_plugin_dir(path: Path) -> None:
    """Refuse a plugin directory that cannot be one: it, or a folder above it, is a file."""
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            raise ConfigError(
                f"--device-plugin-dir: {part} is a file, not a directory; give the kubelet's "
                "device-plugin directory (default /var/lib/kubelet/device-plugins)"
            )


def build(args: argparse.Namespace) -> NodeAgent:
    """The `NodeAgent` the flags describe (not started)."""
    from vgpu.adapters.kube.calls import KubeApi, KubeConfigMissing
    from vgpu.agent.agent import NodeAgent
    from vgpu.agent.config import AgentConfig

    unit_mib = memory_unit_mib(args)
    names = resource_names(args.resource_domain)
    if not args.reconcile_s >= MIN_RECONCILE_S:
        raise ConfigError(
            f"--reconcile-s: {args.reconcile_s:g} is below the minimum of {MIN_RECONCILE_S:g} s "
            "(each round reads the node from the API server); use e.g. 30"
        )
    if args.reconcile_s > MAX_WAIT_S:  # Event.wait overflows past time_t: the loop would end
        raise ConfigError(f"--reconcile-s: must be at most {MAX_WAIT_S:g} s; use e.g. 30")
    seconds("--watchdog-s", args.watchdog_s, example="10", note=" (0 disables)")
    health = health_policy(args)
    watchdog = watchdog_policy(args)
    check_plugin_dir(args.device_plugin_dir)
    key = load_assignment_key(  # a bad or missing key fails before NVML
        args.assignment_key_file, allow_development_key=args.insecure_development_key
    )
    grants = grant_settings(args)
    backend = gpu_backend(args)
    kube: KubeApi | None
    try:
        kube = KubeApi.from_environment(args.kubeconfig)
    except KubeConfigMissing as e:
        if args.kubeconfig:
            raise
        log.warning("%s", e)
        kube = None
    config = AgentConfig(
        node_name=args.node_name,
        assignment_key=key,
        plugin_dir=args.device_plugin_dir,
        pod_resources_socket=args.pod_resources_socket,
        domain=names.domain,
        memory_unit_mib=unit_mib,
        grants=grants,
        allow_unassigned=args.allow_unassigned,
        report_numa=args.report_numa,
        health=health,
        reconcile_s=args.reconcile_s,
        metrics_port=args.metrics_port or None,
        watchdog_s=args.watchdog_s,
        watchdog=watchdog,
        watchdog_event_interval_s=args.watchdog_event_interval_s,
        proc_root=args.proc_root,
        cdi_spec_dirs=tuple(args.cdi_spec_dir or DEFAULT_CDI_DIRS),
        toolkit_config=args.nvidia_runtime_config,
        **driver_settings(args),
    )
    return NodeAgent(config, backend, kube)


def run(args: argparse.Namespace) -> int:
    """Run the agent until SIGTERM/SIGINT."""
    build(args).run_until_signal()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vgpu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["node-agent", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return run(args)
    except VgpuError as e:
        print(f"vgpu: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
