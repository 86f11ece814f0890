"""Real use per GPU, beside the grants: memory in use and how busy each GPU is, as the node
agents measure them through the driver (NVML) and export them (`vgpu_gpu_memory_used_bytes`,
`vgpu_gpu_utilization_ratio`, labelled by GPU UUID; per container on each GPU
`vgpu_container_gpu_memory_used_bytes`; `vgpu.agent.usage`).

Grants say what pods may use; an operator also asks what they do use (an idle 50-core grant,
a GPU at 100% with little granted). The agents publish these figures only as metrics, not on
the API server (a patch per sample would be churn every watcher pays for), so the report reads
them from the Prometheus that scrapes the agents: the four instant queries below, whose
answers this module reads. A figure older than `STALE_S` is shown marked stale; a GPU without
one shows "-". Pure: the caller asks Prometheus (`vgpu.inspect.real_use_read`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu.inspect.layout import memory

MEMORY_QUERY = "vgpu_gpu_memory_used_bytes"
BUSY_QUERY = "vgpu_gpu_utilization_ratio"
AGE_QUERY = "time() - timestamp(vgpu_gpu_memory_used_bytes)"
CONTAINER_QUERY = "vgpu_container_gpu_memory_used_bytes"
QUERIES = (MEMORY_QUERY, BUSY_QUERY, AGE_QUERY, CONTAINER_QUERY)
STALE_S = 120.0
"""Seconds after which a sample is shown stale: several scrapes missed (the chart's scrape
interval is 30 s)."""
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class GpuUse:
    memory_used_mib: float | None
    busy_percent: float | None
    age_s: float | None

    @property
    def stale(self) -> bool:
        return self.age_s is not None and self.age_s > STALE_S


@dataclass(frozen=True, slots=True)
class RealUse:
    """What the report knows of real use: per GPU UUID, and where it came from."""

    source: str
    gpus: Mapping[str, GpuUse]
    problem: str = ""
    """Why nothing could be read ("" when it was)."""
    containers: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    """(namespace/pod, container, GPU UUID) -> MiB of that GPU's memory the container uses."""

    def container_mib(self, pod: str, container: str, gpu: str) -> float | None:
        return self.containers.get((pod, container, gpu))


def from_answers(source: str, answers: Mapping[str, Any]) -> RealUse:
    """Real use from the Prometheus HTTP API's answers to `QUERIES` (query -> JSON body)."""
    try:
        memory_b, busy, age = (_by_gpu(answers.get(q), q) for q in QUERIES[:3])
        per_container = _vector(answers.get(CONTAINER_QUERY), CONTAINER_QUERY, _CONTAINER)
    except ValueError as err:
        return RealUse(source, {}, str(err))
    gpus = {
        uuid: GpuUse(
            memory_b[uuid] / MIB if uuid in memory_b else None,
            100.0 * busy[uuid] if uuid in busy else None,
            age.get(uuid),
        )
        for uuid in sorted(memory_b.keys() | busy.keys())
    }
    containers = {
        (f"{ns}/{pod}", c, gpu): v / MIB for (ns, pod, c, gpu), v in per_container.items()
    }
    return RealUse(source, gpus, containers=containers)


_CONTAINER = ("namespace", "pod", "container", "gpu")


def _by_gpu(body: object, query: str) -> dict[str, float]:
    return {key[0]: value for key, value in _vector(body, query, ("gpu",)).items()}


def _vector(body: object, query: str, labels: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    """The values of an instant vector answer by their `labels`; ValueError naming the query
    if it is not one."""
    if not isinstance(body, Mapping) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, Mapping) else None
        raise ValueError(f"Prometheus did not answer {query!r}: {error or 'no success status'}")
    data = body.get("data") or {}
    if not isinstance(data, Mapping) or data.get("resultType") != "vector":
        raise ValueError(f"Prometheus answered {query!r} with no instant vector")
    out: dict[tuple[str, ...], float] = {}
    for sample in data.get("result") or []:
        try:
            key = tuple(str(sample["metric"][label]) for label in labels)
            out[key] = float(sample["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue  # a series without the labels or a value: not a figure of ours
    return out


def use_cell(use: GpuUse | None) -> str:
    """`3.1Gi 45%` (memory in use, busy); `?` for a part not measured; `-` for no figure."""
    if use is None:
        return "-"
    used = "?" if use.memory_used_mib is None else memory(use.memory_used_mib)
    busy = "?" if use.busy_percent is None else f"{use.busy_percent:.0f}%"
    text = f"{used} {busy}"
    return f"{text} (stale {use.age_s:.0f}s)" if use.stale else text


def container_cell(mib: float | None) -> str:
    """A container's GPU memory in use on one GPU (`-` when not measured)."""
    return "-" if mib is None else memory(mib)


def use_document(use: GpuUse | None) -> dict[str, Any] | None:
    """One GPU's real use for -o json (None: no figure)."""
    if use is None:
        return None
    return {
        "memoryUsedMiB": None if use.memory_used_mib is None else round(use.memory_used_mib, 1),
        "busyPercent": None if use.busy_percent is None else round(use.busy_percent, 1),
        "ageSeconds": None if use.age_s is None else round(use.age_s, 1),
        "stale": use.stale,
    }


def footer(real: RealUse) -> str:
    """The line saying where real use comes from, or why it is missing."""
    if real.problem:
        return f"Real use: not known ({real.problem}); REAL USE shows -"
    return (
        f"Real use (REAL USE: GPU memory in use, busy %) from {real.source}; stale after "
        f"{STALE_S:.0f}s"
    )
