"""The node agent's elastic duty (mode vgpu-core): allowances every refill period, and cleanup.

Every `period_s` (about the interposer's refill period, 100 ms) it reads each container
directory's `activity` (written by the interposer: the latest launch per GPU), computes every
GPU's allowances (`vgpu.core.elastic`) and rewrites the `limits` files whose allowance changed,
atomically. The agent is the one writer, so it keeps each container's limits in memory after the
first read (a restarted agent reads them back from disk) and a step costs one small read per
container plus a write only on change. Every `collect_s` it removes the directories of
containers the kubelet no longer holds (`ContainerDirs.collect`, from the kubelet's checkpoint).
In mode hami (per-container caches, no limits files) it only collects.

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
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from vgpu.adapters.container_dirs import read_limits, write_limits
from vgpu.core.elastic import ElasticShare, allowances, is_active
from vgpu.node.container_dirs import ContainerDirMaker, referenced_ids
from vgpu.node.limits_file import (
    ACTIVITY_BYTES,
    ACTIVITY_NAME,
    MAX_DEVICES,
    DeviceLimit,
    LimitsError,
    parse_activity,
)

log = logging.getLogger(__name__)
DEFAULT_PERIOD_S = 0.1
DEFAULT_WINDOW_S = 0.5  # a container that launched within this wants its GPU
DEFAULT_COLLECT_S = 30.0
QUIET_S = 60.0
NO_ACTIVITY = (0,) * MAX_DEVICES


class ElasticDuty:
    """Recomputes allowances from activity; collects directories of containers gone."""

    def __init__(
        self,
        dirs: ContainerDirMaker,
        checkpoint: Path,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        collect_s: float = DEFAULT_COLLECT_S,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        allowances: bool = True,
    ) -> None:
        self._dirs = dirs
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
        try:
            if self._with_allowances:
                self._allowances()
            if time.monotonic() >= self._next_collect:
                self._next_collect = time.monotonic() + self._collect_s
                self._collect()
        except Exception as e:  # the duty must never take the agent down
            self._say(f"elastic step failed: {type(e).__name__}: {e}")

    def _allowances(self) -> None:
        now = self._clock_ns()
        by_gpu: dict[str, list[ElasticShare]] = defaultdict(list)
        known = {}
        for cid in list(self._dirs.ids()):
            devices = self._devices(cid)
            if devices is None:
                continue
            known[cid] = devices
            last = self._activity(cid)
            for slot, d in enumerate(devices):
                active = is_active(last[slot], now, self._window_ns)
                by_gpu[d.uuid].append(ElasticShare(f"{cid}/{slot}", d.cores, d.limit, active))
        new: dict[str, int] = {}
        for shares in by_gpu.values():
            new.update(allowances(shares))
        for cid, devices in known.items():
            wanted = tuple(
                replace(d, allowance=new[f"{cid}/{slot}"]) for slot, d in enumerate(devices)
            )
            if wanted != devices:
                write_limits(self._dirs.limits_dir(cid), wanted)
                self._limits[cid] = wanted
                self.writes += 1
        for cid in set(self._limits) - set(known):
            del self._limits[cid]

    def _devices(self, cid: str) -> tuple[DeviceLimit, ...] | None:
        if cid not in self._limits:
            try:
                self._limits[cid] = read_limits(self._dirs.limits_dir(cid))
            except LimitsError as e:
                self._say(f"container directory {cid}: {e}; its allowance is left as it is")
                return None
        return self._limits[cid]

    def _activity(self, cid: str) -> tuple[int, ...]:
        """Last launch per slot; a missing or short file is no activity (never launched).

        The directory is the container's to write: a symlink, a FIFO or a device there must
        neither lead the agent elsewhere nor block it, so only a regular file is read."""
        path = self._dirs.shared_dir(cid) / ACTIVITY_NAME
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return NO_ACTIVITY
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return NO_ACTIVITY
            return parse_activity(os.read(fd, ACTIVITY_BYTES))
        except (OSError, LimitsError):
            return NO_ACTIVITY
        finally:
            os.close(fd)

    def _collect(self) -> None:
        try:
            text = self._checkpoint.read_text()
        except OSError:
            return  # no checkpoint: nothing can be judged gone
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


def run_elastic(
    duty: ElasticDuty, stop: threading.Event, period_s: float = DEFAULT_PERIOD_S
) -> None:
    """Step every `period_s` until `stop` is set."""
    while not stop.wait(period_s):
        duty.step()
