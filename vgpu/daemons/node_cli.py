"""`vgpu node-agent`: flags → `AgentConfig`, GPU backend and API client → `NodeAgent`.

Registered by `vgpu.cli.main` through `add_parser(subparsers)` (it lives here, not in the pure
`vgpu.node`, because it wires adapters); `python -m vgpu.daemons.node_cli ARGS` runs it
standalone (benchmarks do). Bad flags raise `ConfigError` naming the flag and the fix.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.api.resources import resource_names
from vgpu.core.errors import ConfigError, VgpuError
from vgpu.daemons.keys import KEY_ENV, add_development_key_flag, load_assignment_key
from vgpu.flags import HelpFormatter, port_number

if TYPE_CHECKING:
    from vgpu.adapters.gpu import GpuBackend
    from vgpu.daemons.node_agent import NodeAgent
    from vgpu.node.grants import GrantSettings
    from vgpu.node.hami import HamiCore
    from vgpu.node.watchdog import WatchdogPolicy

log = logging.getLogger(__name__)
FAKE_GPUS_EXAMPLE = "4xA100-SXM4-80GB or 2xT4,1xL4"
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
    _add_mode_flags(p)
    _add_admission_flags(p)
    _add_watchdog_flags(p.add_argument_group("usage watchdog"))
    p.set_defaults(run=run)


def _add_kubelet_flags(p: argparse.ArgumentParser) -> None:
    """Where the kubelet's sockets are."""
    p.add_argument(
        "--device-plugin-dir",
        type=Path,
        default=Path("/var/lib/kubelet/device-plugins"),
        help="the kubelet's device-plugin directory (holds kubelet.sock)",
    )
    p.add_argument(
        "--pod-resources-socket",
        type=Path,
        default=Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
        help="the kubelet's pod-resources API, to reconcile admitted containers",
    )


def _add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """Who this node is in the cluster, what it advertises and how it reaches the API."""
    p.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="this node's name in the cluster ($NODE_NAME, else the host name)",
    )
    p.add_argument("--resource-domain", default="vgpu.io", help="prefix of the extended resources")
    p.add_argument(
        "--memory-unit-mib", type=int, default=256, help="MiB per GPU memory resource unit"
    )
    p.add_argument("--metrics-port", type=port_number, default=9400, help="0 disables /metrics")
    p.add_argument("--kubeconfig", help="default: in-cluster, then $KUBECONFIG / ~/.kube/config")
    p.add_argument(
        "--assignment-key-file",
        type=Path,
        help=f"HMAC key shared with the extender (else ${KEY_ENV}; one of them is required)",
    )
    add_development_key_flag(p)


def _add_mode_flags(p: argparse.ArgumentParser) -> None:
    """How a container's GPU share is enforced (vgpu-core, plain, MPS, HAMi-core)."""
    p.add_argument(
        "--mode",
        choices=["auto", "vgpu-core", "plain", "mps", "hami"],
        default="auto",
        help="how a container's GPU share is enforced; auto: vgpu-core when --vgpu-core-library "
        "exists (the image carries it), else plain; what each enforces: docs/isolation.md",
    )
    p.add_argument(
        "--vgpu-core-library",
        type=Path,
        default=Path("/opt/vgpu/lib/libvgpu-core.so"),
        metavar="PATH",
        help="mode vgpu-core: the interposer in the agent's image, installed into --state-dir",
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        default=Path("/var/lib/vgpu"),
        help="host directory, mounted at the same path: the installed library and the "
        "per-container limits (modes vgpu-core and hami)",
    )
    p.add_argument("--mps-pipe-dir", default="/tmp/nvidia-mps", help="MPS pipe dir (--mode mps)")
    p.add_argument(
        "--hami-core-library",
        metavar="PATH",
        help="mode hami: HAMi-core's libvgpu.so on the node, mounted and preloaded in containers "
        "(default: none, the mode then only passes limits; docs/isolation.md)",
    )
    p.add_argument(
        "--hami-preload-file",
        metavar="PATH",
        help="mode hami: a host file naming /usr/local/vgpu/libvgpu.so, mounted as "
        "/etc/ld.so.preload (default: none, LD_PRELOAD only)",
    )


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
    p.add_argument("--xid-ignore", help="comma-separated XIDs that do not mark a GPU unhealthy")
    p.add_argument("--health-recovery-s", type=float, default=300.0, help="negative: never recover")
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
    w.add_argument(
        "--proc-root",
        type=Path,
        default=Path("/proc"),
        help="host procfs, to map GPU processes to containers (default /proc, with hostPID)",
    )


def add_gpu_flags(p: argparse.ArgumentParser) -> None:
    """The flags choosing the GPU backend (`gpu_backend`), shared with `vgpu dra-driver`."""
    gpus = p.add_mutually_exclusive_group()
    gpus.add_argument(
        "--fake-gpus",
        metavar="SPEC",
        help=f"fake GPUs instead of NVML, e.g. {FAKE_GPUS_EXAMPLE} (COUNTxMODEL,...; "
        "MODEL:MEMORY_MIB for a model not built in)",
    )
    gpus.add_argument(
        "--fake-gpus-file", metavar="YAML", type=Path, help="fake GPUs from an inventory file"
    )


