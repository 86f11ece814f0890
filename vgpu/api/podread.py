"""Reading a pod the way the kubelet will treat its vGPU asks: one reader for extender and agent.

* `cores_limit`: the pod's `vgpu.io/cores-limit` annotation (an elastic upper bound on cores,
  in percent of SMs), part of every container's grant and so of the hand-off rule.
* `namespace_of`, `is_terminal`, `is_deleting`: the facts every reader needs, read one way. A
  pod's namespace defaults to "default" (as the API server fills it in); a pod is terminal when
  its phase is Succeeded or Failed (its containers hold nothing any more); a pod being deleted
  (`deletionTimestamp`) still runs until its phase says otherwise, so it is a separate fact:
  the node agent admits nothing for it, the extender keeps charging it until it is gone.
* The containers' vGPU asks are read by `vgpu.api.podasks`.

Pure: dict in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
"""Pod phases after which no container runs again (the kubelet releases its devices)."""

CORES_LIMIT = "vgpu.io/cores-limit"
"""Pod annotation: elastic upper bound on cores (percent of SMs) for modes that support it."""


def namespace_of(meta: Mapping[str, Any]) -> str:
    """The pod's namespace ("default" when the object names none)."""
    namespace = meta.get("namespace")
    return namespace if isinstance(namespace, str) and namespace else "default"


def is_terminal(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's phase is Succeeded or Failed."""
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in TERMINAL_PHASES


def is_deleting(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is being deleted (it may still run during its grace period)."""
    meta = pod.get("metadata")
    return isinstance(meta, Mapping) and bool(meta.get("deletionTimestamp"))


class CoresLimit(NamedTuple):
    """The pod's elastic cores limit: a value, or neither (unset), or a problem (unreadable)."""

    value: int | None = None
    problem: str | None = None


def cores_limit(annotations: Mapping[str, Any]) -> CoresLimit:
    """Read `vgpu.io/cores-limit`; never raises (a value of any type or size is a problem)."""
    raw = annotations.get(CORES_LIMIT) if isinstance(annotations, Mapping) else None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return CoresLimit()
    text = raw.strip() if isinstance(raw, str) else _small_int(raw)
    if not (text.isascii() and text.isdigit() and len(text) <= 3) or not 1 <= int(text) <= 100:
        shown = text[:20] if text else f"a {type(raw).__name__}"
        return CoresLimit(problem=f"{CORES_LIMIT}={shown!r}: expected a whole percentage 1..100")
    return CoresLimit(int(text))


def _small_int(raw: object) -> str:
    """A number written unquoted (hand-made objects), as text; "" for anything else or huge."""
    if isinstance(raw, int) and not isinstance(raw, bool) and -1000 < raw < 1000:
        return str(raw)
    return ""
