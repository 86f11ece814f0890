"""Start-up choices of the node agent: which Allocate policy it runs and the plugins serving it.

The mode is logged once at start because it decides whether any pod can get a GPU here: with
cluster credentials the hand-off admits only verified assignments; without them the agent fails
closed unless `--allow-unassigned` opens it. Kept apart from the composition root so the wording
of each mode, which operators grep for, lives next to the policy it announces.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vgpu.adapters.dmem import decide
from vgpu.adapters.kubelet.device_plugin import PluginOptions, PreStart
from vgpu.adapters.kubelet.node_plugins import NodeDevicePlugins
from vgpu.adapters.runtime_settings import cdi_device_names, toolkit_config
from vgpu.agent.driver_limits import DriverLimitHook
from vgpu.agent.metrics import CountingPolicy, NodeMetrics
from vgpu.node.allocation import AllocationPolicy, ClosedPolicy, DefaultAllocationPolicy
from vgpu.node.devices import ResourceNames
from vgpu.node.driver_mode import Choice
from vgpu.node.handoff.admissions import Handoff
from vgpu.node.handoff.allocate import HandoffPolicy
from vgpu.node.model import GpuInfo, GpuInventory
from vgpu.node.runtime_check import runtime_problems

if TYPE_CHECKING:
    from vgpu.agent.config import AgentConfig

log = logging.getLogger(__name__)

UNASSIGNED_UNDER_DRIVER_LIMITS = (
    "unassigned pods are not admitted on a node whose memory is held by the driver's per-pod "
    "memory limits (an unassigned container has no grant to limit it to)"
)


def local_policy(
    cfg: AgentConfig, names: ResourceNames, gpus: Sequence[GpuInfo]
) -> AllocationPolicy:
    """Without cluster credentials: open with --allow-unassigned, else closed."""
    default = DefaultAllocationPolicy(
        gpus, names=names, memory_unit_mib=cfg.memory_unit_mib, settings=cfg.grants
    )
    if cfg.allow_unassigned:
        log.warning(
            "mode: OPEN (no cluster credentials, --allow-unassigned): node labels, the "
            "gpu-inventory annotation and the hand-off are skipped; Allocate admits any "
            "devices with the default binpacking policy and mode %s's enforcement",
            cfg.grants.mode.value,
        )
        return default
    log.error(
        "mode: FAIL CLOSED (no cluster credentials, so no verified assignments): "
        "every Allocate is refused; give the agent its service account or pass "
        "--allow-unassigned"
    )
    return ClosedPolicy("no cluster credentials to verify assignments", default)


def handoff_policy(
    cfg: AgentConfig,
    names: ResourceNames,
    gpus: Sequence[GpuInfo],
    handoff: Handoff,
    *,
    on_admit: Callable[[], None],
    refresh: Callable[[], None],
    driver_limits: bool = False,
) -> AllocationPolicy:
    """With cluster credentials: Allocate admits pods with a verified assignment.

    `driver_limits`: the node's memory backend is the driver's per-pod limits. An unassigned
    container has no grant to limit it to, so its start would be refused anyway; it is refused
    at Allocate instead, and never holds devices PreStart could take for another pod's (a
    finished pod's record still naming the same IDs would have its cgroup limited, and the
    unassigned container would start with none)."""
    allow = cfg.allow_unassigned and not driver_limits
    log.info(
        "mode: HAND-OFF, fail closed (Allocate admits only pods with a verified assignment%s)",
        "; --allow-unassigned: unassigned pods get unreserved capacity"
        if allow
        else "; --allow-unassigned: ignored, the driver's memory limits need a grant"
        if cfg.allow_unassigned
        else "",
    )
    return HandoffPolicy(
        handoff,
        gpus,
        names=names,
        memory_unit_mib=cfg.memory_unit_mib,
        settings=cfg.grants,
        allow_unassigned=allow,
        unassigned_refused=UNASSIGNED_UNDER_DRIVER_LIMITS
        if driver_limits
        else "unassigned pods are not admitted (--allow-unassigned is off)",
        on_admit=lambda _pod: on_admit(),
        refresh=refresh,
    )


def check_runtime(cfg: AgentConfig, uuids: Sequence[str]) -> list[str]:
    """The node's runtime settings against what CDI device naming needs, each problem logged
    once at start (docs/isolation.md, "Runtime settings"); the agent serves either way."""
    problems = runtime_problems(
        uuids,
        cfg.grants.devices,
        cdi_device_names(cfg.cdi_spec_dirs),
        toolkit_config(cfg.toolkit_config),
    )
    for problem in problems:
        log.warning("runtime settings: %s", problem)
    if not problems:
        log.info(
            "runtime settings: every GPU has its CDI device; the NVIDIA runtime ignores "
            "NVIDIA_VISIBLE_DEVICES in unprivileged containers"
        )
    return problems


def driver_backend(
    cfg: AgentConfig, inventory: GpuInventory, handoff: Handoff | None, names: ResourceNames
) -> tuple[Choice, PreStart | None]:
    """The choice for this node and, when the driver limits memory, the PreStart hook. Without
    hand-off records (no cluster credentials) no container's pod can be found by its device
    IDs, so the driver's limits are not usable."""
    choice, nvml = decide(
        cfg.driver_limits,
        inventory,
        cfg.grants.mode.value,
        library=cfg.nvml_library,
        cgroupfs=cfg.cgroupfs,
        usable=handoff is not None,
        cores_why=cfg.grants.mode_why,
    )
    if nvml is None or handoff is None:
        return choice, None
    hook = DriverLimitHook(
        handoff.pods_holding, nvml, names, cgroupfs=cfg.cgroupfs, soft=cfg.driver_soft_limits
    )
    return choice, hook


def device_plugins(
    cfg: AgentConfig,
    names: ResourceNames,
    gpus: Sequence[GpuInfo],
    policy: AllocationPolicy,
    metrics: NodeMetrics,
    pre_start: PreStart | None = None,
) -> NodeDevicePlugins:
    """The kubelet-facing plugins, counting every Allocate in the metrics; with `pre_start`
    they ask the kubelet for PreStartContainer (the driver memory backend)."""
    options = PluginOptions(
        plugin_dir=cfg.plugin_dir,
        stop_grace_s=cfg.stop_grace_s,
        register_timeout_s=cfg.register_timeout_s,
        pre_start=pre_start,
    )
    plugins = NodeDevicePlugins(
        gpus,
        CountingPolicy(policy, metrics),
        options,
        names=names,
        memory_unit_mib=cfg.memory_unit_mib,
        report_numa=cfg.report_numa,
    )
    plugins.check_message_size()
    return plugins
