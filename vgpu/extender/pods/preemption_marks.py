"""What kube-scheduler's preemption reads of pods and the parse does not: priorities, nominated
nodes, and which pods are terminating by preemption.

kube-scheduler requeues a preemptor when its victim's deletion reaches its own informer. The
extender's pod watch is a second stream and can show the victim a moment longer, terminating but
still holding its GPU. A filter that then refuses every node is a FitError, which runs PostFilter:
`DefaultPreemption.PodEligibleToPreemptOthers` (pkg/scheduler/framework/plugins/
defaultpreemption/default_preemption.go) looks for a lower-priority pod terminating by preemption
on the preemptor's nominated node in *its* snapshot, finds none, and evicts a second victim. So the
filter answers that pod with an error instead (`Extender.filter`): kube-scheduler puts it in the
backoff queue without PostFilter (and clears its nomination, `clearNominatedNode` in
pkg/scheduler/schedule_one.go), and the retry a second later finds the victim gone from the watch.
It does so exactly while the watch shows what would make kube-scheduler itself wait.

A pod is terminating by preemption as `PodTerminatingByPreemption` reads it
(pkg/scheduler/framework/preemption): a deletion timestamp and a `DisruptionTarget` condition
that is true with reason `PreemptionByScheduler`. Its priority is `spec.priority`, 0 when absent
(`corev1helpers.PodPriority`). Only pods with a nomination or terminating by preemption are kept:
the marks are few, and each watch event updates them before the parse memo decides whether
anything else changed (both writes are status and metadata the memo ignores).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from vgpu.api.podspec import PodSpec
from vgpu.core.ids import PodKey

Obj = dict[str, Any]
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


class Mark(NamedTuple):
    """A pod's priority, its nominated node ("" for none) and whether it is leaving by
    preemption."""

    priority: int
    nominated: str
    preempted: bool


class Leaving(NamedTuple):
    """A preemptor's nominated node and the pods still leaving it for the preemptor."""

    node: str
    pods: tuple[PodKey, ...]


def mark_of(pod: Obj) -> Mark | None:
    """The pod's mark, None when it has neither a nomination nor a preemption under way; values
    of the wrong type read as absent (the watch never raises on a pod's content)."""
    meta, spec, status = (_map(pod.get(part)) for part in ("metadata", "spec", "status"))
    nominated = status.get("nominatedNodeName")
    nominated = nominated if isinstance(nominated, str) else ""
    preempted = bool(meta.get("deletionTimestamp")) and _preempted(status.get("conditions"))
    if not nominated and not preempted:
        return None
    priority = spec.get("priority")
    if not isinstance(priority, int) or isinstance(priority, bool):
        priority = 0
    return Mark(priority, nominated, preempted)


def _preempted(conditions: object) -> bool:
    """The first `DisruptionTarget` condition says it (as kube-scheduler reads them)."""
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == DISRUPTION_TARGET:
            return bool(
                condition.get("status") == "True"
                and condition.get("reason") == PREEMPTION_BY_SCHEDULER
            )
    return False


def _map(value: object) -> Obj:
    return value if isinstance(value, dict) else {}


class PreemptionMarks:
    """The marks of the watched pods that have one (module doc); changed under the cache's
    lock."""

    def __init__(self) -> None:
        self._marks: dict[PodKey, Mark] = {}

    def apply(self, key: PodKey, pod: Obj) -> None:
        """Keep the mark of this version of the pod (or none)."""
        mark = mark_of(pod)
        if mark is None:
            self._marks.pop(key, None)
        else:
            self._marks[key] = mark

    def forget(self, key: PodKey) -> None:
        self._marks.pop(key, None)

    def get(self, key: PodKey) -> Mark | None:
        return self._marks.get(key)

    def leaving_for(self, key: PodKey, pods: Mapping[PodKey, PodSpec]) -> Leaving | None:
        """What kube-scheduler would wait for before letting `key` preempt again: the pods of
        lower priority terminating by preemption on its nominated node; None when there are
        none (or no nomination)."""
        mark = self._marks.get(key)
        if mark is None or not mark.nominated:
            return None
        leaving = sorted(_leaving(self._marks.items(), pods, mark))
        return Leaving(mark.nominated, tuple(leaving)) if leaving else None


def _leaving(
    marks: Iterable[tuple[PodKey, Mark]], pods: Mapping[PodKey, PodSpec], preemptor: Mark
) -> Iterable[PodKey]:
    for key, mark in marks:
        spec = pods.get(key) if mark.preempted and mark.priority < preemptor.priority else None
        if spec is not None and spec.node == preemptor.nominated:
            yield key
