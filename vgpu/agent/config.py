"""The node agent's settings: one frozen value the command line (`vgpu.daemons.node_agent.cli`) or a
test builds, and every part of the agent reads.

In a module of its own so that the parts (`vgpu.agent.mode`, `pods`, `publish`...) can name it
without importing the agent that wires them: the agent imports its parts, never the other way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vgpu.adapters.kubelet.device_plugin import DEFAULT_PLUGIN_DIR
from vgpu.adapters.kubelet.pod_resources import DEFAULT_POD_RESOURCES_SOCKET
from vgpu.adapters.procfs import DEFAULT_PROC_ROOT
from vgpu.node.devices import DEFAULT_DOMAIN, DEFAULT_MEMORY_UNIT_MIB
from vgpu.node.driver_mode import DriverLimits
from vgpu.node.grants import GrantSettings
from vgpu.node.health import HealthPolicy
from vgpu.node.runtime_check import DEFAULT_CDI_DIRS, DEFAULT_TOOLKIT_CONFIG
from vgpu.node.watchdog import WatchdogPolicy


@dataclass(frozen=True, slots=True)
class AgentConfig:
    node_name: str
    assignment_key: bytes
    plugin_dir: Path = DEFAULT_PLUGIN_DIR
    pod_resources_socket: Path = DEFAULT_POD_RESOURCES_SOCKET
    domain: str = DEFAULT_DOMAIN
    memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB
    grants: GrantSettings = field(default_factory=GrantSettings)
    allow_unassigned: bool = False
    report_numa: bool = False  # NUMA nodes in ListAndWatch: the kubelet's topology manager narrows
    health: HealthPolicy = field(default_factory=HealthPolicy)
    reconcile_s: float = 30.0
    unsure_reconcile_s: float = 1.0  # sooner while an attribution waits for the kubelet's record
    admission_grace_s: float = 30.0
    stale_sync_s: float = 1.0  # `KubeletStale` steps: pods gone, devices the kubelet holds
    metrics_port: int | None = None
    watch_timeout_s: int = 300
    retry_s: float = 1.0  # first retry after an API failure; doubles up to max_retry_s
    max_retry_s: float = 30.0
    stop_grace_s: float = 2.0
    register_timeout_s: float = 5.0
    watchdog_s: float = 10.0  # <= 0 disables the watchdog loop
    watchdog: WatchdogPolicy = field(default_factory=WatchdogPolicy)
    watchdog_event_interval_s: float = 300.0
    proc_root: Path = DEFAULT_PROC_ROOT
    cdi_spec_dirs: tuple[Path, ...] = DEFAULT_CDI_DIRS  # read for the runtime check at start
    toolkit_config: Path = DEFAULT_TOOLKIT_CONFIG  # the NVIDIA runtime's config.toml, likewise
    driver_limits: DriverLimits = DriverLimits.OFF  # the driver memory backend (docs/isolation.md)
    driver_soft_limits: bool = False  # also set each pod's soft limit (a floor) to its grant
    cgroupfs: Path = Path("/sys/fs/cgroup")  # cgroup v2 as the agent sees it (pod cgroups, dmem)
    nvml_library: str = "libnvidia-ml.so.1"
