"""The queue contract on the cluster: the ConfigMap's queues, the label, the gate, Kueue's marks.

The operator writes queues in the chart's values; the chart renders them as JSON into the
ConfigMap `vgpu-queues` (key `queues.json`), which the extender's leader reads. `read_config`
turns that text into `QueueSpec`s and refuses anything malformed with one line naming the field
and the fix (`ConfigError`): a typo in a weight must not silently give a team nothing.

Each queue is bound to namespaces (`vgpu.api.queues.namespaces`); the chart's
MutatingAdmissionPolicy sets a pod's label `vgpu.io/queue: <name>` from its namespace and adds the
scheduling gate `vgpu.io/queue` at creation, except to pods that ask Kueue to admit them (its
queue-name or pod-group-name label, or its gate `kueue.x-k8s.io/admission`: Kueue holds those
itself, which the chart's ValidatingAdmissionPolicy makes sure of). Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.queues.namespaces import Binding, check_unique, read_binding
from vgpu.core.errors import ConfigError
from vgpu.core.queues.proportion import UNCAPPED, QueueSpec

QUEUE_LABEL = "vgpu.io/queue"
QUEUE_GATE = "vgpu.io/queue"
CONFIG_KEY = "queues.json"
UNLIMITED = UNCAPPED
"""A cap dimension the operator leaves out: no cap on it (`vgpu.core.queues.UNCAPPED`)."""
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_TOP = {"queues", "minRuntimeSeconds", "intervalSeconds", "reclaimPerPass"}
_QUEUE = {"name", "weight", "cap", "reclaim", "strictSeconds", "namespaces", "namespaceSelector"}
_CAP = {"cores", "memory"}


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Every queue and the release loop's settings."""

    queues: tuple[QueueSpec, ...] = ()
    min_runtime_s: float = 300.0
    """Reclaim never evicts a pod that has run less than this."""
    interval_s: float = 2.0
    """Seconds between release passes."""
    reclaim_per_pass: int = 4
    """Waiting jobs per queue that may ask for reclaim in one pass (each asks a what-if)."""
    bindings: tuple[Binding, ...] = ()
    """Which namespaces each queue serves, in the queues' order (the first binding wins)."""


def read_config(text: str) -> QueueConfig:
    """Parse the ConfigMap's `queues.json`; raises `ConfigError` naming the field."""
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise ConfigError(f"{CONFIG_KEY}: not JSON ({err}); write it through the chart") from None
    top = _object(raw, CONFIG_KEY)
    _known(top, _TOP, CONFIG_KEY)
    items = top.get("queues", [])
    if not isinstance(items, list):
        raise ConfigError(f"{CONFIG_KEY}.queues: must be a list of queues, e.g. [{{name: a}}]")
    specs = tuple(_queue(item, f"queues[{i}]") for i, item in enumerate(items))
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.name in seen:
            raise ConfigError(f"queues[{i}].name: {spec.name!r} appears twice; rename one")
        seen.add(spec.name)
    bindings = tuple(
        read_binding(spec.name, item, f"queues[{i}]")
        for i, (spec, item) in enumerate(zip(specs, items, strict=True))
    )
    check_unique(bindings)
    return QueueConfig(
        specs,
        _number(top, "minRuntimeSeconds", 300.0, 0.0, 86_400.0),
        _number(top, "intervalSeconds", 2.0, 0.5, 600.0),
        int(_number(top, "reclaimPerPass", 4, 0, 100, whole=True)),
        bindings,
    )


def _queue(raw: object, where: str) -> QueueSpec:
    item = _object(raw, where)
    _known(item, _QUEUE, where)
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"{where}.name: {name!r} must be a label value (1-63 letters, digits, '-', '_', '.')"
        )
    weight = item.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 1_000_000:
        raise ConfigError(f"{where}.weight: {weight!r} must be a whole number from 1 to 1000000")
    reclaim = item.get("reclaim", False)
    if not isinstance(reclaim, bool):
        raise ConfigError(f"{where}.reclaim: {reclaim!r} must be true or false")
    strict = _number(item, "strictSeconds", 0.0, 0.0, 86_400.0, where=where)
    return QueueSpec(name, weight, _cap(item.get("cap"), f"{where}.cap"), reclaim, strict)


def _cap(raw: object, where: str) -> tuple[int, int] | None:
    if raw is None:
        return None
    cap = _object(raw, where)
    _known(cap, _CAP, where)
    if not cap:
        raise ConfigError(f"{where}: name cores and/or memory units, e.g. {{cores: 400}}")
    out = []
    for dim in ("cores", "memory"):
        value = cap.get(dim, UNLIMITED)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{where}.{dim}: {value!r} must be a whole number of units >= 0")
        out.append(value)
    return (out[0], out[1])


def _number(
    obj: Mapping[str, Any],
    key: str,
    default: float,
    low: float,
    high: float,
    *,
    where: str = "",
    whole: bool = False,
) -> float:
    value = obj.get(key, default)
    field = f"{where}.{key}" if where else key
    kinds = (int,) if whole else (int, float)
    # `value != value`: nan; math.isnan would convert a whole number past a float's range
    # (10**400) and raise OverflowError, a traceback instead of this line
    if isinstance(value, bool) or not isinstance(value, kinds) or value != value:
        kind = "a whole number" if whole else "a number"
        raise ConfigError(f"{field}: {value!r} must be {kind} from {low:g} to {high:g}")
    if not low <= value <= high:
        raise ConfigError(f"{field}: {value!r} is out of range; use {low:g} to {high:g}")
    return float(value)


def _object(raw: object, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a {type(raw).__name__}, must be an object")
    return raw


def _known(obj: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in obj if k not in known)
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: unknown setting; use one of {', '.join(sorted(known))}"
        )


def queue_of(metadata: Mapping[str, Any]) -> str | None:
    """The queue a pod's labels name (None: the pod is not queued)."""
    labels = metadata.get("labels")
    if not isinstance(labels, Mapping):
        return None
    name = labels.get(QUEUE_LABEL)
    return name if isinstance(name, str) and name else None


def gates_of(spec: Mapping[str, Any]) -> list[str]:
    """The names of a pod's scheduling gates, in order."""
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        return []
    return [str(g.get("name", "")) for g in gates if isinstance(g, Mapping)]
