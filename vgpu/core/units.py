"""vGPU unit arithmetic and request validation.

A GPU has `CORES_PER_GPU` core units (1 % of its compute each). Memory is accounted internally in
thousandths of a MiB ("mMiB") so that a share *proportional* to a GPU's memory (the trace's
single-axis model: 47 % of a 16 GiB GPU) is an exact integer on every GPU size, while users ask in
memory units of a configurable block (default 256 MiB, as in GaiaGPU).

A container asks for ``cores < 100`` (a share of one GPU) or a positive multiple of 100 (that many
whole GPUs, exclusively, with all their memory).
"""

from __future__ import annotations

from vgpu.core.errors import InvalidRequest

CORES_PER_GPU = 100
DEFAULT_MEMORY_UNIT_MIB = 256
MMIB_PER_MIB = 1000


def mib_to_mmib(mib: int) -> int:
    """MiB to the internal memory unit."""
    return mib * MMIB_PER_MIB


def mmib_to_mib(mmib: int) -> float:
    """Internal memory unit to MiB (for display)."""
    return mmib / MMIB_PER_MIB


def is_whole(cores: int) -> bool:
    """Whether a core request means whole, exclusive GPUs."""
    return cores >= CORES_PER_GPU


def gpu_count(cores: int) -> int:
    """How many GPUs a core request occupies (0 for none, 1 for a share)."""
    if cores <= 0:
        return 0
    return cores // CORES_PER_GPU if cores >= CORES_PER_GPU else 1


def memory_need_mmib(cores: int, memory_mib: int | None, gpu_memory_mib: int) -> int:
    """Memory a fractional container needs on a GPU of `gpu_memory_mib`.

    An explicit ask is absolute; no ask means a share proportional to the cores (30 cores → 30 % of
    that GPU's memory), exactly, with no rounding.
    """
    if memory_mib is None:
        return gpu_memory_mib * MMIB_PER_MIB * cores // CORES_PER_GPU
    return memory_mib * MMIB_PER_MIB


def memory_units_given(
    cores: int, memory_mib: int | None, gpu_memory_mib: int, unit_mib: int
) -> int:
    """The memory, in units of `unit_mib`, a container asking `cores` (and `memory_mib`, None:
    in proportion) is given on a GPU of `gpu_memory_mib`: what its shares there hold
    (`memory_units_held`), whole GPUs all their memory, a share what `memory_need_mmib` gives
    it. What queues count for a pod not yet placed, on the largest GPU
    (`vgpu.core.queues.jobs.given_memory`)."""
    if cores <= 0:
        return 0
    if is_whole(cores):
        return gpu_count(cores) * memory_units_held(
            CORES_PER_GPU, mib_to_mmib(gpu_memory_mib), unit_mib
        )
    return memory_units_held(cores, memory_need_mmib(cores, memory_mib, gpu_memory_mib), unit_mib)


def memory_units_held(cores: int, memory_mmib: int, unit_mib: int) -> int:
    """The memory, in units of `unit_mib`, one GPU share of `cores` and `memory_mmib` holds (a
    placed pod's share, `Assignment.charged`): a whole GPU (`cores` of `CORES_PER_GPU` or more;
    placement gives it all the GPU's memory) its memory in whole units, as a GPU's capacity is
    counted; a share rounded up, so that no share counts less than it holds (a 1-core share of
    a 16 GiB GPU is 0.64 units: counted 1, never 0). The one rule queues count memory by, for
    a placed pod on the GPU it holds (`vgpu.core.queues.jobs.held_memory`) and for one not yet
    placed on the GPU it would be given (`memory_units_given`)."""
    if memory_mmib <= 0:
        return 0
    unit = mib_to_mmib(unit_mib)
    if is_whole(cores):
        return memory_mmib // unit
    return -(-memory_mmib // unit)


def _as_int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
        raise InvalidRequest(field, f"{value!r} is not a whole number", "use an integer")
    return value


def validate_cores(value: object, field: str = "cores") -> int:
    """Parse and validate a core-unit request: 0, 1..99, or a positive multiple of 100."""
    cores = _as_int(value, field)
    if cores < 0:
        raise InvalidRequest(field, f"{cores} is negative", "ask for 0..99 or a multiple of 100")
    if cores > CORES_PER_GPU and cores % CORES_PER_GPU:
        raise InvalidRequest(
            field,
            f"{cores} is more than one GPU but not a multiple of {CORES_PER_GPU}",
            f"ask for a share below {CORES_PER_GPU} or whole GPUs "
            f"({cores // CORES_PER_GPU * CORES_PER_GPU} or {(cores // CORES_PER_GPU + 1) * 100})",
        )
    return cores


def validate_memory(
    value: object, cores: int, *, field: str = "memory", largest_gpu_mib: int | None = None
) -> int | None:
    """Parse and validate a GPU memory ask in MiB (None means "proportional to cores")."""
    if value is None:
        return None
    mib = _as_int(value, field)
    if mib < 0:
        raise InvalidRequest(
            field, f"{mib} MiB is negative", "ask for a positive amount or omit it"
        )
    if mib == 0:
        return None
    if cores == 0:
        raise InvalidRequest(
            field, "GPU memory asked without GPU cores", "add a cores request (1..99) for the share"
        )
    if is_whole(cores):
        raise InvalidRequest(
            field,
            "whole GPUs come with all their memory",
            "omit the memory request when asking for multiples of 100 cores",
        )
    if largest_gpu_mib is not None and mib > largest_gpu_mib:
        raise InvalidRequest(
            field,
            f"{mib} MiB is more than the largest GPU has ({largest_gpu_mib} MiB)",
            "ask for less memory or for a whole GPU",
        )
    return mib


def memory_units_to_mib(units: int, unit_mib: int = DEFAULT_MEMORY_UNIT_MIB) -> int:
    """Memory units (blocks) as asked through the device plugin resource, in MiB."""
    return units * unit_mib
