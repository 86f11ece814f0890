"""Reading the kubelet's device checkpoint for devices it still counts for pods that are gone.

The kubelet keeps every container's device IDs in `kubelet_internal_checkpoint` in the
device-plugin directory (pkg/kubelet/cm/devicemanager/manager.go `kubeletDeviceManagerCheckpoint`,
`writeCheckpoint`; entry format in pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go
`PodDevicesEntry`: PodUID, ContainerName, ResourceName, DeviceIDs keyed by NUMA node — a plain
list in older kubelets — and AllocResp, inside `Data` beside a `Checksum`). It writes the file at
an Allocate (after each container's, `allocateContainerResources`) or a ListAndWatch update, and
on a restart reloads it as the devices taken (`readCheckpoint`), freeing
those of vanished pods only once its pod sources are ready (`UpdateAllocatedDevices`). So the
entries of pods no longer bound to the node are devices the kubelet may still refuse to offer:
the node agent publishes them per GPU in the inventory annotation (`kubeletStale`) and the
extender does not place onto them (docs/handshake.md, "Devices the kubelet still counts after
its restart"). The file is read by `vgpu.adapters.kubelet.checkpoint`.

It is also the only record of a regular init container's devices: pod-resources `List` leaves
them out (pkg/kubelet/apis/podresources/server_v1.go), so `checkpointed_holdings` hands the
entries, per container, to the hand-off ledger's reconciliation (`vgpu.node.handoff.reconcile`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.decode import guard, load_json
from vgpu.api.resources import ResourceNames
from vgpu.core.errors import VgpuError
from vgpu.core.ids import PodKey
from vgpu.node.devices import DeviceIdError, UnitKind, parse_unit_id
from vgpu.node.handoff.admissions import HeldDevices

CHECKPOINT_FILE = "kubelet_internal_checkpoint"
MAX_CHECKPOINT_BYTES = 64 << 20
"""A larger file is not read (a node's checkpoint is kilobytes to a few megabytes)."""


class CheckpointError(VgpuError, ValueError):
    """The checkpoint file cannot be read; the message names the field."""


@dataclass(frozen=True, slots=True)
class CheckpointEntry:
    pod_uid: str
    resource: str
    device_ids: tuple[str, ...]
    container: str = ""  # ContainerName ("" where a file leaves it out)


@dataclass(frozen=True, slots=True)
class StaleDevices:
    """Devices of one GPU the kubelet's checkpoint holds for pods no longer bound here."""

    cores: int
    memory_mib: int
    pods: tuple[str, ...]  # their UIDs, sorted


def parse_checkpoint(text: str) -> tuple[CheckpointEntry, ...]:
    """The checkpoint's entries; raises CheckpointError naming what is wrong, and nothing else
    whatever the text (`vgpu.api.decode`)."""
    doc = load_json(text, CHECKPOINT_FILE, MAX_CHECKPOINT_BYTES, CheckpointError)
    with guard(CHECKPOINT_FILE, CheckpointError):
        return _entries(doc)


def _entries(doc: object) -> tuple[CheckpointEntry, ...]:
    if not isinstance(doc, dict):
        raise CheckpointError(f"{CHECKPOINT_FILE}: expected a JSON object")
    data = doc.get("Data")
    if not isinstance(data, dict):
        raise CheckpointError(f"{CHECKPOINT_FILE}.Data: expected an object")
    raw = data.get("PodDeviceEntries") or []
    if not isinstance(raw, list):
        raise CheckpointError(f"{CHECKPOINT_FILE}.Data.PodDeviceEntries: expected a list")
    return tuple(
        _entry(e, f"{CHECKPOINT_FILE}.Data.PodDeviceEntries[{i}]") for i, e in enumerate(raw)
    )


def _entry(raw: Any, where: str) -> CheckpointEntry:
    if not isinstance(raw, dict):
        raise CheckpointError(f"{where}: expected an object")
    uid, resource = raw.get("PodUID"), raw.get("ResourceName")
    if not isinstance(uid, str) or not isinstance(resource, str):
        raise CheckpointError(f"{where}: PodUID and ResourceName must be strings")
    container = raw.get("ContainerName", "")
    if not isinstance(container, str):
        raise CheckpointError(f"{where}.ContainerName: expected a string")
    ids = raw.get("DeviceIDs") or []
    groups = ids.values() if isinstance(ids, dict) else [ids]  # per NUMA node, or one list
    flat: list[str] = []
    for group in groups:
        if not isinstance(group, list) or not all(isinstance(d, str) for d in group):
            raise CheckpointError(f"{where}.DeviceIDs: expected lists of device IDs")
        flat.extend(group)
    return CheckpointEntry(uid, resource, tuple(flat), container)


@dataclass(frozen=True, slots=True)
class CheckpointRead:
    """One read of the checkpoint: `entries` None when it could not be read (no file, or the
    `problem` named), so nothing can be judged stale from it."""

    entries: tuple[CheckpointEntry, ...] | None
    problem: str | None = None


def stale_devices(
    entries: Iterable[CheckpointEntry],
    live_uids: set[str],
    names: ResourceNames,
    memory_unit_mib: int,
) -> dict[str, StaleDevices]:
    """Per GPU UUID, our devices checkpointed for pods whose UID is not in `live_uids`.

    Each device is counted once, however many entries name it: the checkpoint has one entry per
    container, and a container that drew devices from its pod's reuse pool (a regular init
    container's, pkg/kubelet/cm/devicemanager/manager.go `devicesToReuse`,
    `allocateContainerResources`; `vgpu.core.kubelet_reuse`) lists the very IDs that init
    container lists. The kubelet holds such a device once; counted twice, the node would show
    more held than the kubelet holds."""
    cores: dict[str, int] = {}
    units: dict[str, int] = {}
    pods: dict[str, set[str]] = {}
    seen: set[tuple[str, str]] = set()
    for entry in entries:
        if entry.pod_uid in live_uids or entry.resource not in (names.cores, names.memory):
            continue
        counts = cores if entry.resource == names.cores else units
        for device_id in entry.device_ids:
            try:
                gpu = parse_unit_id(device_id).gpu_uuid
            except DeviceIdError:
                continue  # not one of ours: nothing the extender counts
            pods.setdefault(gpu, set()).add(entry.pod_uid)
            if (entry.resource, device_id) not in seen:
                seen.add((entry.resource, device_id))
                counts[gpu] = counts.get(gpu, 0) + 1
    return {
        gpu: StaleDevices(cores.get(gpu, 0), units.get(gpu, 0) * memory_unit_mib, tuple(sorted(p)))
        for gpu, p in sorted(pods.items())
    }


def checkpointed_holdings(
    entries: Iterable[CheckpointEntry], pods: Mapping[str, PodKey], names: ResourceNames
) -> list[HeldDevices]:
    """The entries of the pods in `pods` (pod UID -> key: the kubelet names pods by UID) as one
    holding per container and kind of our resources, each ID once, for the hand-off ledger.

    Entries of other pods, other resources or with no container name are left out: they say
    nothing about a container the ledger expects."""
    ids: dict[tuple[PodKey, str, UnitKind], dict[str, None]] = {}
    for entry in entries:
        key = pods.get(entry.pod_uid)
        if key is None or not entry.container:
            continue
        try:
            kind = names.kind_of(entry.resource)
        except ValueError:
            continue
        ids.setdefault((key, entry.container, kind), {}).update(dict.fromkeys(entry.device_ids))
    return [HeldDevices(k, c, kind, tuple(i)) for (k, c, kind), i in ids.items() if i]
