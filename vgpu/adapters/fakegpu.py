"""`FakeGpuBackend`: a programmable `GpuBackend` for tests, the simulator and GPU-less dev clusters.

GPUs come from a compact spec string (`4xA100-SXM4-80GB`, `2xT4,1xA10`, `1xMyGPU:20480`) or a
YAML file (see `load_inventory_file`). UUIDs are derived from a seed and the GPU index, so the
same spec on the same node gives the same device IDs across restarts. Tests inject XID events,
per-process memory usage (changed at any time: processes start, grow and end), per-GPU
utilisation and backend failures. A GPU's memory in use is the sum of its processes' usage
unless a test sets it explicitly (memory the driver holds outside any process).
"""

from __future__ import annotations

import re
import threading
import time
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from vgpu.adapters.gpu import GpuBackendError
from vgpu.node.model import GpuInfo, GpuInventory, GpuStats, ProcessUsage, XidEvent

DEFAULT_DRIVER_VERSION = "550.54.15"
DEFAULT_CUDA_VERSION = "12.4"


class FakeGpuSpecError(GpuBackendError, ValueError):
    """A fake GPU spec string or file is invalid; the message names the field and the fix."""


@dataclass(frozen=True, slots=True)
class KnownModel:
    name: str  # what NVML's nvmlDeviceGetName reports
    memory_mib: int
    compute_capability: tuple[int, int]
    nvlink: bool  # SXM parts: GPUs of one spec term are NVLinked all-to-all


KNOWN_MODELS: Mapping[str, KnownModel] = {
    "A100-SXM4-80GB": KnownModel("NVIDIA A100-SXM4-80GB", 81920, (8, 0), True),
    "A100-SXM4-40GB": KnownModel("NVIDIA A100-SXM4-40GB", 40960, (8, 0), True),
    "A100-PCIE-80GB": KnownModel("NVIDIA A100 80GB PCIe", 81920, (8, 0), False),
    "A100-PCIE-40GB": KnownModel("NVIDIA A100-PCIE-40GB", 40960, (8, 0), False),
    "A30": KnownModel("NVIDIA A30", 24576, (8, 0), False),
    "A10": KnownModel("NVIDIA A10", 23028, (8, 6), False),
    "L4": KnownModel("NVIDIA L4", 23034, (8, 9), False),
    "L40S": KnownModel("NVIDIA L40S", 46068, (8, 9), False),
    "T4": KnownModel("Tesla T4", 15360, (7, 5), False),
    "V100-SXM2-16GB": KnownModel("Tesla V100-SXM2-16GB", 16384, (7, 0), True),
    "V100-SXM2-32GB": KnownModel("Tesla V100-SXM2-32GB", 32768, (7, 0), True),
    "V100-PCIE-16GB": KnownModel("Tesla V100-PCIE-16GB", 16384, (7, 0), False),
    "P100": KnownModel("Tesla P100-PCIE-16GB", 16384, (6, 0), False),
    "H100-SXM5-80GB": KnownModel("NVIDIA H100 80GB HBM3", 81559, (9, 0), True),
    "H100-PCIE-80GB": KnownModel("NVIDIA H100 PCIe", 81559, (9, 0), False),
    "H200": KnownModel("NVIDIA H200", 143771, (9, 0), True),
    "B200": KnownModel("NVIDIA B200", 183359, (10, 0), True),
}

_TERM = re.compile(
    r"^(?:(?P<count>\d+)x)?(?P<model>[A-Za-z0-9][A-Za-z0-9._ -]*?)(?::(?P<mem>\d+))?$"
)


def fake_uuid(seed: str, index: int) -> str:
    """Deterministic NVML-style UUID for fake GPU `index` of node `seed`."""
    return f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_URL, f'vgpu-fake/{seed}/{index}')}"


def _lookup(model: str, field: str) -> KnownModel:
    for key, known in KNOWN_MODELS.items():
        if key.lower() == model.lower():
            return known
    raise FakeGpuSpecError(
        f"{field}: unknown GPU model {model!r}; use one of {', '.join(KNOWN_MODELS)} "
        f"or give the memory explicitly as NAME:MEMORY_MIB"
    )


