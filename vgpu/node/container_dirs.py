"""The per-container directories of the vgpu-core (and hardened hami) modes, under the state dir.

Each Allocate answer that enforces gets a fresh `<state dir>/containers/<id>/` with `limits/`
(mounted read-only at `/run/vgpu/`, the agent writes `limits` there) and `shared/` (mounted
read-write at `/run/vgpu-shared/`, the library's accounting and `activity`). `<id>` is 32 random
hex digits, so it cannot collide and can be found again in the kubelet's checkpoint.

Nobody tells a device plugin that a container is gone (the kubelet has no Deallocate), so the
agent collects: a directory is removed when the kubelet's checkpoint, which keeps every live
container's Allocate answer (`AllocResp`, pkg/kubelet/cm/devicemanager/checkpoint), no longer
names its id and it is older than `grace_s` (an answer just given reaches the checkpoint only
after the kubelet has all of the container's answers). Without a readable checkpoint nothing is
removed. The number of directories is bounded: at `max_dirs` a new Allocate is refused (fail
closed) rather than filling the node's disk. The agent mounts the state dir at the same path as
on the host, so the paths here are the host paths the runtime mounts.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from vgpu.node.limits_file import DeviceLimit, LimitsError, write_limits

log = logging.getLogger(__name__)
CONTAINERS = "containers"
_ID = re.compile(r"[0-9a-f]{32}")
_REFERENCE = re.compile(rb"/" + CONTAINERS.encode() + rb"/([0-9a-f]{32})/")
DEFAULT_MAX_DIRS = 2048
DEFAULT_GRACE_S = 600.0


class DirectoryLimit(Exception):
    """No new container directory: the bound is reached or the disk refused; message says why."""


class ContainerDirs:
    """Creates, lists and collects the per-container directories; the agent is their one owner."""

    def __init__(
        self,
        state_dir: Path,
        *,
        max_dirs: int = DEFAULT_MAX_DIRS,
        grace_s: float = DEFAULT_GRACE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = state_dir / CONTAINERS
        self._max = max_dirs
        self._grace_s = grace_s
        self._clock = clock

    def limits_dir(self, cid: str) -> Path:
        return self.root / cid / "limits"

    def shared_dir(self, cid: str) -> Path:
        return self.root / cid / "shared"

    def create(self, devices: Sequence[DeviceLimit] | None) -> str:
        """A new directory (with its limits file, unless `devices` is None); its id."""
        count = sum(1 for _ in self.ids())
        if count >= self._max:
            raise DirectoryLimit(
                f"{count} container directories under {self.root} (the bound is {self._max}); "
                "the kubelet's checkpoint still names them or they are younger than the grace"
            )
        cid = secrets.token_hex(16)
        try:
            self.limits_dir(cid).mkdir(parents=True, mode=0o755)
            shared = self.shared_dir(cid)
            shared.mkdir(mode=0o777)
            shared.chmod(0o777)  # the container's processes may run as any user; umask aside
            if devices is not None:
                write_limits(self.limits_dir(cid), devices)
        except (OSError, LimitsError) as e:
            shutil.rmtree(self.root / cid, ignore_errors=True)
            raise DirectoryLimit(f"cannot prepare {self.root / cid}: {e}") from None
        return cid

    def ids(self) -> Iterator[str]:
        """Ids of the directories present (anything else under the root is left alone)."""
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return
        for entry in entries:
            if _ID.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                yield entry.name

    def collect(self, referenced: frozenset[str]) -> list[str]:
        """Remove the directories `referenced` does not name and older than the grace."""
        removed = []
        now = self._clock()
        for cid in self.ids():
            if cid in referenced:
                continue
            try:
                age = now - (self.root / cid).stat().st_mtime
            except FileNotFoundError:
                continue
            if age > self._grace_s:
                shutil.rmtree(self.root / cid, ignore_errors=True)
                removed.append(cid)
        if removed:
            log.info("removed %d container directories the kubelet no longer holds", len(removed))
        return removed


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