def watchdog_policy(args: argparse.Namespace) -> WatchdogPolicy:
    from vgpu.node.watchdog import WatchdogPolicy

    if args.watchdog_tolerance_mib < 0:
        raise ConfigError("--watchdog-tolerance-mib: must be >= 0 MiB, e.g. 0 or 512")
    if args.watchdog_event_interval_s < 0:
        raise ConfigError("--watchdog-event-interval-s: must be >= 0 seconds, e.g. 300")
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


def hami_core(args: argparse.Namespace) -> HamiCore | None:
    """HAMi-core's location from the flags (mode hami only); `grant_settings` checks the file."""
    from vgpu.node.container_dirs import ContainerDirs
    from vgpu.node.hami import HamiCore

    if args.hami_core_library is None:
        if args.hami_preload_file is not None:
            raise ConfigError(
                "--hami-preload-file needs --hami-core-library (the library it names)"
            )
        return None
    if args.mode != "hami":
        raise ConfigError(f"--hami-core-library is for --mode hami, not --mode {args.mode}")
    state = getattr(args, "state_dir", None)  # `vgpu dra-driver` shares this; it has no state dir
    dirs = ContainerDirs(state) if state is not None else None
    return HamiCore(args.hami_core_library, args.hami_preload_file, dirs)


def grant_settings(args: argparse.Namespace) -> GrantSettings:
    """The mode and what it needs on the node (vgpu-core is installed here, at start)."""
    from vgpu.daemons.node_enforce import checked_library, choose_mode, install_vgpu_core
    from vgpu.node.container_dirs import ContainerDirs
    from vgpu.node.grants import GrantMode, GrantSettings

    mode = choose_mode(args.mode, args.vgpu_core_library)
    hami = hami_core(args)
    if hami is not None:  # a build without the CUDA exports would enforce nothing
        checked_library("--hami-core-library", Path(hami.library))
    core = None
    if mode is GrantMode.VGPU_CORE:
        core = install_vgpu_core(
            args.vgpu_core_library, args.state_dir, ContainerDirs(args.state_dir)
        )
    return GrantSettings(mode, args.mps_pipe_dir, hami, core)


def gpu_backend(args: argparse.Namespace) -> GpuBackend:
    """Fake GPUs from --fake-gpus or --fake-gpus-file, else the node's own through NVML."""
    from vgpu.adapters.fakegpu import FakeGpuBackend, FakeGpuSpecError, load_inventory_file
    from vgpu.adapters.gpu import GpuBackendUnavailable, NvmlBackend

    if args.fake_gpus is not None:
        if not args.fake_gpus.strip():
            raise ConfigError(
                f"--fake-gpus: empty; give GPUs, e.g. {FAKE_GPUS_EXAMPLE}, or drop the flag to "
                "use the node's real GPUs through NVML"
            )
        try:
            return FakeGpuBackend.from_spec(args.fake_gpus, seed=args.node_name)
        except FakeGpuSpecError as e:
            raise ConfigError(f"--fake-gpus: {e}") from e
    if args.fake_gpus_file:
        return FakeGpuBackend(load_inventory_file(args.fake_gpus_file, seed=args.node_name))
    try:
        return NvmlBackend()
    except GpuBackendUnavailable as e:
        raise ConfigError(
            f"cannot read this node's GPUs: {e}; on a machine without an NVIDIA driver, "
            f"run with fake GPUs, e.g. --fake-gpus {FAKE_GPUS_EXAMPLE.split()[0]}"
        ) from e


def build(args: argparse.Namespace) -> NodeAgent:
    """The `NodeAgent` the flags describe (not started)."""
    from vgpu.adapters.kube import KubeApi, KubeConfigMissing
    from vgpu.daemons.node_agent import AgentConfig, NodeAgent
    from vgpu.node.health import DEFAULT_IGNORED_XIDS, HealthPolicy, parse_xid_list

    if args.memory_unit_mib <= 0:
        raise ConfigError("--memory-unit-mib: must be a positive number of MiB, e.g. 256")
    names = resource_names(args.resource_domain)
    if not args.reconcile_s >= MIN_RECONCILE_S:
        raise ConfigError(
            f"--reconcile-s: {args.reconcile_s:g} is below the minimum of {MIN_RECONCILE_S:g} s "
            "(each round reads the node from the API server); use e.g. 30"
        )
    try:
        ignored = (
            DEFAULT_IGNORED_XIDS if args.xid_ignore is None else parse_xid_list(args.xid_ignore)
        )
    except ValueError as e:
        raise ConfigError(f"--xid-ignore: {e}") from e
    recovery = None if args.health_recovery_s < 0 else args.health_recovery_s
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
        memory_unit_mib=args.memory_unit_mib,
        grants=grants,
        allow_unassigned=args.allow_unassigned,
        report_numa=args.report_numa,
        health=HealthPolicy(ignored_xids=ignored, recovery_s=recovery),
        reconcile_s=args.reconcile_s,
        metrics_port=args.metrics_port or None,
        watchdog_s=args.watchdog_s,
        watchdog=watchdog,
        watchdog_event_interval_s=args.watchdog_event_interval_s,
        proc_root=args.proc_root,
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
