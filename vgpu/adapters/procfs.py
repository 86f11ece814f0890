"""Ports to host processes: read a process's cgroup file, and stop a process.

The watchdog's logic is pure (`vgpu.node.watchdog`); these are the only places that touch
`/proc` or send signals, so tests inject fakes (fake cgroup text, a recording killer) and never
signal a real process.

NVML reports host PIDs. Reading their cgroups needs the host's PID namespace (`hostPID: true`
in the DaemonSet) or the host's procfs mounted somewhere (`proc_root`); signalling them needs
`hostPID: true` (plus `CAP_KILL` for processes of other users), since `os.kill` works in the
agent's own PID namespace.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Protocol

DEFAULT_PROC_ROOT = Path("/proc")


class CgroupReader(Protocol):
    def read(self, pid: int) -> str | None:
        """The text of the process's cgroup file, or None when the process is gone."""
        ...


class ProcessKiller(Protocol):
    def kill(self, pid: int) -> None:
        """Stop a process; raises OSError (ProcessLookupError, PermissionError) on failure."""
        ...


class ProcCgroupReader:
    """Reads `<proc_root>/<pid>/cgroup`."""

    def __init__(self, proc_root: Path = DEFAULT_PROC_ROOT) -> None:
        self.proc_root = proc_root

    def read(self, pid: int) -> str | None:
        try:
            return (self.proc_root / str(pid) / "cgroup").read_text()
        except OSError:
            return None  # exited, or unreadable in a race with its exit


class SignalKiller:
    """Sends SIGKILL, as the kernel's OOM killer does to a process over its memory limit."""

    def __init__(self, sig: signal.Signals = signal.SIGKILL) -> None:
        self.sig = sig

    def kill(self, pid: int) -> None:
        if pid <= 1 or pid == os.getpid():
            raise PermissionError(f"refusing to signal PID {pid}")
        os.kill(pid, self.sig)
