"""Which of kube-scheduler's priority preemptions the queues allow: only inside one queue.

kube-scheduler preempts by priority alone: a pod whose filter fails everywhere (its reserved
node fails an affinity of its own, say) evicts lower-priority pods wherever that frees room,
whatever their queue. Across queues that bypasses every rule of reclaim (the victims' queue kept
at or above its deserved share, their minimum runtime, no ping-pong, opt-in per queue) and the
release's own (a job goes only where it fits now): a team at its share with a higher
PriorityClass took another team's running pods. So a preemption is allowed only when the
preemptor and every victim are in the same queue (their `vgpu.io/queue` labels, set from the
namespace at creation and protected by admission), or all in none: pods of namespaces bound to
no queue preempt each other as without queues, and neither side crosses into the other. A
victim in the preemptor's own namespace is always allowed: it is the same team's, whatever its
label (the gate labels only vGPU and gang pods, so a team's CPU-only pods carry none).
Between queues, only reclaim moves GPUs. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable


def crossing(
    preemptor: str | None, namespace: str, victims: Iterable[tuple[str | None, str]]
) -> str | None:
    """Why evicting `victims` (their queue, None: in no queue, and namespace) for a pod of
    queue `preemptor` in `namespace` is refused, if it is: a victim of another namespace and
    another queue, or of a queue where the pod is in none (and the other way round)."""
    for victim, where in victims:
        if victim != preemptor and where != namespace:
            mine = f"queue {preemptor}" if preemptor else "no queue"
            theirs = f"queue {victim}" if victim else "no queue"
            return (
                f"a pod of {mine} may not preempt a pod of {theirs}: between queues only "
                "reclaim evicts"
            )
    return None
