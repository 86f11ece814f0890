"""Which vgpu container a host process belongs to, from its `/proc/<pid>/mountinfo` (no I/O).

The agent corrects each container's cores from NVML's per-process utilisation, so it must map a
process to its container directory. The container's `/run/vgpu` is a bind mount of
`<state dir>/containers/<id>/limits`; the kernel writes the mount's root (the source path within
its filesystem) into mountinfo, and a process cannot rewrite that line. A process that stacks
another mount on `/run/vgpu` adds a line but cannot remove the original; lines naming two
different ids name no container (the process is then unattributed, which never raises anyone's
scale).
"""

from __future__ import annotations

import re

from vgpu.node.container_dirs import CONTAINERS

MOUNT_POINT = "/run/vgpu"
_ROOT = re.compile(rf"/{CONTAINERS}/([0-9a-f]{{32}})/limits")


def container_of_mountinfo(text: str) -> str | None:
    """The container directory id whose `limits` is mounted at `/run/vgpu`, or None."""
    found: set[str] = set()
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) < 5 or _unescape(fields[4]) != MOUNT_POINT:
            continue
        match = _ROOT.search(_unescape(fields[3]))
        if match is not None and match.end() == len(_unescape(fields[3])):
            found.add(match[1])
    return found.pop() if len(found) == 1 else None


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (`\\040`)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)
