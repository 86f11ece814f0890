"""The file work of cutting a container's shared directory back to its bound (the rule is
`vgpu.node.shared_bound`'s): list it without following links, truncate a file, remove an entry.
The directory is the container's to write, so nothing here follows a link it put there or
blocks on a FIFO, and each step says what it could not do instead of raising.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from pathlib import Path

from vgpu.node.shared_bound import DirTmpfs, MountFacts, SharedEntry, bound_report

log = logging.getLogger(__name__)
MOUNTINFO = Path("/proc/self/mountinfo")


def entries(shared: Path) -> list[SharedEntry]:
    """The directory's entries as `lstat` shows them (none if it cannot be listed)."""
    out = []
    try:
        with os.scandir(shared) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone meanwhile
                out.append(SharedEntry(entry.name, stat.S_ISREG(st.st_mode), st.st_size))
    except OSError:
        return []
    return out


def truncate(path: Path, size: int) -> str | None:
    """Cut a regular file to `size` bytes without following a link the container put there;
    what went wrong, if anything (a file gone meanwhile is no problem)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{path.name}: {e.strerror or e}"
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.ftruncate(fd, size)
        return None
    except OSError as e:
        return f"{path.name}: {e.strerror or e}"
    finally:
        os.close(fd)


def remove(path: Path) -> str | None:
    """Remove an entry, a directory with what it holds (`shutil.rmtree` neither follows links
    nor can be led out of the tree on Linux); what went wrong, if anything."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError as e:
        return f"{path.name}: {e.strerror or e}"
    return f"{path.name}: could not be removed" if os.path.lexists(path) else None


def _unescape(field: str) -> str:
    """A mountinfo path field: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def mount_facts(root: Path, mountinfo: Path = MOUNTINFO) -> MountFacts:
    """Whether `root` is a mount point of its own (this process's mount table), its filesystem
    type and size; a failure to look is a `problem`, never an exception."""
    if not root.is_dir():
        return MountFacts(str(root), False, problem="it does not exist yet")
    try:
        real = os.path.realpath(root)
        fstype, own = "", False
        for line in mountinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            fields, _, rest = line.partition(" - ")
            parts = fields.split()
            if len(parts) > 4 and _unescape(parts[4]) == real:
                own, fstype = True, (rest.split() or [""])[0]  # the last mount there wins
        st = os.statvfs(real)
    except OSError as e:
        return MountFacts(str(root), False, problem=f"cannot examine it: {e.strerror or e}")
    return MountFacts(str(root), own, fstype, st.f_blocks * st.f_frsize)


def report_bound(root: Path, each: DirTmpfs | None = None) -> bool:
    """Log, in one line, whether the shared files under `root` have a hard bound (`each`: the
    tmpfs each new directory gets, if any); returns it."""
    hard, line = bound_report(mount_facts(root), each)
    (log.info if hard else log.warning)("%s", line)
    return hard
