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
checkpoint nothing is removed. A directory the checkpoint named and no longer names is removed
at once (the kubelet dropped the container); the grace only covers answers not yet recorded.

The number of directories is bounded per node, per namespace and per pod (`DirBounds`): at a
bound a new Allocate is refused (fail closed) rather than filling the node's disk, and one
tenant can no longer take every directory of a node (seven pods with many init
containers did). Each directory records whose container it serves (`DirOwner`, as the hand-off
attributed the call). A pod's regular init containers run one at a time, so those with the same
limits share one directory when the attribution was sure (a container of another pod that the
call may have been for never shares one).

The modes see the directories through `ContainerDirMaker`; the one that makes them on disk is
`vgpu.adapters.container_dirs.ContainerDirs`, so this package stays free of file I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from vgpu.node.limits_file import DeviceLimit

CONTAINERS = "containers"
ID = re.compile(r"[0-9a-f]{32}")
_REFERENCE = re.compile(rb"/" + CONTAINERS.encode() + rb"/([0-9a-f]{32})/")
DEFAULT_MAX_DIRS = 2048
DEFAULT_MAX_DIRS_PER_NAMESPACE = 256
DEFAULT_MAX_DIRS_PER_POD = 16
DEFAULT_GRACE_S = 600.0
OWNER_NAME = "owner"
# the container: a DNS label, or a DRA claim's request (`vgpu.dra.prepare.request_label`: `a.b`)
_OWNER = re.compile(r"([a-z0-9][-a-z0-9.]*) ([-0-9a-zA-Z]+) ([a-z0-9][-a-z0-9.]*) ([01])\n")


class DirectoryLimit(Exception):
    """No new container directory: the bound is reached or the disk refused; message says why."""


@dataclass(frozen=True, slots=True)
class DirOwner:
    """The container a directory serves: its pod's namespace and UID and its name.

    `shared_init`: a regular init container whose attribution was sure; such containers of one
    pod with equal limits share a directory (they never run at the same time)."""

    namespace: str
    pod_uid: str
    container: str
    shared_init: bool = False

    def render(self) -> str:
        """The directory's `owner` file."""
        return f"{self.namespace} {self.pod_uid} {self.container} {int(self.shared_init)}\n"

    @staticmethod
    def parse(text: str) -> DirOwner | None:
        """An `owner` file's owner; None for anything else (then only the node bound counts)."""
        m = _OWNER.fullmatch(text)
        return None if m is None else DirOwner(m[1], m[2], m[3], m[4] == "1")


@dataclass(frozen=True, slots=True)
class DirBounds:
    """At most this many directories per node, per namespace and per pod."""

    node: int = DEFAULT_MAX_DIRS
    namespace: int = DEFAULT_MAX_DIRS_PER_NAMESPACE
    pod: int = DEFAULT_MAX_DIRS_PER_POD


def over_bound(
    owners: Iterable[DirOwner | None], new: DirOwner | None, bounds: DirBounds
) -> str | None:
    """Why one more directory for `new` would pass a bound, given the present ones' owners."""
    present = list(owners)
    if len(present) >= bounds.node:
        return f"{len(present)} container directories on this node (the bound is {bounds.node})"
    if new is None:
        return None
    in_ns = [o for o in present if o is not None and o.namespace == new.namespace]
    if len(in_ns) >= bounds.namespace:
        return (
            f"{len(in_ns)} container directories for namespace {new.namespace} (the bound is "
            f"{bounds.namespace} per namespace)"
        )
    in_pod = sum(1 for o in in_ns if o.pod_uid == new.pod_uid)
    if in_pod >= bounds.pod:
        return (
            f"{in_pod} container directories for pod UID {new.pod_uid} in {new.namespace} (the "
            f"bound is {bounds.pod} per pod; a pod's init containers with equal limits share one)"
        )
    return None


class ContainerDirMaker(Protocol):
    """What a mode (and the DRA driver) needs of the per-container directories."""

    @property
    def root(self) -> Path: ...

    def limits_dir(self, cid: str) -> Path: ...

    def shared_dir(self, cid: str) -> Path: ...

    def create(self, devices: Sequence[DeviceLimit] | None, owner: DirOwner | None = None) -> str:
        """A directory for `owner`'s container (with its limits file, unless `devices` is None):
        a new one, or its pod's shared init directory; its id. Raises `DirectoryLimit`."""
        ...

    def ids(self) -> Iterator[str]:
        """Ids of the directories present."""
        ...

    def collect(self, referenced: frozenset[str]) -> list[str]:
        """Remove the directories `referenced` does not name and older than the grace."""
        ...

    def trim_shared(
        self, files: Mapping[str, int], only: Collection[str] | None = None
    ) -> list[str]:
        """Cut every shared directory (or those of the ids in `only`) back to its libraries'
        `files` and the bounds (`vgpu.node.shared_bound`); a line per directory cut."""
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
