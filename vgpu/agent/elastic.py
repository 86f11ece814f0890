"""The node agent's elastic duty (mode vgpu-core): allowances every refill period, and cleanup.

Every `period_s` (about the interposer's refill period, 100 ms) it reads each container
directory's `activity` (written by the interposer: the latest launch per GPU), computes every
GPU's allowances (`vgpu.core.elastic`) and rewrites the `limits` files whose allowance changed,
atomically. The agent is the one writer, so it keeps each container's limits in memory after the
first read (a restarted agent reads them back from disk) and a step costs one small read per
container plus a write only on change. Every `collect_s` it cuts each container's shared files
back to their bound (`vgpu.node.shared_bound`: a tenant can write them) and removes the
directories of containers the kubelet no longer holds (`ContainerDirs.collect`, from the
kubelet's checkpoint).
In mode hami (per-container caches, no limits files) it only collects.

Cores under contention: every `correct_s` it also reads each process's real share of its GPU
(`Utilisation`: NVML per-process utilisation, a process mapped to its container) and corrects
each container's `scale` (`vgpu.core.contention`), so that a busy container's real share, not
what its events measure (they include the neighbours' time slices), is its allowance. Without a
utilisation source every scale stays neutral; when the source fails, every scale goes back to
neutral (a stale correction could let a container past its allowance once its neighbours
leave); a container whose library predates `scale` (its `activity` says so) never gets one.

A step never raises: an unreadable file skips that container (its limits stay as they were,
which is never less than its guarantee), any other error is logged and the next period tries
again; the same message is logged at most once a minute.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from vgpu.adapters.container_dirs import read_limits, write_limits
from vgpu.adapters.kubelet.checkpoint import checkpoint_text
from vgpu.core.contention import SCALE_NEUTRAL, Observed, next_scale
from vgpu.core.elastic import ElasticShare, allowances, is_active
from vgpu.core.errors import VgpuError
from vgpu.node.container_dirs import ContainerDirMaker, referenced_ids
from vgpu.node.limits_file import (
    ACTIVITY_BYTES,
    ACTIVITY_NAME,
    MAX_DEVICES,
    DeviceLimit,
    LimitsError,
    parse_activity,
    reads_scale,
)
from vgpu.node.shared_bound import VGPU_CORE_FILES

log = logging.getLogger(__name__)
DEFAULT_PERIOD_S = 0.1
DEFAULT_WINDOW_S = 0.5  # a container that launched within this wants its GPU
DEFAULT_COLLECT_S = 30.0
DEFAULT_CORRECT_S = 0.5  # NVML samples each process a few times a second
QUIET_S = 60.0
NO_ACTIVITY = (0,) * MAX_DEVICES


class Utilisation(Protocol):
    """Where the real shares come from (`vgpu.adapters.gpu_utilisation.NvmlUtilisation`)."""

    def shares(self) -> dict[str, dict[int, float]]:
        """GPU UUID -> host PID -> percent of the GPU since the last call; raises VgpuError."""
        ...

    def container_of(self, pid: int) -> str | None:
        """The container directory id of a host process, or None."""
        ...


@dataclass(frozen=True, slots=True)
class _Slot:
    """One container's device line as this step sees it."""

    cid: str
    slot: int
    device: DeviceLimit
    active: bool
    reads_scale: bool  # its library reads `scale` (an older one refuses a file with it)


