"""The driver memory backend's flags, shared by `vgpu node-agent` and `vgpu dra-driver`
(docs/isolation.md, "Driver memory limits"): whether the driver's per-cgroup limits hold each
pod's memory, and where the daemon sees the host's cgroup v2 tree. Each daemon adds them with
`add_driver_flags(p)` and passes `**driver_settings(args)` to its config, so both read them
alike and decide alike (`vgpu.node.driver_mode.choose`)."""

from __future__ import annotations

import argparse
from typing import Any

from vgpu.flags import add_path_flag
from vgpu.node.driver_mode import DriverLimits


def add_driver_flags(p: argparse.ArgumentParser) -> None:
    """`--driver-memory-limits`, `--driver-soft-limits`, `--cgroupfs`."""
    p.add_argument(
        "--driver-memory-limits",
        choices=[m.value for m in DriverLimits],
        default=DriverLimits.AUTO.value,
        help="the driver's own per-cgroup memory limits (r615+, cgroup v2, no MIG), set on each "
        "pod's cgroup before its containers start; auto: where every GPU has them, with one log "
        "line saying what and why; on: refuse to start without them; off: never",
    )
    p.add_argument(
        "--driver-soft-limits",
        action="store_true",
        help="also set each pod's soft limit (a guaranteed floor) to its grant",
    )
    add_path_flag(
        p,
        "--cgroupfs",
        "/sys/fs/cgroup",
        "the host's cgroup v2 tree as the daemon sees it (the pods' cgroups, dmem.capacity)",
    )


def driver_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the flags set (`AgentConfig`, `DraConfig`)."""
    return {
        "driver_limits": DriverLimits(args.driver_memory_limits),
        "driver_soft_limits": bool(args.driver_soft_limits),
        "cgroupfs": args.cgroupfs,
    }
