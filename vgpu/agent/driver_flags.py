"""The node agent's flags for the driver memory backend (docs/isolation.md, "Driver memory
limits"): whether the driver's per-cgroup limits hold each pod's memory, and where the agent
sees the host's cgroup v2 tree. The command line (`vgpu.daemons.node_agent.cli`) adds them with
`add_driver_flags(p)` and passes `**driver_settings(args)` to `AgentConfig`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vgpu.node.driver_mode import DriverLimits


def add_driver_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--driver-memory-limits",
        choices=[m.value for m in DriverLimits],
        default=DriverLimits.AUTO.value,
        help="the driver's own per-cgroup memory limits (r615+, cgroup v2, no MIG), set on each "
        "pod's cgroup at PreStartContainer; auto: where every GPU has them, with one log line "
        "saying what and why; on: refuse to start without them; off: never",
    )
    p.add_argument(
        "--driver-soft-limits",
        action="store_true",
        help="also set each pod's soft limit (a guaranteed floor) to its grant",
    )
    p.add_argument(
        "--cgroupfs",
        type=Path,
        default=Path("/sys/fs/cgroup"),
        help="the host's cgroup v2 tree as the agent sees it (the pods' cgroups, dmem.capacity)",
    )


def driver_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The AgentConfig fields the flags set."""
    return {
        "driver_limits": DriverLimits(args.driver_memory_limits),
        "driver_soft_limits": bool(args.driver_soft_limits),
        "cgroupfs": args.cgroupfs,
    }
