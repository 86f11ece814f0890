"""The nodes kube-scheduler has nominated pods for (`status.nominatedNodeName`), from the watch.

kube-scheduler nominates a preemptor for the node where it evicted victims; the filter reads the
nomination to tell a preemptor waiting for its victims' devices from any other refused pod
(`vgpu.extender.preemption_wait`). A nomination is status, which the parse memo ignores
(`vgpu.extender.pods.memo`), so every watch event updates this table before the memo decides
whether anything else changed. Only pods with a nomination are kept: they are few.
"""

from __future__ import annotations

from typing import Any

from vgpu.core.ids import PodKey

Obj = dict[str, Any]


def nominated_node(pod: Obj) -> str:
    """The pod's `status.nominatedNodeName`, "" when none or not a string (the watch never
    raises on a pod's content)."""
    status = pod.get("status")
    node = status.get("nominatedNodeName") if isinstance(status, dict) else None
    return node if isinstance(node, str) else ""


class Nominations:
    """The watched pods' nominations (module doc); changed under the cache's lock."""

    def __init__(self) -> None:
        self._nodes: dict[PodKey, str] = {}

    def apply(self, key: PodKey, pod: Obj) -> None:
        """Keep the nomination of this version of the pod (or none)."""
        node = nominated_node(pod)
        if node:
            self._nodes[key] = node
        else:
            self._nodes.pop(key, None)

    def forget(self, key: PodKey) -> None:
        self._nodes.pop(key, None)

    def get(self, key: PodKey) -> str:
        """The node the pod is nominated for, "" when none."""
        return self._nodes.get(key, "")
