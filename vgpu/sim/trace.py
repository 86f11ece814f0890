"""Reading the Alibaba GPU trace (openb) into core values.

Node rows ``sn,cpu_milli,memory_mib,gpu,model`` become `Node`s with that many GPUs of the model.
Pod rows ``name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`` become `PodRequest`s:
``gpu_milli`` is the per-GPU share, standing for both compute (cores = gpu_milli / 10) and memory
(the same share of whichever GPU the pod lands on, exactly, via a proportional memory ask);
``num_gpu >= 2`` means whole GPUs; ``gpu_spec`` lists allowed models joined by ``|``.

Bad input raises `TraceError` with the file, line and column, and what to do about it. This
module parses text; the files (given or embedded) are read by `vgpu.cli.trace_files`.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass

from vgpu.core.errors import VgpuError
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import ANY_GPU, ContainerRequest, Gpu, GpuSelector, Node, PodRequest

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")

GPU_MEMORY_MIB = {
    "P100": 16 * 1024,
    "T4": 16 * 1024,
    "V100M16": 16 * 1024,
    "V100M32": 32 * 1024,
    "A10": 24 * 1024,
    "G1": 32 * 1024,
    "G2": 32 * 1024,
    "G3": 32 * 1024,
}
"""GPU memory per trace model. G1–G3 are undisclosed; 32 GiB is assumed. Single-axis replays are
insensitive to these sizes because trace pods ask for memory in proportion to the GPU."""
UNKNOWN_MODEL_MEMORY_MIB = 32 * 1024


class TraceError(VgpuError):
    """A trace file that cannot be read as asked."""


@dataclass(frozen=True, slots=True)
class Trace:
    """A cluster (nodes) and a pod list, as read from files."""

    nodes: tuple[Node, ...]
    pods: tuple[PodRequest, ...]


DEFAULT_NODES = "openb_node_list_gpu_node.csv"
DEFAULT_PODS = "openb_pod_list_default.csv"
"""The embedded default trace's files (package data under `vgpu/sim/data`)."""


@dataclass(frozen=True, slots=True)
class TraceText:
    """One trace file's content and the name its errors cite (the path as given)."""

    source: str
    text: str


def _rows(file: TraceText, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    path = file.source
    reader = csv.DictReader(file.text.splitlines(keepends=True))
    if not reader.fieldnames:
        raise TraceError(f"{path}: empty file; expected a header with {', '.join(required)}")
    missing = [c for c in required if c not in reader.fieldnames]
    if missing:
        raise TraceError(
            f"{path}: missing column(s) {', '.join(missing)}; "
            f"the header must include {', '.join(required)}"
        )
    empty = True
    for row in reader:
        empty = False
        yield reader.line_num, row
    if empty:
        raise TraceError(f"{path}: no data rows after the header")


def _int(path: str, line: int, row: dict[str, str], column: str) -> int:
    raw = (row.get(column) or "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise TraceError(
            f"{path}:{line}: column {column} is {raw!r}, expected a whole number"
        ) from None
    if value < 0:
        raise TraceError(f"{path}:{line}: column {column} is negative ({value})")
    return value


def parse_nodes(file: TraceText) -> tuple[Node, ...]:
    """Nodes from a node CSV; each GPU gets a stable synthetic uuid."""
    nodes, path = [], file.source
    for line, row in _rows(file, NODE_COLUMNS):
        name = row["sn"].strip()
        count = _int(path, line, row, "gpu")
        model = (row.get("model") or "").strip()
        if count and not model:
            raise TraceError(f"{path}:{line}: node {name} has {count} GPU(s) but no model")
        mem = GPU_MEMORY_MIB.get(model, UNKNOWN_MODEL_MEMORY_MIB)
        gpus = tuple(Gpu(GpuUUID(f"{name}-gpu{i}"), i, model, mem) for i in range(count))
        nodes.append(
            Node(
                NodeName(name),
                _int(path, line, row, "cpu_milli"),
                _int(path, line, row, "memory_mib"),
                gpus,
            )
        )
    return tuple(nodes)


def _selector(path: str, line: int, spec: str, models: set[str]) -> GpuSelector:
    wanted = tuple(dict.fromkeys(p.strip() for p in spec.split("|") if p.strip()))
    if not wanted:
        return ANY_GPU
    unknown = [m for m in wanted if m not in models]
    if unknown:
        raise TraceError(
            f"{path}:{line}: gpu_spec names unknown GPU model(s) {', '.join(unknown)}; "
            f"the cluster has {', '.join(sorted(models))}"
        )
    return GpuSelector(include_models=wanted)


def _container(path: str, line: int, num_gpu: int, milli: int) -> tuple[ContainerRequest, ...]:
    if num_gpu == 0:
        return ()
    if milli % 10:
        raise TraceError(
            f"{path}:{line}: gpu_milli {milli} is not a multiple of 10 (one core unit is 1 % of a GPU)"
        )
    if num_gpu == 1:
        if not 0 < milli <= 1000:
            raise TraceError(
                f"{path}:{line}: gpu_milli {milli} must be in 10..1000 when num_gpu is 1"
            )
        return (ContainerRequest("main", milli // 10),)
    if milli != 1000:
        raise TraceError(
            f"{path}:{line}: num_gpu {num_gpu} with gpu_milli {milli}: several GPUs must be whole "
            "(gpu_milli 1000)"
        )
    return (ContainerRequest("main", 100 * num_gpu),)


def parse_pods(file: TraceText, models: set[str]) -> tuple[PodRequest, ...]:
    """Pods from a pod CSV (optional columns may be absent, as in the multigpu variants)."""
    pods, path = [], file.source
    for line, row in _rows(file, POD_COLUMNS):
        num_gpu = _int(path, line, row, "num_gpu")
        milli = _int(path, line, row, "gpu_milli")
        pods.append(
            PodRequest(
                key=PodKey(row["name"].strip()),
                cpu_milli=_int(path, line, row, "cpu_milli"),
                memory_mib=_int(path, line, row, "memory_mib"),
                containers=_container(path, line, num_gpu, milli),
                selector=_selector(path, line, row.get("gpu_spec") or "", models),
            )
        )
    return tuple(pods)


def parse_trace(nodes_csv: TraceText, pods_csv: TraceText) -> Trace:
    """A trace from its node and pod lists; the pods' GPU models must be the nodes'."""
    nodes = parse_nodes(nodes_csv)
    gpu_nodes = tuple(n for n in nodes if n.gpus)
    if not gpu_nodes:
        raise TraceError("the node list has no GPU nodes")
    models = {g.model for n in gpu_nodes for g in n.gpus}
    pods = parse_pods(pods_csv, models)
    return Trace(nodes, pods)