class ElasticDuty:
    """Recomputes allowances from activity, corrects scales from real shares; collects
    directories of containers gone."""

    def __init__(
        self,
        dirs: ContainerDirMaker,
        checkpoint: Path,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        collect_s: float = DEFAULT_COLLECT_S,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        allowances: bool = True,
        utilisation: Utilisation | None = None,
        correct_s: float = DEFAULT_CORRECT_S,
        shared_files: Mapping[str, int] = VGPU_CORE_FILES,
    ) -> None:
        self._dirs = dirs
        self._shared_files = shared_files
        self._utilisation = utilisation
        self._correct_ns = int(correct_s * 1e9)
        self._next_correct = 0
        self._with_allowances = allowances
        self._checkpoint = checkpoint
        self._window_ns = int(window_s * 1e9)
        self._collect_s = collect_s
        self._clock_ns = clock_ns
        self._limits: dict[str, tuple[DeviceLimit, ...]] = {}
        self._next_collect = 0.0
        self._said: dict[str, float] = {}
        self.writes = 0

    def step(self) -> None:
        """One period; never raises."""
        if self._with_allowances:
            self._guarded(self._allowances)
        if time.monotonic() >= self._next_collect:  # whatever the allowances did: the cut
            self._next_collect = time.monotonic() + self._collect_s  # frees a filled tmpfs
            self._guarded(self._collect)

    def _guarded(self, part: Callable[[], None]) -> None:
        try:
            part()
        except Exception as e:  # the duty must never take the agent down
            self._say(f"elastic step failed: {type(e).__name__}: {e}")

    def _allowances(self) -> None:
        now = self._clock_ns()
        by_gpu: dict[str, list[_Slot]] = defaultdict(list)
        known = {}
        for cid in list(self._dirs.ids()):
            devices = self._devices(cid)
            if devices is None:
                continue
            known[cid] = devices
            last, scaled = self._activity(cid)
            for slot, d in enumerate(devices):
                active = is_active(last[slot], now, self._window_ns)
                by_gpu[d.uuid].append(_Slot(cid, slot, d, active, scaled))
        new: dict[str, int] = {}
        for slots in by_gpu.values():
            shares = [
                ElasticShare(_key(s.cid, s.slot), s.device.cores, s.device.limit, s.active)
                for s in slots
            ]
            new.update(allowances(shares))
        scales = self._scales(by_gpu, now)
        for cid, devices in known.items():
            wanted = tuple(
                replace(
                    d, allowance=new[_key(cid, slot)], scale=scales.get(_key(cid, slot), d.scale)
                )
                for slot, d in enumerate(devices)
            )
            if wanted != devices and self._write(cid, wanted):
                self._limits[cid] = wanted
                self.writes += 1
        for cid in set(self._limits) - set(known):
            del self._limits[cid]

    def _scales(self, by_gpu: dict[str, list[_Slot]], now: int) -> dict[str, int]:
        """Each slot's corrected scale, once every `correct_s` ({} between: keep them)."""
        if self._utilisation is None or now < self._next_correct:
            return {}
        self._next_correct = now + self._correct_ns
        try:
            shares = self._utilisation.shares()
        except VgpuError as e:
            self._say(f"per-process utilisation unavailable ({e}); every scale is neutral")
            return {_key(s.cid, s.slot): SCALE_NEUTRAL for slots in by_gpu.values() for s in slots}
        owners: dict[int, str | None] = {}
        scales: dict[str, int] = {}
        for uuid, slots in by_gpu.items():
            used = shares.get(uuid, {})
            for pid in used:
                if pid not in owners:
                    owners[pid] = self._utilisation.container_of(pid)
            attributed = all(owners[pid] in {s.cid for s in slots} for pid in used)
            for s in slots:
                mine = sum(share for pid, share in used.items() if owners[pid] == s.cid)
                seen = Observed(s.device.allowance, min(100.0, mine), s.active, attributed)
                corrected = next_scale(s.device.scale, seen) if s.reads_scale else SCALE_NEUTRAL
                scales[_key(s.cid, s.slot)] = corrected
        return scales

    def _write(self, cid: str, devices: tuple[DeviceLimit, ...]) -> bool:
        """Write one container's limits; whether they were written.

        The directory's filesystem may be full of the container's own writes (`state` and
        `activity` are its to grow, and under `--container-dir-tmpfs` they share a tmpfs with
        `limits`): its shared files are then cut back at once and the write tried again, rather
        than at the next collect, so that a container cannot keep a raised allowance by filling
        its directory. A write that still fails is logged and tried again next period; it
        never stops the other containers' writes."""
        directory = self._dirs.limits_dir(cid)
        try:
            write_limits(directory, devices)
            return True
        except OSError:
            for line in self._dirs.trim_shared(self._shared_files, only={cid}):
                log.warning("shared files over their bound: %s", line)
        try:
            write_limits(directory, devices)
            return True
        except OSError as e:
            self._say(
                f"cannot write the limits of container directory {cid}: {e.strerror or e}; "
                "its allowance stays as it was until a write succeeds"
            )
            return False

    def _devices(self, cid: str) -> tuple[DeviceLimit, ...] | None:
        if cid not in self._limits:
            try:
                self._limits[cid] = read_limits(self._dirs.limits_dir(cid))
            except LimitsError as e:
                self._say(f"container directory {cid}: {e}; its allowance is left as it is")
                return None
        return self._limits[cid]

    def _activity(self, cid: str) -> tuple[tuple[int, ...], bool]:
        """Last launch per slot, and whether the container's library reads `scale`; a missing
        or short file is no activity (never launched).

        The directory is the container's to write: a symlink, a FIFO or a device there must
        neither lead the agent elsewhere nor block it, so only a regular file is read."""
        path = self._dirs.shared_dir(cid) / ACTIVITY_NAME
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return NO_ACTIVITY, False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return NO_ACTIVITY, False
            data = os.read(fd, ACTIVITY_BYTES)
            return parse_activity(data), reads_scale(data)
        except (OSError, LimitsError):
            return NO_ACTIVITY, False
        finally:
            os.close(fd)

    def _collect(self) -> None:
        for line in self._dirs.trim_shared(self._shared_files):
            log.warning("shared files over their bound: %s", line)
        text = checkpoint_text(self._checkpoint)
        if text is None:
            return  # no checkpoint (or none within its bound): nothing can be judged gone
        referenced = referenced_ids(text)
        if referenced is None:
            self._say(f"{self._checkpoint}: not a kubelet checkpoint; nothing is collected")
            return
        self._dirs.collect(referenced)

    def _say(self, message: str) -> None:
        now = time.monotonic()
        if now - self._said.get(message, -QUIET_S) >= QUIET_S:
            self._said[message] = now
            log.warning("%s", message)


def _key(cid: str, slot: int) -> str:
    """A device line's key among its GPU's shares."""
    return f"{cid}/{slot}"


def run_elastic(
    duty: ElasticDuty, stop: threading.Event, period_s: float = DEFAULT_PERIOD_S
) -> None:
    """Step every `period_s` until `stop` is set."""
    while not stop.wait(period_s):
        duty.step()
