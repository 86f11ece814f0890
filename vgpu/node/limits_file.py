"""The `limits` and `activity` files shared with vgpu-core (format: vgpu-core/README.md).

The node agent is the one writer of `limits` and the interposer its reader; the interposer is the
one writer of `activity` and the agent its reader. Both formats are defined once, in the
contract, and mirrored here: `render_limits` refuses anything the library would refuse, so a file
the agent writes never makes a container fail closed by accident, and `parse_limits` refuses what
the library refuses, so the agent can re-read its own files after a restart and a test can pin
both ends against each other. The files themselves are written and read by
`vgpu.adapters.container_dirs` (`write_limits`, `read_limits`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.core.contention import SCALE_MAX, SCALE_NEUTRAL
from vgpu.core.errors import VgpuError

LIMITS_NAME = "limits"
ACTIVITY_NAME = "activity"
STATE_NAME = "state"  # the library's accounting region (vgpu-core/src/region.c)
SHARED_FILES = (STATE_NAME, ACTIVITY_NAME)  # all the library keeps in its shared directory
HEADER = "vgpu-limits 1"
MAX_LIMITS_BYTES = 4096
MAX_DEVICES = 16
MAX_MEMORY_BYTES = (1 << 63) - 1  # the contract's bound; vgpu-core's parser refuses above it too
ACTIVITY_MAGIC = b"VGPUACT2"  # written by a library that reads `scale`
ACTIVITY_MAGIC_V1 = b"VGPUACT1"  # the same layout, by a library that predates `scale`
ACTIVITY_BYTES = len(ACTIVITY_MAGIC) + 8 * MAX_DEVICES

_HEX = "[0-9a-f]"
_UUID = re.compile(rf"(GPU|MIG)-{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}")
_NUMBER = re.compile(r"0|[1-9][0-9]{0,19}")
_FIELDS = ("memory", "cores", "limit", "allowance", "scale")


class LimitsError(VgpuError, ValueError):
    """A limits or activity file, or values for one, break the contract; the message says where."""


@dataclass(frozen=True, slots=True)
class DeviceLimit:
    """One `device` line: a GPU by UUID, its memory limit in bytes and three core percentages."""

    uuid: str
    memory: int
    cores: int
    limit: int
    allowance: int
    scale: int = SCALE_NEUTRAL

    def problem(self) -> str | None:
        """What breaks the contract's bounds in this line (None: nothing)."""
        if not _UUID.fullmatch(self.uuid):
            return f"uuid {self.uuid!r} is not a GPU-/MIG- UUID as NVML reports it"
        if not 1 <= self.memory <= MAX_MEMORY_BYTES:
            return f"memory={self.memory} is outside 1..{MAX_MEMORY_BYTES} bytes"
        if not 1 <= self.cores <= self.limit <= 100:
            return f"cores={self.cores} limit={self.limit}: need 1 <= cores <= limit <= 100"
        if not self.cores <= self.allowance <= self.limit:
            return f"allowance={self.allowance}: need cores ({self.cores}) <= it <= limit"
        if not SCALE_NEUTRAL <= self.scale <= SCALE_MAX:
            return f"scale={self.scale}: need {SCALE_NEUTRAL} <= it <= {SCALE_MAX} (permille)"
        return None


def render_limits(devices: Sequence[DeviceLimit]) -> str:
    """The file's text for `devices` (in CUDA_VISIBLE_DEVICES order); raises LimitsError."""
    if not 1 <= len(devices) <= MAX_DEVICES:
        raise LimitsError(f"limits: {len(devices)} devices; the format holds 1 to {MAX_DEVICES}")
    seen: set[str] = set()
    lines = [HEADER]
    for n, d in enumerate(devices):
        problem = d.problem()
        if problem is not None:
            raise LimitsError(f"limits device {n}: {problem}")
        if d.uuid in seen:
            raise LimitsError(f"limits device {n}: {d.uuid} is listed twice")
        seen.add(d.uuid)
        lines.append(
            f"device {d.uuid} memory={d.memory} cores={d.cores} limit={d.limit} "
            f"allowance={d.allowance}" + (f" scale={d.scale}" if d.scale != SCALE_NEUTRAL else "")
        )
    text = "\n".join(lines) + "\n"
    if len(text) > MAX_LIMITS_BYTES:  # cannot happen with 16 lines; kept as the contract's bound
        raise LimitsError(f"limits: {len(text)} bytes, over {MAX_LIMITS_BYTES}")
    return text


