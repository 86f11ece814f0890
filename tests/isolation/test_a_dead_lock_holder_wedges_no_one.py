"""The shared state's lock is an open file description lock on the file's first bytes, so the
kernel releases it when its holder goes, however it goes, and names no owner by pid or thread id
(which repeat across the PID namespaces of containers sharing a claim). A holder here is the
test itself; closing its descriptor is what a SIGKILL does to a process's descriptors."""

from __future__ import annotations

import fcntl
import os
import struct
import time
from pathlib import Path

from tests.isolation.conftest import MIB, Cluster
from tests.isolation.test_memory_grant import codes

REGION_LOCK = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 8, 0)  # struct flock


def wait_for_a_waiter(state: Path, timeout: float = 30) -> None:
    """Until a process blocks on a lock of `state`: /proc/locks lists waiters as `->` lines (the
    kernel offers no event for it, so this polls)."""
    inode = f":{state.stat().st_ino} "
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(
            "->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines()
        ):
            return
        time.sleep(0.01)
    raise AssertionError(f"no process waited for the lock of {state}")


def test_an_allocation_waits_for_the_locks_holder_and_goes_on_when_it_is_gone(
    cluster: Cluster,
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    assert cluster.cuload(container, "info").returncode == 0  # creates the shared state
    state = container.shared_dir / "state"
    holder = os.open(state, os.O_RDWR)
    try:
        fcntl.fcntl(holder, fcntl.F_OFD_SETLK, REGION_LOCK)
        alloc = cluster.sandbox.popen(
            container, [str(cluster.build.cuload), "alloc", "0", "mem", str(MIB), "1"]
        )
        try:
            wait_for_a_waiter(state)
        except AssertionError:
            alloc.kill()
            alloc.communicate()
            raise
    finally:
        os.close(holder)  # the holder is gone: the kernel drops its lock
    out, err = alloc.communicate(timeout=30)
    assert codes(out) == [0], out + err
