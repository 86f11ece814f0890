"""Which memory backend a node uses: the driver's own per-cgroup limits, or not. Pure.

Since driver r615 (CUDA 13.4), NVIDIA's driver enforces a hard device-memory limit per cgroup
("MPS v3 Memory Partitioning" in NVIDIA's MPS documentation): an allocation past it fails with
out-of-memory in every process of the cgroup, whatever the process links or preloads, which no
interposer can promise against a hostile tenant. The documented requirements are cgroup v2 at
/sys/fs/cgroup, CUDA 13.4 or newer and a non-MIG device; NVML sets the limit
(`nvmlDeviceSetMemoryLimits_v1`). With the kernel's dmem controller the limit is `dmem.max` and
`dmem.capacity` lists one `nvidia/<pci>/vidmem` region per GPU the driver registered.

The adapter (`vgpu.adapters.dmem`) gathers the facts once at start; this module decides, so the
decision is tested without a GPU and the one log line that announces it says why.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

MIN_DRIVER_MAJOR = 615  # the first release with per-cgroup memory limits (MPS v3)
_MAJOR = re.compile(r"^(\d+)\.")


class DriverLimits(enum.Enum):
    """What the operator asked for (`--driver-memory-limits`)."""

    AUTO = "auto"  # use them where every GPU of the node has them
    ON = "on"  # required: the agent refuses to start without them
    OFF = "off"


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What decides whether the driver can limit one GPU's memory per cgroup."""

    uuid: str
    region: str  # its dmem region, `nvidia/0000:3b:00.0/vidmem`
    mig_enabled: bool
    listed: bool  # `dmem.capacity` lists the region


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """The node's facts, gathered once at start (`vgpu.adapters.dmem.gather_facts`)."""

    driver_version: str  # "" when unknown
    nvml_limits: bool  # libnvidia-ml exports both memory-limit functions
    cgroup_v2: bool
    dmem: bool  # the dmem controller is available (cgroup.controllers names it)
    gpus: tuple[GpuFacts, ...] = ()
    kubepods: bool = True  # the kubelet's pod cgroups are visible where the agent looks
    pods_known: bool = True  # the daemon can tell a container's pod (the agent: its hand-off)


@dataclass(frozen=True, slots=True)
class Choice:
    """Whether the driver limits memory on this node, and the reason, for the log line."""

    driver_limits: bool
    reason: str

    def backend(self, mode: str) -> str:
        """The node label's and metric's value: `driver`, else the `--mode` that holds memory
        (`vgpu-core`, `hami`, `mps`; `plain` holds nothing)."""
        return "driver" if self.driver_limits else mode

    def line(self, cores: str, cores_why: str = "") -> str:
        """The one start-up log line: what holds memory and what enforces compute (`cores`, the
        `--mode`), and why each (`cores_why`: how `--mode auto` chose, when it did)."""
        memory = "driver limits per pod cgroup" if self.driver_limits else cores
        why = f"{self.reason}; {cores_why}" if cores_why else self.reason
        return f"memory backend: {memory}, cores: {cores} ({why})"


class DriverLimitsUnavailable(ValueError):
    """`--driver-memory-limits on` on a node that lacks what they need."""


def driver_major(version: str) -> int | None:
    match = _MAJOR.match(version)
    return int(match.group(1)) if match else None


def gaps(facts: NodeFacts) -> list[str]:
    """What the node lacks for driver memory limits; [] when every GPU has them."""
    out = []
    major = driver_major(facts.driver_version)
    if major is None or major < MIN_DRIVER_MAJOR:
        out.append(f"driver {facts.driver_version or 'unknown'} < r{MIN_DRIVER_MAJOR}")
    elif not facts.nvml_limits:
        out.append("libnvidia-ml lacks nvmlDeviceSetMemoryLimits_v1/GetMemoryLimits_v1")
    if not facts.cgroup_v2:
        out.append("cgroup v1 (the limits need cgroup v2)")
    elif not facts.kubepods:
        out.append("no kubepods cgroup in the agent's view of cgroup v2 (mount the host's)")
    if not facts.pods_known:
        out.append("no hand-off records to tell a container's pod (no cluster credentials)")
    if not facts.gpus:
        out.append("no GPU")
    out += [f"{g.uuid} has MIG on (MIG is not supported)" for g in facts.gpus if g.mig_enabled]
    if facts.dmem:  # without dmem the driver keeps the limits itself (its internal backend)
        out += [f"dmem.capacity does not list {g.region}" for g in facts.gpus if not g.listed]
    return out


def choose(requested: DriverLimits, facts: NodeFacts) -> Choice:
    """The node's memory backend; `on` without the capability raises, naming what is missing."""
    if requested is DriverLimits.OFF:
        return Choice(False, "--driver-memory-limits off")
    missing = gaps(facts)
    if missing and requested is DriverLimits.ON:
        raise DriverLimitsUnavailable(
            "--driver-memory-limits on, but " + "; ".join(missing) + " (use auto or off)"
        )
    if missing:
        return Choice(False, "driver limits not available: " + "; ".join(missing))
    backend = "dmem" if facts.dmem else "the driver's internal backend"
    return Choice(True, f"driver {facts.driver_version}, cgroup v2, {backend}, no MIG")
