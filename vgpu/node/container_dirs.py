"""The per-container directories of the vgpu-core (and hardened hami) modes: their rules, no I/O.

Each Allocate answer that enforces gets a fresh `<state dir>/containers/<id>/` with `limits/`
(mounted read-only at `/run/vgpu/`, the agent writes `limits` there) and `shared/` (mounted
read-write at `/run/vgpu-shared/`, the library's accounting and `activity`). `<id>` is 32 random
hex digits, so it cannot collide and can be found again in the kubelet's checkpoint.

Nobody tells a device plugin that a container is gone (the kubelet has no Deallocate), so the
agent collects: a directory is removed when the kubelet's checkpoint, which keeps every live
container's Allocate answer (`AllocResp`, pkg/kubelet/cm/devicemanager/checkpoint), no longer
names its id (`referenced_ids`) and it is older than a grace (an answer just given reaches the
checkpoint only after the kubelet has all of the container's answers). Without a readable
checkpoint nothing is removed. The number of directories is bounded: at the bound a new Allocate
is refused (fail closed) rather than filling the node's disk.

The modes see the directories through `ContainerDirMaker`; the one that makes them on disk is
`vgpu.adapters.container_dirs.ContainerDirs`, so this package stays free of file I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from vgpu.node.limits_file import DeviceLimit

CONTAINERS = "containers"
ID = re.compile(r"[0-9a-f]{32}")
_REFERENCE = re.compile(rb"/" + CONTAINERS.encode() + rb"/([0-9a-f]{32})/")
DEFAULT_MAX_DIRS = 2048
DEFAULT_GRACE_S = 600.0


class DirectoryLimit(Exception):
    """No new container directory: the bound is reached or the disk refused; message says why."""


class ContainerDirMaker(Protocol):
    """What a mode (and the DRA driver) needs of the per-container directories."""

    @property
    def root(self) -> Path: ...

    def limits_dir(self, cid: str) -> Path: ...

    def shared_dir(self, cid: str) -> Path: ...

    def create(self, devices: Sequence[DeviceLimit] | None) -> str:
        """A new directory (with its limits file, unless `devices` is None); its id. Raises
        `DirectoryLimit`."""
        ...

    def ids(self) -> Iterator[str]:
        """Ids of the directories present."""
        ...

    def collect(self, referenced: frozenset[str]) -> list[str]:
        """Remove the directories `referenced` does not name and older than the grace."""
        ...


def referenced_ids(checkpoint_text: str) -> frozenset[str] | None:
    """Container-directory ids named by the Allocate answers in the kubelet's checkpoint.

    `AllocResp` is the answer's protobuf bytes, base64 in the JSON; a mount's host path is a
    plain string inside them, so the ids are found without decoding the message. None when the
    text is not a checkpoint (then nothing may be collected).
    """
    try:
        doc = json.loads(checkpoint_text)
        entries = doc["Data"]["PodDeviceEntries"] or []
        blobs = [base64.b64decode(e.get("AllocResp") or "", validate=True) for e in entries]
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error, RecursionError):
        return None
    return frozenset(m.decode() for blob in blobs for m in _REFERENCE.findall(blob))
