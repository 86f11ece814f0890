"""The extender verbs' settings, filled by the command line (`vgpu.daemons.extender.cli`) and
read by filter, prioritize, preempt and bind alike, so that every verb runs under one set."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.api.podspec import VGPU_SCHEDULER
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.policy.specs import PolicySpec
from vgpu.core.units import DEFAULT_MEMORY_UNIT_MIB
from vgpu.extender.resolve import DEFAULT_POLICY
from vgpu.extender.watchwait import WATCH_WAIT_S, WATCH_WAITERS


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    """Settings of the verbs (the CLI fills them)."""

    policy: PolicySpec = DEFAULT_POLICY
    gang_timeout: float = 60.0
    memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB
    names: ResourceNames = DEFAULT_NAMES
    assume_ttl: float = 30.0
    bind_wait: float = 3.0
    pod_policies: tuple[PolicySpec, ...] = ()
    """Policies pods may name in `vgpu.io/policy` besides `policy` (--allow-pod-policy)."""
    pick_ttl: float = 5.0
    """Seconds a pick (a filter that left one node, see `ClusterCache.pick`) waits for its bind."""
    filter_best: int = 1
    """Filter passes at most this many nodes, those sharing the policy's best score (0: every
    node that fits; --filter-best). kube-scheduler then scores only those, or none when one is
    left, and needs no prioritize call (pkg/scheduler/schedule_one.go, schedulePod)."""
    schedulers: frozenset[str] = frozenset({VGPU_SCHEDULER})
    """The pods' spec.schedulerName values the extender serves (--scheduler-name): kube-scheduler
    only schedules pods of its own profiles, so a request for another scheduler's pod is forged
    and holds nothing; another scheduler's pod is no gang member either (`ClusterCache`)."""
    watch_wait: float = WATCH_WAIT_S
    """Seconds a filter or preempt waits for the watch to show the pod its request names."""
    watch_waiters: int = WATCH_WAITERS
    """How many verbs may wait for the watch at once; one more fails at once."""


DEFAULT_CONFIG = ExtenderConfig()
"""The settings as shipped (every flag at its default)."""
