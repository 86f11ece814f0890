"""Which namespaces each queue serves: the operator's binding, as Kueue's LocalQueue binds a
namespace to a ClusterQueue.

A pod's queue label used to be free: any pod editor could label pods into another team's queue
(filling its cap, or making its strict hold or reclaim act for them) or leave every queue by
dropping the label. Now each queue in `queues.json` names the namespaces it serves, by name
(`namespaces: [team-a]`) and/or by label (`namespaceSelector: {matchLabels: {team: a}}`), and a
namespace belongs to the **first** queue that names it. The chart's admission policies set the
label from the namespace and refuse any other, and the extender counts a pod only when its label
is its namespace's queue: one mapping, read by both from the same values.

Only `matchLabels` is taken (an API server's CEL renders it exactly); an empty selector would
match every namespace and is refused, as is a namespace named by two queues. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vgpu.core.errors import ConfigError

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@dataclass(frozen=True, slots=True)
class Binding:
    """The namespaces one queue serves: by name, or every namespace carrying all `labels`."""

    queue: str
    names: frozenset[str] = frozenset()
    labels: tuple[tuple[str, str], ...] = ()

    def serves(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if namespace in self.names:
            return True
        return bool(self.labels) and all(labels.get(k) == v for k, v in self.labels)


def read_binding(queue: str, item: Mapping[str, object], where: str) -> Binding:
    """A queue's `namespaces` and `namespaceSelector`; at least one must be given."""
    names = item.get("namespaces", [])
    if not isinstance(names, list) or not all(
        isinstance(n, str) and _NAMESPACE.match(n) for n in names
    ):
        raise ConfigError(
            f"{where}.namespaces: {names!r} must be a list of namespace names, e.g. [team-a]"
        )
    labels = _selector(item.get("namespaceSelector"), f"{where}.namespaceSelector")
    if not names and not labels:
        raise ConfigError(
            f"{where}: bind queue {queue!r} to its namespaces with namespaces: [NAME] "
            "and/or namespaceSelector: {matchLabels: {KEY: VALUE}}"
        )
    return Binding(queue, frozenset(names), labels)


def _selector(raw: object, where: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != {"matchLabels"}:
        raise ConfigError(f"{where}: give exactly matchLabels, e.g. {{matchLabels: {{team: a}}}}")
    labels = raw["matchLabels"]
    if not isinstance(labels, dict) or not labels:
        raise ConfigError(
            f"{where}.matchLabels: name at least one label (an empty selector matches every "
            "namespace)"
        )
    for key, value in labels.items():
        if not _LABEL_KEY.match(key) or not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise ConfigError(f"{where}.matchLabels: {key!r}: {value!r} is not a label")
    return tuple(sorted(labels.items()))


def check_unique(bindings: Sequence[Binding]) -> None:
    """Refuse a namespace named by two queues (which one would it serve?)."""
    seen: dict[str, str] = {}
    for i, binding in enumerate(bindings):
        for name in sorted(binding.names):
            if name in seen:
                raise ConfigError(
                    f"queues[{i}].namespaces: {name!r} is bound to queue {seen[name]!r} "
                    "already; bind a namespace to one queue"
                )
            seen[name] = binding.queue


def bound_queue(
    bindings: Sequence[Binding], namespace: str, labels: Mapping[str, str]
) -> str | None:
    """The queue a namespace belongs to: the first binding that serves it (None: no queue)."""
    return next((b.queue for b in bindings if b.serves(namespace, labels)), None)


def astray(
    bindings: Sequence[Binding], namespace: str, labels: Mapping[str, str], queue: str
) -> str | None:
    """Why a pod of `namespace` labelled `queue` counts in no queue (None: it counts in it).

    A pod counts only in its namespace's queue: labelled into another, it fills nothing of that
    queue and cannot start its strict hold or its reclaim (the leader and any report of it)."""
    bound = bound_queue(bindings, namespace, labels)
    if bound == queue:
        return None
    where = f"queue {bound}" if bound else "no queue"
    return f"namespace {namespace} is bound to {where}, not {queue}"