def parse_spec(spec: str, *, seed: str = "fake-node", numa_nodes: int = 1) -> GpuInventory:
    """Parse `4xA100-SXM4-80GB`, `2xT4,1xA10` or `1xMyGPU:20480` into an inventory.

    GPUs are numbered in spec order and spread evenly over `numa_nodes` NUMA nodes.
    """
    if numa_nodes < 1:
        raise FakeGpuSpecError(f"numa_nodes: must be >= 1, got {numa_nodes}")
    groups: list[list[GpuInfo]] = []
    index = 0
    for n, raw in enumerate(spec.split(",")):
        field = f"spec term {n + 1} ({raw.strip()!r})"
        match = _TERM.match(raw.strip())
        if not raw.strip() or match is None:
            raise FakeGpuSpecError(
                f"{field}: expected COUNTxMODEL[:MEMORY_MIB], e.g. 4xA100-SXM4-80GB"
            )
        count = int(match["count"] or 1)
        if count < 1:
            raise FakeGpuSpecError(f"{field}: GPU count must be >= 1")
        group = [
            _spec_gpu(match["model"], match["mem"], field, seed, index + k) for k in range(count)
        ]
        groups.append(group)
        index += count
    gpus = [gpu for group in _link_groups(groups) for gpu in group]
    total = len(gpus)
    gpus = [replace(g, numa_node=g.index * numa_nodes // total) for g in gpus]
    return GpuInventory(tuple(gpus), DEFAULT_DRIVER_VERSION, DEFAULT_CUDA_VERSION)


def _spec_gpu(model: str, mem: str | None, field: str, seed: str, index: int) -> GpuInfo:
    if mem is not None:
        if int(mem) <= 0:
            raise FakeGpuSpecError(f"{field}: memory must be a positive number of MiB")
        return GpuInfo(
            uuid=fake_uuid(seed, index),
            index=index,
            model=model,
            memory_mib=int(mem),
            pci_bus_id=_bus_id(index),
        )
    known = _lookup(model, field)
    return GpuInfo(
        uuid=fake_uuid(seed, index),
        index=index,
        model=known.name,
        memory_mib=known.memory_mib,
        pci_bus_id=_bus_id(index),
        compute_capability=known.compute_capability,
    )


def _bus_id(index: int) -> str:
    return f"00000000:{0x10 + index:02X}:00.0"


def _link_groups(groups: list[list[GpuInfo]]) -> list[list[GpuInfo]]:
    """GPUs of one spec term whose model is a known SXM part are NVLinked all-to-all."""
    linked = []
    for group in groups:
        known = next((k for k in KNOWN_MODELS.values() if k.name == group[0].model), None)
        if known is None or not known.nvlink:
            linked.append(group)
            continue
        uuids = [g.uuid for g in group]
        linked.append(
            [replace(g, nvlink_peers=tuple(u for u in uuids if u != g.uuid)) for g in group]
        )
    return linked


def load_inventory_file(path: Path, *, seed: str = "fake-node") -> GpuInventory:
    """Load a YAML inventory.

    ```yaml
    driverVersion: "550.54.15"     # optional
    cudaVersion: "12.4"            # optional
    gpus:                          # or a bare list of GPUs
      - model: A100-SXM4-80GB      # known model, or any name together with memoryMiB
        memoryMiB: 81920           # optional for known models
        uuid: GPU-...              # optional, default derived from seed and index
        numa: 0                    # optional
        nvlink: [1, 2]             # optional, peer indexes or UUIDs
    ```
    """
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise FakeGpuSpecError(f"{path}: cannot read fake GPU file: {e}") from e
    if isinstance(doc, list):
        doc = {"gpus": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        raise FakeGpuSpecError(f"{path}: gpus: expected a list of GPUs")
    gpus = [_file_gpu(entry, f"{path}: gpus[{i}]", seed, i) for i, entry in enumerate(doc["gpus"])]
    gpus = _resolve_nvlinks(gpus, doc["gpus"], str(path))
    return GpuInventory(
        tuple(gpus),
        str(doc.get("driverVersion", DEFAULT_DRIVER_VERSION)),
        str(doc.get("cudaVersion", DEFAULT_CUDA_VERSION)),
    )


def _file_gpu(entry: Any, field: str, seed: str, index: int) -> GpuInfo:
    if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
        raise FakeGpuSpecError(f"{field}.model: required, a GPU model name")
    memory = entry.get("memoryMiB")
    if memory is None:
        known = _lookup(entry["model"], f"{field}.model")
        model, memory, cc = known.name, known.memory_mib, known.compute_capability
    elif isinstance(memory, int) and not isinstance(memory, bool) and memory > 0:
        model, cc = entry["model"], None
    else:
        raise FakeGpuSpecError(f"{field}.memoryMiB: must be a positive integer, got {memory!r}")
    numa = entry.get("numa")
    if numa is not None and (not isinstance(numa, int) or numa < 0):
        raise FakeGpuSpecError(f"{field}.numa: must be a NUMA node number >= 0, got {numa!r}")
    uuid = entry.get("uuid", fake_uuid(seed, index))
    if not isinstance(uuid, str) or not uuid or len(uuid) > 56 or "::" in uuid:
        raise FakeGpuSpecError(
            f"{field}.uuid: must be a non-empty string of at most 56 chars without '::'"
        )
    return GpuInfo(
        uuid=uuid,
        index=index,
        model=model,
        memory_mib=memory,
        pci_bus_id=_bus_id(index),
        numa_node=numa,
        compute_capability=cc,
    )


def _resolve_nvlinks(gpus: list[GpuInfo], entries: list[Any], source: str) -> list[GpuInfo]:
    by_uuid = {g.uuid: g for g in gpus}
    if len(by_uuid) != len(gpus):
        raise FakeGpuSpecError(f"{source}: gpus[].uuid: UUIDs must be unique")
    resolved = []
    for i, (gpu, entry) in enumerate(zip(gpus, entries, strict=True)):
        peers = entry.get("nvlink", [])
        if not isinstance(peers, list):
            raise FakeGpuSpecError(
                f"{source}: gpus[{i}].nvlink: expected a list of indexes or UUIDs"
            )
        uuids = []
        for peer in peers:
            if isinstance(peer, int) and 0 <= peer < len(gpus) and peer != i:
                uuids.append(gpus[peer].uuid)
            elif isinstance(peer, str) and peer in by_uuid and peer != gpu.uuid:
                uuids.append(peer)
            else:
                raise FakeGpuSpecError(
                    f"{source}: gpus[{i}].nvlink: {peer!r} is not another GPU's index or UUID"
                )
        resolved.append(replace(gpu, nvlink_peers=tuple(uuids)))
    return resolved


class FakeGpuBackend:
    """In-memory `GpuBackend`; thread-safe. XIDs, usage and failures are set by the test."""

    def __init__(self, inventory: GpuInventory) -> None:
        self._inventory = inventory
        self._cond = threading.Condition()
        self._xids: list[XidEvent] = []
        self._usage: list[ProcessUsage] = []
        self._utilization: dict[str, float | None] = {}
        self._memory_used: dict[str, int | None] = {}
        self._failure: str | None = None
        self._closed = False

    @classmethod
    def from_spec(
        cls, spec: str, *, seed: str = "fake-node", numa_nodes: int = 1
    ) -> FakeGpuBackend:
        """From a spec string, or from a YAML file when `spec` names an existing .yaml/.yml file."""
        path = Path(spec)
        if path.suffix in (".yaml", ".yml"):
            return cls(load_inventory_file(path, seed=seed))
        return cls(parse_spec(spec, seed=seed, numa_nodes=numa_nodes))

    def inventory(self) -> GpuInventory:
        with self._cond:
            self._check()
            return self._inventory

    def wait_xid(self, timeout_s: float) -> list[XidEvent]:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._xids and self._failure is None and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            self._check()
            events, self._xids = self._xids, []
            return events

    def process_usage(self) -> list[ProcessUsage]:
        with self._cond:
            self._check()
            return list(self._usage)

    def gpu_stats(self) -> list[GpuStats]:
        with self._cond:
            self._check()
            return [self._stats(gpu.uuid) for gpu in self._inventory.gpus]

    def _stats(self, uuid: str) -> GpuStats:
        if uuid in self._memory_used:
            used = self._memory_used[uuid]
        else:
            used = sum(u.used_bytes or 0 for u in self._usage if u.gpu_uuid == uuid)
        return GpuStats(uuid, used, self._utilization.get(uuid, 0.0))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- test controls -------------------------------------------------------------------

    def inject_xid(self, xid: int, gpu_uuid: str | None) -> None:
        """Queue an XID event (gpu_uuid None: an event that can't be attributed to a GPU)."""
        with self._cond:
            self._xids.append(XidEvent(xid=xid, gpu_uuid=gpu_uuid))
            self._cond.notify_all()

    def set_process_usage(self, usage: Sequence[ProcessUsage]) -> None:
        """Replace every process on every GPU."""
        with self._cond:
            self._usage = list(usage)

    def set_process(self, gpu_uuid: str, pid: int, used_bytes: int | None) -> None:
        """Start process `pid` on a GPU, or change its usage there."""
        self._gpu(gpu_uuid)
        with self._cond:
            others = [u for u in self._usage if (u.gpu_uuid, u.pid) != (gpu_uuid, pid)]
            self._usage = [*others, ProcessUsage(gpu_uuid, pid, used_bytes)]

    def end_process(self, pid: int) -> None:
        """Process `pid` exits: it leaves every GPU."""
        with self._cond:
            self._usage = [u for u in self._usage if u.pid != pid]

    def set_utilization(self, gpu_uuid: str, ratio: float | None) -> None:
        """Utilisation 0..1 that `gpu_stats` reports for a GPU (None: the driver can't tell)."""
        self._gpu(gpu_uuid)
        if ratio is not None and not 0.0 <= ratio <= 1.0:
            raise FakeGpuSpecError(f"utilization: must be within 0..1, got {ratio}")
        with self._cond:
            self._utilization[gpu_uuid] = ratio

    def set_memory_used(self, gpu_uuid: str, used_bytes: int | None) -> None:
        """Override a GPU's memory in use (default: the sum of its processes' usage)."""
        self._gpu(gpu_uuid)
        with self._cond:
            self._memory_used[gpu_uuid] = used_bytes

    def _gpu(self, uuid: str) -> None:
        if uuid not in self._inventory.by_uuid():
            raise FakeGpuSpecError(f"gpu_uuid: {uuid!r} is not one of this fake node's GPUs")

    def set_failure(self, message: str | None) -> None:
        """Make every call raise `GpuBackendError(message)` until cleared with None."""
        with self._cond:
            self._failure = message
            self._cond.notify_all()

    def _check(self) -> None:
        if self._closed:
            raise GpuBackendError("fake GPU backend is closed")
        if self._failure is not None:
            raise GpuBackendError(self._failure)