def parse_limits(text: str) -> tuple[DeviceLimit, ...]:
    """The devices of a limits file, refusing exactly what the library refuses."""
    if len(text.encode("utf-8", "replace")) > MAX_LIMITS_BYTES:
        raise LimitsError(f"limits: over {MAX_LIMITS_BYTES} bytes")
    if not text.isascii():
        raise LimitsError("limits: not ASCII")
    if not text.endswith("\n"):
        raise LimitsError("limits: the last line does not end in a newline")
    lines = text[:-1].split("\n")
    if lines[0] != HEADER:
        raise LimitsError(f"limits line 1: {lines[0][:40]!r} is not {HEADER!r}")
    devices = [_device(line, n) for n, line in enumerate(lines[1:], start=2)]
    if not 1 <= len(devices) <= MAX_DEVICES:
        raise LimitsError(f"limits: {len(devices)} device lines; need 1 to {MAX_DEVICES}")
    uuids = [d.uuid for d in devices]
    if len(set(uuids)) != len(uuids):
        raise LimitsError("limits: a device UUID is listed twice")
    return tuple(devices)


def _device(line: str, n: int) -> DeviceLimit:
    parts = line.split(" ")
    if len(parts) not in (6, 7) or parts[0] != "device":
        raise LimitsError(
            f"limits line {n}: expected 'device UUID memory= cores= limit= allowance='"
        )
    values: list[int] = []
    for part, name in zip(parts[2:], _FIELDS[: len(parts) - 2], strict=True):
        key, sep, value = part.partition("=")
        if key != name or not sep or not _NUMBER.fullmatch(value):
            raise LimitsError(f"limits line {n}: expected {name}=<decimal>, got {part[:40]!r}")
        values.append(int(value))
    device = DeviceLimit(parts[1], *values)
    problem = device.problem()
    if problem is not None:
        raise LimitsError(f"limits line {n}: {problem}")
    return device


def parse_activity(data: bytes) -> tuple[int, ...]:
    """The 16 last-launch times (CLOCK_MONOTONIC ns; 0 = never) of an activity file."""
    if len(data) < ACTIVITY_BYTES or not data.startswith((ACTIVITY_MAGIC, ACTIVITY_MAGIC_V1)):
        raise LimitsError(
            f"activity: expected {ACTIVITY_MAGIC.decode()} (or {ACTIVITY_MAGIC_V1.decode()}) and "
            f"{MAX_DEVICES} slots ({ACTIVITY_BYTES} bytes), got {len(data)} bytes"
        )
    return struct.unpack_from(f"<{MAX_DEVICES}Q", data, len(ACTIVITY_MAGIC))


def reads_scale(data: bytes) -> bool:
    """Whether the library that wrote this activity file reads `scale` (an older one would
    refuse a limits file with it, so the agent writes none for its container)."""
    return data.startswith(ACTIVITY_MAGIC)


def render_activity(times: Sequence[int], magic: bytes = ACTIVITY_MAGIC) -> bytes:
    """An activity file (the library writes it; tests and the stand-in use this to)."""
    slots = list(times) + [0] * (MAX_DEVICES - len(times))
    if len(slots) != MAX_DEVICES:
        raise LimitsError(f"activity: {len(times)} slots, at most {MAX_DEVICES}")
    return magic + struct.pack(f"<{MAX_DEVICES}Q", *slots)
