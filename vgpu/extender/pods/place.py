"""Where a read pod goes on a given node, and an assignment's canonical form.

`place_read` is the core's placement (`vgpu.core.given_node.place`) for a pod as the extender
reads it (`PodSpec`): its init-container roles and what pending containers there already hold;
the cache's `place`, the filter and the bind all call it, so they agree. `canonical` orders an
assignment's containers as decoding the annotation yields them, so an assignment made here
compares equal to the one read back from a bound pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from vgpu.api.podspec import PodSpec
from vgpu.core.fit import Verdict
from vgpu.core.given_node import place
from vgpu.core.handoff_rule import PendingContainer
from vgpu.core.ids import NodeName
from vgpu.core.model import Assignment
from vgpu.core.policy.interface import Policy
from vgpu.core.scheduler import Scheduler


def canonical(assignment: Assignment) -> Assignment:
    """The assignment with containers in name order, as decoding the annotation yields them."""
    return replace(
        assignment, containers=tuple(sorted(assignment.containers, key=lambda c: c.name))
    )


def place_read(
    scheduler: Scheduler,
    spec: PodSpec,
    node: NodeName,
    pending: Sequence[PendingContainer],
    policy: Policy,
) -> Assignment | Verdict:
    """The core's placement for a read pod: its init-container roles and its pending grants."""
    return place(
        scheduler,
        spec.request,
        node,
        policy,
        roles=spec.roles,
        pending=pending,
        describe=spec.pending,
    )
