"""The per-container directories on disk, and the `limits` files the agent writes in them.

The rules (layout, ids, when a directory may go) are `vgpu.node.container_dirs`'s and the file
formats `vgpu.node.limits_file`'s; this module does the file work: create, list and remove the
directories, and write or read `limits`. `write_limits` replaces the file atomically (temporary
file in the same directory, then `rename`): the container has the directory mounted, so its
processes see either the old content or the new, never half of one. The agent mounts the state
dir at the same path as on the host, so the paths here are the host paths the runtime mounts.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from vgpu.dra.claim_dirs import DRA_SUBDIR
from vgpu.node.container_dirs import (
    CONTAINERS,
    DEFAULT_GRACE_S,
    DEFAULT_MAX_DIRS,
    ID,
    DirectoryLimit,
)
from vgpu.node.limits_file import (
    LIMITS_NAME,
    MAX_LIMITS_BYTES,
    DeviceLimit,
    LimitsError,
    parse_limits,
    render_limits,
)

log = logging.getLogger(__name__)


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
            if ID.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
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


def claim_dirs(state_dir: Path) -> ContainerDirs:
    """The DRA driver's directories: `<state dir>/dra/containers/`, collected without a grace
    (the kubelet tells a DRA driver when a claim is done; `vgpu.dra.claim_dirs`)."""
    return ContainerDirs(state_dir / DRA_SUBDIR, grace_s=0.0)


def write_limits(directory: Path, devices: Sequence[DeviceLimit]) -> None:
    """Replace `directory/limits` atomically (the agent is its one writer)."""
    text = render_limits(devices)
    tmp = directory / f".{LIMITS_NAME}.tmp"
    with tmp.open("w", encoding="ascii") as f:
        f.write(text)  # no fsync: visibility is what matters; a host crash ends the container
    tmp.chmod(0o444)
    os.replace(tmp, directory / LIMITS_NAME)


def read_limits(directory: Path) -> tuple[DeviceLimit, ...]:
    """The devices of `directory/limits`; raises LimitsError (also for an unreadable file)."""
    try:
        text = (directory / LIMITS_NAME).read_bytes()[: MAX_LIMITS_BYTES + 1]
    except OSError as e:
        raise LimitsError(f"limits in {directory}: {e.strerror or e}") from None
    return parse_limits(text.decode("ascii", "replace"))
